"""The Python package is built from the library's own sources, with the Makefile's link
libraries, and the Python example of docs/python.md runs."""
import pathlib
import re
import subprocess
import sys

from longattn import _build

ROOT = pathlib.Path(__file__).resolve().parents[2]


def make_var(name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "--eval",
                        f"print-var: ; @echo $({name})", "print-var"],
                       cwd=ROOT, capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_extension_links_the_makefile_library():
    """The extension links the static library make builds from LIB_SRC (every src/*/*.c
    but src/cli), not a second compilation of the sources."""
    assert _build.static_library() == "build/liblongattn.a" or "LA_BUILD" in __import__("os").environ
    assert _build.ffibuilder._assigned_source[3]["extra_objects"] == [_build.static_library()]
    assert "sources" not in _build.ffibuilder._assigned_source[3]
    src = make_var("LIB_SRC")
    assert len(src) > 20 and not any(s.startswith("src/cli/") for s in src)


def test_link_libraries_are_shared_with_the_makefile():
    libs = make_var("LINK_LIBS")
    assert libs == _build.link_libraries() and "openblas" in libs
    assert all("-l" + lib in make_var("LDLIBS_ALL") for lib in libs)


def test_docs_python_example_runs(tmp_path):
    page = (ROOT / "docs" / "python.md").read_text()
    block = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    (tmp_path / "ex.py").write_text(block)
    r = subprocess.run([sys.executable, str(tmp_path / "ex.py")], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "python"), "OMP_NUM_THREADS": "1",
                            "PATH": "/usr/bin:/bin"}, timeout=1800)  # a hang guard only
    assert r.returncode == 0, r.stderr[-3000:]
    assert "max |torch - numpy|" in r.stdout, r.stdout
