"""Build of the longattn Python package (metadata in pyproject.toml).

The extension longattn._native is made by cffi (python/longattn/_build.py) and links the C
library as the Makefile builds it: build_ext first runs `make lib` (LA_BUILD names the
build folder, default build/), so `pip install .` needs make and a C compiler, as `make`
does. `python setup.py build_ext --inplace` puts the extension next to python/longattn/ for
the tests (make test-python does that).
"""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class build_ext_with_make(build_ext):
    """build_ext that first builds the C library with the project's Makefile."""

    def run(self):
        build = os.environ.get("LA_BUILD", "build")
        jobs = [] if "MAKEFLAGS" in os.environ else [f"-j{os.cpu_count() or 1}"]  # under make: its jobserver
        subprocess.check_call(["make", "-C", ROOT, *jobs, f"BUILD={build}", f"{build}/liblongattn.a"])
        super().run()


setup(
    package_dir={"": "python"},
    packages=["longattn"],
    cffi_modules=["python/longattn/_build.py:ffibuilder"],
    cmdclass={"build_ext": build_ext_with_make},
)
