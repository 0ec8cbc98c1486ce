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
