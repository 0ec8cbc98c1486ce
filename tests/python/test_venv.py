"""The test environment itself: the reference packages the other tests rely on import."""


def test_reference_packages_import():
    import numpy
    import gguf  # noqa: F401

    # Debian's torch 1.13 needs numpy 1.x (scripts/requirements-test.txt pins it)
    assert int(numpy.__version__.split(".")[0]) == 1
