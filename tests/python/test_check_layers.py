"""scripts/check_layers.py (make check-layers): it must reject an upward dependency in a
synthetic tree (so the real check cannot pass vacuously) and accept the real tree."""
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "check_layers.py"

README = """## Layout
| folder | layer (rank) | holds |
|---|---|---|
| `src/core/` | core (0) | base |
| `src/attn/` | attn (3) | kernels |
| `src/model/` | model (4) | model |
"""


def make_tree(tmp_path, files):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(README)
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel in files:
        if rel.endswith(".c"):
            o = tmp_path / "build" / (rel[:-2] + ".o")
            o.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cc", "-c", "-Isrc", rel, "-o", str(o)], cwd=tmp_path, check=True)


def run(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), str(root / "build")],
                          capture_output=True, text=True)


def compile_tree(root, files):
    """Write each source of files (path -> text) under root and compile it to build/*.o."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        o = root / "build" / (rel[:-2] + ".o")
        o.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-c", rel, "-o", str(o)], cwd=root, check=True)


def write_layout(root, *rows):
    """docs/architecture.md under root with a layer table of rows ('src/tasks', 'experiments (6a)')."""
    (root / "docs").mkdir()
    (root / "docs" / "architecture.md").write_text(
        "## Layout\n| folder | layer (rank) | holds |\n|---|---|---|\n"
        + "".join(f"| `{folder}/` | {layer} | x |\n" for folder, layer in rows))


def violations(r):
    """The 'layer violation' lines of a failed check (its exit status must be 1)."""
    assert r.returncode == 1, r.stdout
    return [ln for ln in r.stdout.splitlines() if ln.startswith("layer violation")]


def test_rejects_kernel_calling_model(tmp_path):
    # the shape of the old bug: a kernel (attn) calling into a layer above it
    make_tree(tmp_path, {
        "src/attn/kern.c": "int la_model_hook(int);\nint la_kern(int x){return la_model_hook(x);}\n",
        "src/model/gpt.c": "int la_kern(int);\nint la_model_hook(int x){return x + 1;}\n"
                           "int la_model_run(int x){return la_kern(x);}\n",
    })
    line = violations(run(tmp_path))
    assert len(line) == 1, line  # model -> attn is fine, attn -> model is not
    assert "src/attn/kern.c" in line[0] and "la_model_hook" in line[0] and "src/model/gpt.c" in line[0]


def test_rejects_tasks_calling_study(tmp_path):
    # issue 32: tasks/diagnose_passkey.c called la_study_passkey_seed of study/study_run.c.
    # tasks (6a) and study (6b) are one layer ordered by the letter: study -> tasks is fine,
    # tasks -> study is refused
    write_layout(tmp_path, ("src/core", "core (0)"), ("src/tasks", "experiments (6a)"),
                 ("src/study", "experiments (6b)"))
    files = {
        "src/tasks/diagnose_passkey.c": "unsigned long la_study_passkey_seed(int);\n"
                                        "unsigned long la_diag_pk(int x){return la_study_passkey_seed(x);}\n",
        "src/study/study_run.c": "unsigned long la_passkey_make(int);\n"
                                 "unsigned long la_study_passkey_seed(int x){return x + 1;}\n"
                                 "unsigned long la_study_run(int x){return la_passkey_make(x);}\n",
        "src/tasks/passkey.c": "unsigned long la_passkey_make(int x){return x;}\n",
    }
    compile_tree(tmp_path, files)
    line = violations(run(tmp_path))
    assert len(line) == 1, line  # study -> tasks (la_passkey_make) is allowed
    assert "src/tasks/diagnose_passkey.c" in line[0] and "la_study_passkey_seed" in line[0]
    assert "inside the experiments layer" in line[0]
    # the same tree with the seed moved down into tasks/ passes
    (tmp_path / "src/study/study_run.c").write_text(
        "unsigned long la_passkey_make(int);\nunsigned long la_study_run(int x){return la_passkey_make(x);}\n")
    (tmp_path / "src/tasks/passkey.c").write_text(
        "unsigned long la_passkey_make(int x){return x;}\nunsigned long la_study_passkey_seed(int x){return x + 1;}\n")
    for rel in ("src/study/study_run.c", "src/tasks/passkey.c"):
        subprocess.run(["cc", "-c", rel, "-o", str(tmp_path / "build" / (rel[:-2] + ".o"))], cwd=tmp_path, check=True)
    r = run(tmp_path)
    assert r.returncode == 0, r.stdout


def test_rejects_runner_calling_study(tmp_path):
    # issue 32: the grid runner (runner, 6b) is below the study (6c) that runs on it:
    # study -> runner is fine, runner -> study is refused, naming the file and the symbol
    write_layout(tmp_path, ("src/core", "core (0)"), ("src/tasks", "experiments (6a)"),
                 ("src/runner", "experiments (6b)"), ("src/study", "experiments (6c)"))
    files = {
        "src/runner/grid.c": "int la_study_write_tables(int);\n"
                             "int la_grid_run(int x){return la_study_write_tables(x);}\n",
        "src/study/study_run.c": "int la_grid_run(int);\nint la_study_write_tables(int x){return x;}\n"
                                 "int la_study_run(int x){return la_grid_run(x);}\n",
    }
    compile_tree(tmp_path, files)
    line = violations(run(tmp_path))
    assert len(line) == 1, line  # study -> runner (la_grid_run) is allowed
    assert "src/runner/grid.c" in line[0] and "la_study_write_tables" in line[0]
    assert "inside the experiments layer" in line[0]
    # without the upward call the tree passes
    (tmp_path / "src/runner/grid.c").write_text("int la_grid_run(int x){return x;}\n")
    subprocess.run(["cc", "-c", "src/runner/grid.c", "-o", str(tmp_path / "build/src/runner/grid.o")],
                   cwd=tmp_path, check=True)
    r = run(tmp_path)
    assert r.returncode == 0, r.stdout


def test_rejects_io_in_tasks(tmp_path):
    # issue 32: tasks/ makes examples and scores with no I/O and no clock; the runner above
    # reads the documents (runner/docs.c) and may open files, tasks/ may not, neither through
    # libc nor through src/io/
    write_layout(tmp_path, ("src/core", "core (0)"), ("src/io", "io (1)"), ("src/tasks", "experiments (6a)"),
                 ("src/runner", "experiments (6b)"))
    files = {
        "src/io/shard.c": "int la_shard_x(const char *p){return p != 0;}\n",
        "src/tasks/gen.c": "#include <stdio.h>\n#include <time.h>\nint la_shard_x(const char *);\n"
                           "int la_gen(void){FILE *f = fopen(\"d\", \"r\"); return (int)time(0) + la_shard_x(\"d\") + !f;}\n",
        "src/runner/load.c": "#include <stdio.h>\nint la_shard_x(const char *);\n"
                             "int la_load(void){FILE *f = fopen(\"d\", \"r\"); return la_shard_x(\"d\") + !f;}\n",
    }
    compile_tree(tmp_path, files)
    lines = violations(run(tmp_path))
    assert len(lines) == 3, lines  # the runner's fopen and io call are allowed
    assert all("src/tasks/gen.c" in ln and "no I/O" in ln for ln in lines), lines
    assert {"fopen", "time", "la_shard_x"} == {ln.split("uses ")[1].split(":")[0] for ln in lines}
    # a pure generator passes
    (tmp_path / "src/tasks/gen.c").write_text("int la_gen(int x){return 2 * x;}\n")
    subprocess.run(["cc", "-c", "src/tasks/gen.c", "-o", str(tmp_path / "build/src/tasks/gen.o")],
                   cwd=tmp_path, check=True)
    r = run(tmp_path)
    assert r.returncode == 0, r.stdout


def test_rejects_private_header(tmp_path):
    make_tree(tmp_path, {
        "src/attn/k_internal.h": "#define K 1\n",
        "src/attn/k.c": '#include "attn/k_internal.h"\nint la_k(void){return K;}\n',
        "src/model/m.c": '#include "attn/k_internal.h"\nint la_m(void){return K;}\n',
    })
    r = run(tmp_path)
    assert r.returncode == 1
    assert "src/model/m.c: includes attn/k_internal.h" in r.stdout


def test_accepts_downward_tree(tmp_path):
    make_tree(tmp_path, {
        "src/core/c.c": "int la_c(void){return 1;}\n",
        "src/model/m.c": "int la_c(void);\nint la_m(void){return la_c();}\n",
    })
    r = run(tmp_path)
    assert r.returncode == 0, r.stdout
    assert "check-layers: ok (2 objects" in r.stdout


def test_table_is_read_from_docs_architecture(tmp_path):
    # the table moved out of README.md: a README.md holding it is not read
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "src" / "core").mkdir(parents=True)
    (tmp_path / "src" / "core" / "c.c").write_text("int la_c(void){return 1;}\n")
    (tmp_path / "build" / "src" / "core").mkdir(parents=True)
    subprocess.run(["cc", "-c", "src/core/c.c", "-o", "build/src/core/c.o"], cwd=tmp_path, check=True)
    r = run(tmp_path)
    assert r.returncode != 0 and "docs/architecture.md" in r.stdout + r.stderr, r.stdout + r.stderr


def test_self_test_passes():
    r = subprocess.run([sys.executable, str(SCRIPT), "--self-test"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_real_tree_is_layered(build_dir):
    r = subprocess.run([sys.executable, str(SCRIPT), "--root", str(ROOT), str(build_dir)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
