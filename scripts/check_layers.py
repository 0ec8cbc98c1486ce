#!/usr/bin/env python3
"""check_layers.py -- the layering rule of longattn, checked on the built objects.

Every folder under src/ (and bench/) belongs to exactly one layer. The table lives in
docs/architecture.md, section "Layout" (rows "| `src/<folder>/` | <layer> (<rank>) | ... |"),
and is read from there: one table for people and for this check. A file may use a symbol or
include a header of another folder only when that folder's layer is

  * the same layer (e.g. src/study and src/tasks, both "experiments"), or
  * a layer of lower rank.

Two different layers of the same rank are siblings (train and infer): neither may use the
other. Inside one layer, folders whose rank carries a letter are ordered by it: "(6a)" is
below "(6b)", below "(6c)": src/study (6c) may use src/runner (6b) and src/tasks (6a),
src/runner may use src/tasks, never the reverse (issue 32: the experiments' generators and
scorers never call the runners that use them, and the grid runner and report writer never
call the study that runs on them); folders of one
layer without a letter may use each other. Headers named *_internal.h are private to their folder (core/internal.h, the
library-wide base header, is the one shared internal header).

src/tasks/ holds pure generators and scorers (issue 32): its objects may not call file I/O
or a clock, neither from libc (fopen, stat, clock_gettime, ...) nor from longattn (core's
file reader, atomic files and clock, anything in src/io/); the runners above do that.

Symbols come from `nm -P` on BUILD/src/*/*.o and BUILD/bench/*.o: each undefined symbol
of an object is looked up among the symbols the other objects define. Includes come from
the #include "..." lines of src/ and bench/ sources.

usage: scripts/check_layers.py [--root DIR] [BUILD]      check (BUILD defaults to build)
       scripts/check_layers.py --self-test                the checker must reject a
                                                          synthetic upward dependency
Exit status 0 when clean, 1 with one line per violation naming file and symbol/header.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

TABLE_DOC = os.path.join("docs", "architecture.md")  # the page holding the layer table
ROW = re.compile(r"^\|\s*`((?:src/[A-Za-z0-9_]+|bench))/`\s*\|\s*([a-z]+)\s*\((\d+)([a-z]?)\)\s*\|")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def read_table(root):
    """folder ('src/attn', 'bench') -> (layer, rank, order), from docs/architecture.md's Layout
    table; order is the letter after the rank ('' when none): the order inside the layer."""
    path = os.path.join(root, TABLE_DOC)
    if not os.path.exists(path):
        raise SystemExit(f"{path}: missing: the layer table lives in {TABLE_DOC}, section Layout")
    table = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                folder, layer, rank, order = m.group(1), m.group(2), int(m.group(3)), m.group(4)
                if folder in table:
                    raise SystemExit(f"{path}: folder {folder}/ has two rows in the layer table")
                table[folder] = (layer, rank, order)
    if not table:
        raise SystemExit(f"{path}: no layer table found (rows like '| `src/core/` | core (0) | ... |' "
                         "in the Layout section)")
    ranks = {}
    for folder, (layer, rank, _) in table.items():
        if ranks.setdefault(layer, rank) != rank:
            raise SystemExit(f"{path}: layer {layer} has two ranks ({ranks[layer]} and {rank})")
    return table


def allowed(table, user, used):
    """May a file of folder `user` depend on folder `used`?"""
    if user == used:
        return True
    lu, ru, ou = table[user]
    ld, rd, od = table[used]
    if lu == ld:
        return not (ou and od) or od <= ou  # ordered folders of one layer: only downwards
    return rd < ru


def why(table, user, used):
    lu, ru, ou = table[user]
    ld, rd, od = table[used]
    if lu == ld:
        return (f"{user}/ ({lu} {ru}{ou}) would depend on {used}/ ({ld} {rd}{od}), a folder above "
                f"it inside the {lu} layer (move the code down or the caller up)")
    if ru == rd:
        return f"{lu} and {ld} are sibling layers"
    return f"{lu} (rank {ru}) would depend on {ld} (rank {rd}), a layer above it"


def folder_of(relpath):
    """'src/attn/x.c' -> 'src/attn'; 'bench/b.c' -> 'bench'; None outside."""
    parts = relpath.split("/")
    if parts[0] == "src" and len(parts) >= 3:
        return "src/" + parts[1]
    if parts[0] == "bench" and len(parts) >= 2:
        return "bench"
    return None


PURE = {"src/tasks"}  # folders without I/O or clocks
IMPURE = {"fopen", "fopen64", "fdopen", "freopen", "fread", "fwrite", "fclose", "fgets", "fputs", "fputc",
          "fprintf", "printf", "puts", "putchar", "open", "open64", "openat", "read", "write", "close",
          "stat", "stat64", "fstat", "fstat64", "lstat", "__xstat", "__xstat64", "opendir", "readdir",
          "readdir64", "mkdir", "rename", "unlink", "remove", "clock_gettime", "clock", "time",
          "gettimeofday", "la_now_s", "la_read_file", "la_fsync_parent_dir", "la_afile_open",
          "la_afile_commit", "la_afile_publish", "la_afile_sync"}


def nm_symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"nm failed on {obj}: {out.stderr.strip()}")
    defined, undefined = set(), set()
    for line in out.stdout.splitlines():
        p = line.split()
        if len(p) < 2:
            continue
        name, kind = p[0], p[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() and kind not in ("N",):  # global definitions (T D B R C V W ...)
            defined.add(name)
    return defined, undefined


def check(root, build):
    table = read_table(root)
    errors = []
    missing = set()

    def known(folder, what):
        if folder not in table:
            if folder not in missing:
                missing.add(folder)
                errors.append(f"{what}: folder {folder}/ has no row in {TABLE_DOC}'s layer table "
                              "(add one: every folder belongs to exactly one layer)")
            return False
        return True

    # symbols
    objs = sorted(glob.glob(os.path.join(build, "src", "*", "*.o")) +
                  glob.glob(os.path.join(build, "bench", "*.o")))
    if not any(os.path.exists(os.path.join(root, os.path.relpath(o, build)[:-2] + ".c")) for o in objs):
        raise SystemExit(f"no object files under {build}/src: build first (make), then check")
    defs, uses = {}, {}
    for o in objs:
        rel = os.path.relpath(o, build)[:-2] + ".c"
        if not os.path.exists(os.path.join(root, rel)):
            continue  # stale object of a moved or deleted source
        d, u = nm_symbols(o)
        uses[rel] = u
        for s in d:
            defs.setdefault(s, rel)
    n_edges = 0
    for rel, us in sorted(uses.items()):
        fu = folder_of(rel)
        if not known(fu, rel):
            continue
        for s in sorted(us):
            if fu in PURE and (s in IMPURE or folder_of(defs.get(s, "")) == "src/io"):
                errors.append(f"{rel}: uses {s}: {fu}/ makes examples and scores with no I/O and no "
                              "clock; read or time in the runner that calls it (src/runner/)")
            if s not in defs:
                continue  # libc, BLAS, cJSON, OpenMP ...
            fd = folder_of(defs[s])
            if not known(fd, defs[s]):
                continue
            n_edges += 1
            if not allowed(table, fu, fd):
                errors.append(f"{rel}: uses {s} from {defs[s]}: {why(table, fu, fd)}")

    # includes
    n_inc = 0
    srcs = sorted(glob.glob(os.path.join(root, "src", "*", "*.[ch]")) +
                  glob.glob(os.path.join(root, "bench", "*.[ch]")))
    for path in srcs:
        rel = os.path.relpath(path, root)
        fu = folder_of(rel)
        if not known(fu, rel):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if "/" not in inc:
                continue
            fd = "src/" + inc.split("/")[0]
            if not os.path.isdir(os.path.join(root, fd)):
                continue  # e.g. cjson/cJSON.h via quotes, or a tests/ header
            n_inc += 1
            if not known(fd, rel):
                continue
            base = os.path.basename(inc)
            if fd != fu and base.endswith("_internal.h"):
                errors.append(f"{rel}: includes {inc}, a header private to {fd}/ (*_internal.h); "
                              f"use that module's public API or move the code into {fd}/")
            elif not allowed(table, fu, fd):
                errors.append(f"{rel}: includes {inc}: {why(table, fu, fd)}")
    return errors, len(uses), n_edges, n_inc


SELF_TABLE = """## Layout
| folder | layer (rank) | holds |
|---|---|---|
| `src/core/` | core (0) | base |
| `src/model/` | model (1) | model |
| `src/train/` | train (2) | trainer |
| `src/infer/` | infer (2) | decoder |
| `src/io/` | io (1) | files |
| `src/tasks/` | experiments (3a) | generators |
| `src/runner/` | experiments (3b) | grid runner |
| `src/study/` | experiments (3c) | study |
"""


def self_test():
    """Synthetic trees that must fail (upward symbol, sibling symbol, upward include,
    private header) and one that must pass: the check cannot pass vacuously."""
    cc = os.environ.get("CC", "cc")
    cases = {
        # name: ({relpath: source}, substrings the report must contain or None for clean)
        "clean": ({"src/core/a.c": "int la_a(void){return 1;}\n",
                   "src/model/b.c": "int la_a(void);\nint la_b(void){return la_a();}\n"}, None),
        "upward symbol": ({"src/core/a.c": "int la_b(void);\nint la_a(void){return la_b();}\n",
                           "src/model/b.c": "int la_b(void){return 2;}\n"},
                          ["src/core/a.c", "la_b", "src/model/b.c"]),
        "sibling symbol": ({"src/train/t.c": "int la_i(void);\nint la_t(void){return la_i();}\n",
                            "src/infer/i.c": "int la_i(void){return 3;}\n"},
                           ["src/train/t.c", "la_i", "sibling"]),
        "upward include": ({"src/model/b.c": '#include "train/optim.h"\nint la_b(void){return 2;}\n',
                            "src/train/optim.h": "#define X 1\n",
                            "src/train/t.c": "int la_t(void){return 1;}\n"},
                           ["src/model/b.c", "train/optim.h"]),
        "private header": ({"src/train/t.c": '#include "model/gpt_internal.h"\nint la_t(void){return 1;}\n',
                            "src/model/gpt_internal.h": "#define Y 1\n",
                            "src/model/b.c": "int la_b(void){return 2;}\n"},
                           ["src/train/t.c", "model/gpt_internal.h", "private"]),
        "folder above in its layer": ({"src/tasks/g.c": "int la_r(void);\nint la_g(void){return la_r();}\n",
                                       "src/study/r.c": "int la_g(void);\nint la_r(void){return la_g();}\n"},
                                      ["src/tasks/g.c", "la_r", "src/study/r.c", "inside the experiments layer"]),
        "runner calling study": ({"src/runner/grid.c": "int la_study_x(void);\nint la_grid(void){return la_study_x();}\n",
                                  "src/study/s.c": "int la_grid(void);\nint la_study_x(void){return la_grid();}\n"},
                                 ["src/runner/grid.c", "la_study_x", "src/study/s.c", "inside the experiments layer"]),
        "generator reading a file": ({"src/tasks/g.c": "#include <stdio.h>\nvoid *la_g(void){return fopen(\"x\", \"r\");}\n"},
                                     ["src/tasks/g.c", "fopen", "no I/O"]),
        "generator calling io": ({"src/tasks/g.c": "int la_io_x(void);\nint la_g(void){return la_io_x();}\n",
                                  "src/io/x.c": "int la_io_x(void){return 1;}\n"},
                                 ["src/tasks/g.c", "la_io_x", "no I/O"]),
        "unknown folder": ({"src/extra/x.c": "int la_x(void){return 1;}\n"},
                           ["src/extra/", "no row"]),
    }
    bad = 0
    for name, (files, expect) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "docs"))
            with open(os.path.join(tmp, TABLE_DOC), "w") as f:
                f.write(SELF_TABLE)
            for rel, text in files.items():
                p = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as f:
                    f.write(text)
            for rel in files:
                if rel.endswith(".c"):
                    o = os.path.join(tmp, "build", rel[:-2] + ".o")
                    os.makedirs(os.path.dirname(o), exist_ok=True)
                    subprocess.run([cc, "-c", "-Isrc", rel, "-o", o], cwd=tmp, check=True)
            errors, n_obj, _, _ = check(tmp, os.path.join(tmp, "build"))
            report = "\n".join(errors)
            if expect is None:
                ok = not errors and n_obj > 0
            else:
                ok = bool(errors) and all(s in report for s in expect)
            if not ok:
                bad += 1
                print(f"check_layers self-test '{name}' FAILED: expected "
                      f"{'no violation' if expect is None else expect}, got:\n{report or '(nothing)'}")
    print(f"check_layers self-test: {len(cases) - bad} of {len(cases)} cases as expected")
    return 1 if bad else 0


def main(argv):
    root = "."
    args = list(argv)
    if "--self-test" in args:
        return self_test()
    if "--root" in args:
        i = args.index("--root")
        root = args[i + 1]
        del args[i:i + 2]
    build = args[0] if args else os.path.join(root, "build")
    errors, n_obj, n_edges, n_inc = check(root, build)
    for e in errors:
        print("layer violation: " + e)
    if errors:
        print(f"check-layers: {len(errors)} violation(s) (table: {TABLE_DOC}, section Layout)")
        return 1
    print(f"check-layers: ok ({n_obj} objects, {n_edges} cross-file symbol uses, "
          f"{n_inc} includes of src/ headers)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
