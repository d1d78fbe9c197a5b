"""Every test's `hlogen run` writes its executable cache under pytest's temporary
directory, never into the user's ~/.cache/hlogen (tests that need their own set it)."""
import pytest


@pytest.fixture(autouse=True, scope="session")
def _executable_cache_in_a_temporary_directory(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    patch.setenv("HLOGEN_CACHE_DIR", str(tmp_path_factory.mktemp("executable-cache")))
    yield
    patch.undo()
