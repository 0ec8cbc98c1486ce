"""Build of the longattn Python package (metadata in pyproject.toml).

The extension longattn._native is made by cffi (python/longattn/_build.py) from the C
library's own sources; `pip install .` builds it, and `python setup.py build_ext --inplace`
puts it next to python/longattn/ for the tests (make test-python does that).
"""
from setuptools import setup

setup(
    package_dir={"": "python"},
    packages=["longattn"],
    cffi_modules=["python/longattn/_build.py:ffibuilder"],
)
