"""The llama.cpp campaign as a target: the baseline is llama-server with no tuning flag, a knob
renders to its flag only when set, the accuracy probe asks the written questions and names the
output-changing knobs, and a machine without the build gets one line naming the install step."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbor.spec import SpecError, load_spec
from arbor.targets.serving import ServingAdapter

REPO = Path(__file__).resolve().parents[3]


def _adapter() -> ServingAdapter:
    return ServingAdapter(load_spec(REPO / "campaigns" / "serving_llamacpp.yaml"))


def test_the_baseline_is_the_server_with_no_tuning_flag(monkeypatch, tmp_path):
    monkeypatch.setenv("ARBOR_LLAMA_SERVER", "/bin/true")  # any file: the argv is only rendered
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("ARBOR_LLAMA_MODEL", str(gguf))
    a = _adapter()
    argv = a.render_argv(a.t.defaults())
    assert argv[:5] == ["/bin/true", "-m", str(gguf), "-a", "smollm2-135m"]
    assert not {"-np", "-t", "-tb", "-b", "-ub", "-c", "-ctk", "-ctv", "-fa", "--no-cont-batching"} & set(argv)
    tuned = a.render_argv({**a.t.defaults(), "parallel": 8, "cache_type_k": "q8_0", "cont_batching": False})
    assert tuned[-5:] == ["-np", "8", "--no-cont-batching", "-ctk", "q8_0"]


def test_kv_quantization_gets_the_written_probe_and_is_named():
    a = _adapter()
    base = a.t.defaults()
    assert not a.needs_accuracy({**base, "parallel": 8, "ubatch_size": 128})
    cfg = {**base, "parallel": 8, "cache_type_k": "q4_0"}
    assert a.output_changes(cfg) == {"cache_type_k": "q4_0"}
    req = a.request(a.canonical(cfg))
    assert req.accuracy is not None and req.accuracy.knobs == {"cache_type_k": "q4_0"}
    probe = req.accuracy.requests
    assert len(probe) == 32 and all(r.max_tokens == 16 and r.messages for r in probe)
    assert "capital of France" in probe[0].messages[0]["content"]


def test_no_build_here_is_one_line_naming_the_install_step(monkeypatch, tmp_path):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ARBOR_LLAMA_SERVER", raising=False)
    with pytest.raises(SpecError) as info:
        _adapter().validate()
    (line,) = info.value.problems
    assert "llama-server is not built" in line and "python -m arbor.sandbox.serving.llamacpp_install" in line
