"""The documentation is tested (scripts/check_docs.py): README.md and docs/*.md against the
tree and against the program itself. Each check also runs on a broken fixture document,
which it must reject, so a check that stopped looking would fail here."""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_docs  # noqa: E402


@pytest.fixture(scope="module")
def prog(build_dir):
    return check_docs.Program(str(build_dir / "longattn"))


def test_readme_fits_on_a_page():
    n = len((ROOT / "README.md").read_text().split("\n"))
    assert n <= 250, f"README.md has {n} lines: move detail to a docs/ page"


def test_links_and_anchors_resolve():
    assert check_docs.check_links(str(ROOT)) == []


def test_every_command_line_is_accepted_by_the_program(prog):
    assert check_docs.check_commands(str(ROOT), prog) == []


def test_cli_reference_is_the_programs_help(prog):
    assert check_docs.check_cli_doc(str(ROOT), prog) == []


def test_no_machine_specific_paths():
    assert check_docs.check_paths(str(ROOT)) == []


def test_c_blocks_compile_against_the_public_header(build_dir):
    n = sum(1 for rel in check_docs.documents(str(ROOT))
            for b in check_docs.fenced_blocks(check_docs.read(str(ROOT), rel)) if b[0] == "c")
    assert n >= 4
    assert check_docs.check_c_blocks(str(ROOT), str(build_dir)) == []


def test_runnable_examples_exit_0(build_dir):
    assert len(check_docs.runnable_examples(str(ROOT))) >= 5
    assert check_docs.check_examples(str(ROOT), str(build_dir)) == []


def test_github_anchor_rule():
    assert check_docs.github_slug("Retrieval: why only RoPE learns it, and the `paper` preset (issue #19)") == \
        "retrieval-why-only-rope-learns-it-and-the-paper-preset-issue-19"
    assert check_docs.github_slug("The `la_attn_forward` kernel") == "the-la_attn_forward-kernel"
    assert check_docs.anchors("# A\n## A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1", "a-2"}


BROKEN_README = """# fixture
[page](docs/page.md) [section](docs/page.md#the-section) [gone](docs/missing.md)
[bad anchor](docs/page.md#no-such-heading) `[not a link](nowhere.md)`
"""
BROKEN_PAGE = """# Page
## The section
```sh
./build/longattn attn --spec softmax+causal --q q.npy --k k.npy --v v.npy --out o.npy
./build/longattn frobnicate --out x
mpirun -np 2 ./build/longattn attn --spec softmax --bogus-option 3 \\
    --q q.npy
./build/longattn bench attn --quick --threads=2 --no-such-flag
./build/longattn bench nosuch
```
```console
$ ./build/longattn train --data d --lr-typo 3
longattn train: this is output, not a command --xyz
```
Create the venv at /home/someone/venv first.

<!-- test: run -->
```sh
./build/longattn attn --spec nonsense --q q.npy --k k.npy --v v.npy --out o.npy
```

<!-- test: run -->
```sh
./build/longattn attn --spec softmax+causal --q q.npy --k k.npy --v v.npy --out o.npy
```

```c
#include "longattn.h"
int f(void) { return la_no_such_function(); }
```

```c
#include "longattn.h"
int f(la_spec *s) { return (int)la_spec_parse("softmax", s); }
```
"""


def test_checks_reject_a_broken_document(tmp_path, prog, build_dir):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(BROKEN_README)
    (tmp_path / "docs" / "page.md").write_text(BROKEN_PAGE)
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n")
    (tmp_path / "include").symlink_to(ROOT / "include")
    (tmp_path / "Makefile").symlink_to(ROOT / "Makefile")
    root = str(tmp_path)

    links = check_docs.check_links(root)
    assert any("docs/missing.md does not exist" in p for p in links), links
    assert any("#no-such-heading" in p for p in links), links
    assert any("does not link to docs/orphan.md" in p for p in links), links
    assert len(links) == 3, links  # the section link and the code span are fine

    cmds = check_docs.check_commands(root, prog)
    want = ["unknown command 'frobnicate'", "no option --bogus-option", "no option --no-such-flag",
            "unknown benchmark 'bench nosuch'", "no option --lr-typo"]
    for w in want:
        assert any(w in p for p in cmds), (w, cmds)
    assert len(cmds) == len(want), cmds  # valid lines, '--threads=2' and console output pass
    assert any("page.md:6: `longattn attn` has no option --bogus-option" in p for p in cmds), cmds  # where it starts

    paths = check_docs.check_paths(root)
    assert len(paths) == 1 and "/home/someone/venv" in paths[0], paths

    ran = check_docs.check_examples(root, str(build_dir))
    assert len(ran) == 1 and "exited 2" in ran[0] and "nonsense" in ran[0], ran

    c = check_docs.check_c_blocks(root, str(build_dir))
    assert len(c) == 1 and "la_no_such_function" in c[0], c


def test_cli_reference_check_sees_a_stale_or_missing_help(tmp_path, prog):
    text = (ROOT / "docs" / "cli.md").read_text()
    (tmp_path / "docs").mkdir()
    stale = text.replace("print this help and exit", "print the help", 1)
    (tmp_path / "docs" / "cli.md").write_text(stale)
    p = check_docs.check_cli_doc(str(tmp_path), prog)
    assert len(p) == 1 and "differs from the program's" in p[0], p
    check_docs.write_cli_doc(str(tmp_path), prog)
    assert (tmp_path / "docs" / "cli.md").read_text() == text
    (tmp_path / "docs" / "cli.md").write_text(text.replace("<!-- help: critical -->", ""))
    p = check_docs.check_cli_doc(str(tmp_path), prog)
    assert len(p) == 1 and "no help block of `longattn critical`" in p[0], p


def test_self_test_passes(build_dir):
    assert check_docs.self_test(str(build_dir / "longattn")) == 0
