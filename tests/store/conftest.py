import pytest

from arbor.search_tree import open_store


@pytest.fixture(params=["sqlite", "pg"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'arbor.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()
