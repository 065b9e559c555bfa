import pytest


@pytest.fixture(scope="session")
def cpp_build(tmp_path_factory):
    """The generated C++ kernels of test_cpp_schedule.py, test_cpp_reduce.py and test_cpp_codegen.py
    built as ONE extension for the session (a build is mostly torch's headers: ~60 s of CPU on the
    2-core test VM), ``{file's suite: cpp_combined.Built}``. Under pytest-xdist every test that uses
    it runs on one worker (tests/conftest.py), so it is built once there too."""
    from tests.agents import test_cpp_codegen, test_cpp_reduce, test_cpp_schedule
    from tests.agents.cpp_combined import shared_build

    build_dir = tmp_path_factory.mktemp("cpp-ext")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", str(build_dir))
        return shared_build({"schedule": test_cpp_schedule.cases(), "reduce": test_cpp_reduce.cases(),
                             "codegen": test_cpp_codegen.cases()}, build_dir)
