"""Shared pytest fixtures: where the built C programs are (LA_BUILD, default build/)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def build_dir():
    """The build folder whose programs the tests run (make passes LA_BUILD)."""
    d = ROOT / os.environ.get("LA_BUILD", "build")
    if not (d / "longattn").exists():
        pytest.fail(f"{d}/longattn not built: run make first")
    return d


# The Python package: `make test-python` builds its extension in place (make python-ext),
# so the tests import longattn from python/ of this checkout, ahead of any installed copy.
import sys  # noqa: E402

sys.path.insert(0, str(ROOT / "python"))
