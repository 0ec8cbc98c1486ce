#!/usr/bin/env python3
"""check_docs.py -- the documentation (README.md and docs/*.md) checked against the tree
and the program.

  links     every relative link [text](path#anchor) outside code resolves: the file
            exists, and an anchor names a heading of the target page (GitHub's rule:
            lowercase, punctuation other than '-' and '_' dropped, spaces to '-', a
            repeated heading gets -1, -2, ...); every docs/ page is linked from README.md
  commands  every `longattn` command line in a ```sh / ```bash / ```shell / ```console
            block (also `./build/longattn`, `mpirun ... longattn`, lines continued with
            '\\') names a command of the program and only options that the command's
            --help lists: the lists come from the program itself (`longattn --help`,
            `longattn CMD --help`, `longattn bench NAME --help`), never from a copy
  paths     no machine-specific absolute path (/work/, /home/, /root/, /tmp/, /Users/)
  examples  a ```sh block right after the line `<!-- test: run -->` is a runnable
            example: run with bash -e in a scratch folder that holds ./build (a link to
            the build), data/pydoc (a small corpus) and q.npy, k.npy, v.npy (float32,
            (1, 2, 64, 16)), it must exit 0
  c         every ```c block compiles against the public header (-Iinclude), as a whole
            translation unit; one with main() is linked with BUILD/liblongattn.a

  cli       docs/cli.md holds every command's --help output (after '<!-- help: CMD -->')
            exactly as the program prints it

usage: scripts/check_docs.py [--root DIR] [--skip-run] [BUILD]   (BUILD defaults to build)
       scripts/check_docs.py --write-cli [BUILD]   copy the program's help into docs/cli.md
       scripts/check_docs.py --self-test     the checker must reject a broken link, anchor,
                                             command, option and path of a fixture document
Exit status 0 when clean, 1 with one line per problem naming file and line.
"""
import functools
import glob
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile

SHELL_INFO = {"sh", "bash", "shell", "console"}
RUN_MARKER = "<!-- test: run -->"
ABS_PATH = re.compile(r"(?<![\w.~$}/-])/(?:work|home|root|tmp|Users)/")
LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]*(?:\([^()]*\)[^()\s]*)*)\)")
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}


# ---- reading markdown ----

def documents(root):
    """README.md and docs/*.md, relative paths."""
    docs = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return (["README.md"] if os.path.exists(os.path.join(root, "README.md")) else []) + docs


def fenced_blocks(text):
    """[(info, first_line_number (1-based, of the fence), [lines], marker_before)]"""
    out, lines = [], text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(2), m.group(3).strip(), i
        prev = lines[i - 1].strip() if i > 0 else ""
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), lines[i]):
            body.append(lines[i])
            i += 1
        out.append((info, start + 1, body, prev == RUN_MARKER))
        i += 1
    return out


def prose_lines(text):
    """(line number, line) outside fenced blocks, inline code spans blanked"""
    for n, line in prose_lines_raw(text):
        yield n, re.sub(r"(`+)(.+?)\1", lambda c: " " * len(c.group(0)), line)


def github_slug(heading):
    """The anchor GitHub gives a heading's text."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links -> their text
    t = re.sub(r"<[^>]+>", "", t)  # inline HTML
    t = t.replace("`", "").strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)  # keep letters, digits, '_', '-', ' '
    return t.replace(" ", "-")


def anchors(text):
    seen, out = {}, set()
    for _, line in prose_lines_raw(text):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        out.add(slug if k == 0 else f"{slug}-{k}")
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', text):
        out.add(m.group(1))
    return out


def prose_lines_raw(text):
    """(line number, line) outside fenced blocks, code spans kept (headings need them)"""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


# ---- links ----

def check_links(root):
    problems, linked = [], set()
    docs = documents(root)
    cache = {}
    for rel in docs:
        text = read(root, rel)
        for n, line in prose_lines(text):
            for m in LINK.finditer(line):
                target = m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                    continue  # http:, https:, mailto:
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
                where = f"{rel}:{n}"
                if not os.path.exists(os.path.join(root, dest)):
                    problems.append(f"{where}: link to {target}: {dest} does not exist")
                    continue
                if rel == "README.md":
                    linked.add(dest)
                if anchor:
                    if not dest.endswith(".md") or os.path.isdir(os.path.join(root, dest)):
                        problems.append(f"{where}: link to {target}: an anchor needs a markdown page")
                        continue
                    if dest not in cache:
                        cache[dest] = anchors(read(root, dest))
                    if anchor not in cache[dest]:
                        problems.append(f"{where}: link to {target}: {dest} has no heading with anchor "
                                        f"#{anchor}")
    for rel in docs:
        if rel.startswith("docs/") and rel not in linked:
            problems.append(f"README.md: does not link to {rel} (every docs/ page must be reachable)")
    return problems


# ---- the program's commands and options ----

class Program:
    """What the program says about itself: its commands (longattn --help), bench's
    benchmarks (longattn bench --help) and each one's options (CMD --help)."""

    def __init__(self, exe):
        self.exe = exe

    @functools.lru_cache(maxsize=None)
    def run_help(self, words):
        words = tuple(words)
        r = subprocess.run([self.exe] + list(words) + ["--help"], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, OMP_NUM_THREADS="1"))
        return r.returncode, r.stdout, r.stderr

    @functools.lru_cache(maxsize=None)
    def listing(self, words):
        """names in the indented list under the 'commands'/'benchmarks' heading of a help"""
        rc, out, err = self.run_help(words)
        if rc != 0:
            raise SystemExit(f"{self.exe} {' '.join(words + ('--help',))} exited {rc}: {err.strip()}")
        names, inside = [], False
        for line in out.split("\n"):
            if re.match(r"^(commands|benchmarks)\b.*:$", line):
                inside = True
            elif inside and re.match(r"^  \S", line):
                names.append(line.split()[0])
            elif inside and line.strip() == "":
                inside = False
        return names

    def commands(self):
        return self.listing(())

    def benches(self):
        return self.listing(("bench",))

    @functools.lru_cache(maxsize=None)
    def options(self, words):
        """the options a help lists (option rows: '  --name ...')"""
        rc, out, err = self.run_help(words)
        if rc != 0:
            return None
        return parse_help(out)[0]


def parse_help(text):
    """(options listed, layout problems) of a --help text in the one layout (cli_print_help):
    usage line(s), then text at column 0, then 'options:' and rows: '  --opt ARG' with the
    description at column 24 (or on the next line when OPT is long), continuation lines at
    column 24, group headings and notes at column 0."""
    lines = text.rstrip("\n").split("\n")
    problems, opts = [], []
    if not lines or not lines[0].startswith("usage: longattn"):
        problems.append("line 1 is not 'usage: longattn ...'")
    i = 1
    while i < len(lines) and lines[i].strip():
        if not lines[i].startswith(" " * 7):
            problems.append(f"line {i + 1}: a usage line continues at column 7: {lines[i]!r}")
        i += 1
    if lines.count("options:") != 1:
        problems.append("no single 'options:' line")
        return opts, problems
    k = lines.index("options:") + 1
    need_desc = False
    for j in range(k, len(lines)):
        line = lines[j]
        if need_desc and not re.match(r"^ {24}\S", line):
            problems.append(f"line {j + 1}: an option without a description at column 24")
        need_desc = False
        if not line.strip() or re.match(r"^\S", line) or re.match(r"^ {24}\S", line):
            continue
        m = re.match(r"^  (-{1,2}[A-Za-z0-9][A-Za-z0-9-]*)((?: \S+)*)(?:( {2,})(\S.*))?$", line)
        if not m:
            problems.append(f"line {j + 1}: neither an option row ('  --opt ARG', text at column 24), "
                            f"a continuation (column 24) nor text at column 0: {line!r}")
            continue
        if any(w.startswith("-") for w in m.group(2).split()):
            problems.append(f"line {j + 1}: two options on one row: {line!r}")
        if m.group(4) is None:
            need_desc = True
        elif line.index(m.group(4), 2 + len(m.group(1)) + len(m.group(2))) != 24:
            problems.append(f"line {j + 1}: the description does not start at column 24: {line!r}")
        opts.append(m.group(1))
    if need_desc:
        problems.append("the last option has no description")
    if "--help" not in opts:
        problems.append("--help is not listed")
    return opts, problems


def shell_commands(body, info):
    """logical command lines of a shell block: continuation lines joined, console prompts
    ('$ ') required in console blocks, comments dropped"""
    out, cur, start = [], "", None
    for n, line in enumerate(body):
        if info == "console":
            if cur == "":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
        if cur == "":
            start = n
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        out.append((start, cur))
        cur = ""
    if cur:
        out.append((start, cur))
    return out


def split_words(cmd):
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError as e:  # unbalanced quotes
        raise ValueError(f"cannot split {cmd!r}: {e}")


def check_command_words(prog, words):
    """problems of one command's words (starting after the `longattn` token)"""
    if not words or words[0] in SEPARATORS:
        return ["`longattn` without a command"]
    cmd = words[0]
    if cmd in ("--help", "-h", "--version", "help"):
        return []
    if cmd not in prog.commands():
        return [f"unknown command '{cmd}' (the program has: {' '.join(prog.commands())})"]
    key, rest = (cmd,), words[1:]
    if cmd == "bench":
        if not rest or rest[0] in SEPARATORS:
            return []
        if rest[0] in ("--help", "-h"):
            return []
        if rest[0] not in prog.benches():
            return [f"unknown benchmark 'bench {rest[0]}' (the program has: {' '.join(prog.benches())})"]
        key, rest = ("bench", rest[0]), rest[1:]
    listed = prog.options(key)
    if listed is None:
        return [f"`longattn {' '.join(key)} --help` fails"]
    problems = []
    for w in rest:
        if w in SEPARATORS:
            break
        if w.startswith("--"):
            name = w.split("=", 1)[0]
            if name not in listed and name not in ("--help", "--"):
                problems.append(f"`longattn {' '.join(key)}` has no option {name} (its --help lists "
                                f"{' '.join(listed)})")
    return problems


def check_commands(root, prog):
    problems = []
    for rel in documents(root):
        for info, line0, body, _ in fenced_blocks(read(root, rel)):
            if info.split()[0:1] and info.split()[0] in SHELL_INFO:
                for n, cmd in shell_commands(body, info.split()[0]):
                    try:
                        words = split_words(cmd)
                    except ValueError as e:
                        problems.append(f"{rel}:{line0 + 1 + n}: {e}")
                        continue
                    for i, w in enumerate(words):
                        if os.path.basename(w) == "longattn":
                            for p in check_command_words(prog, words[i + 1:]):
                                problems.append(f"{rel}:{line0 + 1 + n}: {p}")
    return problems


# ---- the CLI reference (docs/cli.md) ----

CLI_DOC = os.path.join("docs", "cli.md")
HELP_MARK = re.compile(r"^<!-- help: ?([a-z0-9 -]*?) ?-->$")


def help_blocks(text):
    """{words: (index of the block's first line, index after its last line)} of the
    ```text blocks that follow a '<!-- help: WORDS -->' line"""
    lines, out = text.split("\n"), {}
    for i, line in enumerate(lines):
        m = HELP_MARK.match(line)
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            j = i + 2
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out[tuple(m.group(1).split())] = (i + 2, j)
    return out


def expected_helps(prog):
    words = [()] + [(c,) for c in prog.commands()] + [("bench", b) for b in prog.benches()]
    return {w: prog.run_help(w)[1] for w in words}


def check_cli_doc(root, prog):
    """docs/cli.md holds every command's --help, as the program prints it"""
    path = os.path.join(root, CLI_DOC)
    if not os.path.exists(path):
        return [f"{CLI_DOC}: missing (the CLI reference)"]
    text = read(root, CLI_DOC)
    lines, blocks, problems = text.split("\n"), help_blocks(text), []
    fix = "run scripts/check_docs.py --write-cli to copy the program's help in"
    helps = expected_helps(prog)
    for words, want in helps.items():
        name = " ".join(("longattn",) + words)
        if words not in blocks:
            problems.append(f"{CLI_DOC}: no help block of `{name}` ('<!-- help: {' '.join(words)} -->' before a "
                            f"```text block): {fix}")
            continue
        a, b = blocks[words]
        if "\n".join(lines[a:b]) + "\n" != want:
            problems.append(f"{CLI_DOC}:{a}: the help of `{name}` differs from the program's: {fix}")
    for words in blocks:
        if words not in helps:
            problems.append(f"{CLI_DOC}: a help block of `longattn {' '.join(words)}`, which the program does not have")
    return problems


def write_cli_doc(root, prog):
    """rewrite the help blocks of docs/cli.md with the program's help (the sections and
    their prose stay; a command without a block gets a section at the end)"""
    text = read(root, CLI_DOC)
    lines = text.split("\n")
    want = expected_helps(prog)
    blocks = help_blocks(text)
    for words, (a, b) in sorted(blocks.items(), key=lambda kv: -kv[1][0]):
        if words in want:
            lines[a:b] = want[words].rstrip("\n").split("\n")
    for words in want:
        if words not in blocks:
            lines += [f"## `{' '.join(('longattn',) + words)}`", "", f"<!-- help: {' '.join(words)} -->", "```text"] + \
                want[words].rstrip("\n").split("\n") + ["```", ""]
    with open(os.path.join(root, CLI_DOC), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


# ---- paths ----

def check_paths(root):
    problems = []
    for rel in documents(root):
        for n, line in enumerate(read(root, rel).split("\n"), 1):
            m = ABS_PATH.search(line)
            if m:
                problems.append(f"{rel}:{n}: machine-specific absolute path '{line[m.start():].split()[0]}' "
                                "(use a relative path or ~/...)")
    return problems


# ---- runnable examples ----

def runnable_examples(root):
    out = []
    for rel in documents(root):
        for info, line0, body, marked in fenced_blocks(read(root, rel)):
            if marked:
                out.append((f"{rel}:{line0}", info, "\n".join(body) + "\n"))
    return out


def write_npy(path, shape, seed):
    """a float32 C-order .npy of values in [-1, 1) (a small LCG; no numpy needed)"""
    n = 1
    for s in shape:
        n *= s
    x, vals = seed, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        vals.append(((x >> 40) / float(1 << 24)) * 2 - 1)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{s}, " for s in shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{n}f", *vals))


def example_folder(tmp, build):
    """the scratch folder examples run in: ./build, data/pydoc, q.npy, k.npy, v.npy"""
    os.symlink(os.path.abspath(build), os.path.join(tmp, "build"))
    words = ("def attention(q, k, v):\n    return softmax(q @ k.T) @ v\n"
             "class Cache:\n    def __init__(self):\n        self.keys = []\n")
    for split, ndoc in (("train", 12), ("val", 4)):
        d = os.path.join(tmp, "data", "pydoc", split)
        os.makedirs(d)
        for i in range(ndoc):
            with open(os.path.join(d, f"doc{i:02d}.txt"), "w") as f:
                f.write(f"# document {i}\n" + words * (8 + i))
    write_npy(os.path.join(tmp, "q.npy"), (1, 2, 64, 16), 1)
    write_npy(os.path.join(tmp, "k.npy"), (1, 2, 64, 16), 2)
    write_npy(os.path.join(tmp, "v.npy"), (1, 2, 64, 16), 3)


def run_example(where, script, tmp, timeout=600):
    r = subprocess.run(["bash", "-e", "-c", script], cwd=tmp, capture_output=True, text=True, errors="replace",
                       timeout=timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        return [f"{where}: the example exited {r.returncode}:\n{script}{(r.stdout + r.stderr)[-2000:]}"]
    return []


def check_examples(root, build):
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        example_folder(tmp, build)
        for where, info, script in runnable_examples(root):
            if info.split()[0:1] != ["sh"]:
                problems.append(f"{where}: a runnable example must be a ```sh block")
                continue
            problems += run_example(where, script, tmp)
    return problems


# ---- C blocks ----

def make_var(root, name):
    r = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile", "--eval",
                        f"print-var: ; @echo $({name})", "print-var"],
                       cwd=root, capture_output=True, text=True, check=True)
    return r.stdout.split()


def check_c_blocks(root, build):
    problems = []
    cc = os.environ.get("CC", "cc")
    libs = None
    with tempfile.TemporaryDirectory() as tmp:
        k = 0
        for rel in documents(root):
            for info, line0, body, _ in fenced_blocks(read(root, rel)):
                if info.split()[0:1] != ["c"]:
                    continue
                k += 1
                src = os.path.join(tmp, f"block{k}.c")
                with open(src, "w") as f:
                    f.write("\n".join(body) + "\n")
                code = "\n".join(body)
                cmd = [cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                       "-Wno-unused-variable", "-I", os.path.join(root, "include"), src]
                if re.search(r"\bint\s+main\s*\(", code):
                    if libs is None:
                        libs = make_var(root, "LDLIBS_ALL")
                    cmd += ["-o", os.path.join(tmp, f"block{k}"), os.path.join(build, "liblongattn.a")] + libs
                else:
                    cmd += ["-c", "-o", os.path.join(tmp, f"block{k}.o")]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append(f"{rel}:{line0}: the C block does not compile against include/:\n"
                                    f"{r.stderr[-2000:]}")
    return problems


# ---- self-test ----

SELF_README = """# fixture
[a page](docs/page.md), [its section](docs/page.md#the-section), [gone](docs/missing.md),
[bad anchor](docs/page.md#no-such-heading)
"""
SELF_PAGE = """# Page
## The section
```sh
./build/longattn attn --spec softmax+causal --q q.npy --k k.npy --v v.npy --out o.npy
./build/longattn frobnicate --out x
mpirun -np 2 ./build/longattn attn --spec softmax --bogus-option 3 \\
    --q q.npy
```
Make the venv at /work/myvenv first.
"""


def self_test(exe):
    """a fixture with one broken link, anchor, command, option and path: each must be
    reported, and nothing else"""
    prog = Program(exe)
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "docs"))
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write(SELF_README)
        with open(os.path.join(tmp, "docs", "page.md"), "w") as f:
            f.write(SELF_PAGE)
        found = check_links(tmp) + check_commands(tmp, prog) + check_paths(tmp)
    expect = ["docs/missing.md does not exist", "#no-such-heading", "unknown command 'frobnicate'",
              "no option --bogus-option", "absolute path '/work/myvenv"]
    missing = [e for e in expect if not any(e in p for p in found)]
    if missing or len(found) != len(expect):
        print("check_docs self-test FAILED: expected one problem each for", expect, "got:", *found, sep="\n  ")
        return 1
    print(f"check_docs self-test: the {len(expect)} broken things of the fixture were reported")
    return 0


def main(argv):
    args = list(argv)
    root = "."
    if "--root" in args:
        i = args.index("--root")
        root = args[i + 1]
        del args[i:i + 2]
    skip_run = "--skip-run" in args
    args = [a for a in args if a != "--skip-run"]
    selftest = "--self-test" in args
    write_cli = "--write-cli" in args
    args = [a for a in args if a not in ("--self-test", "--write-cli")]
    build = args[0] if args else os.path.join(root, "build")
    exe = os.path.join(build, "longattn")
    if not os.path.exists(exe):
        raise SystemExit(f"{exe} not built: run make first")
    if selftest:
        return self_test(exe)
    prog = Program(exe)
    if write_cli:
        write_cli_doc(root, prog)
        print(f"wrote the help blocks of {CLI_DOC}")
        return 0
    problems = (check_links(root) + check_paths(root) + check_commands(root, prog) + check_cli_doc(root, prog) +
                check_c_blocks(root, build))
    if not skip_run:
        problems += check_examples(root, build)
    for p in problems:
        print("docs: " + p)
    n_docs = len(documents(root))
    if problems:
        print(f"check-docs: {len(problems)} problem(s) in {n_docs} documents")
        return 1
    print(f"check-docs: ok ({n_docs} documents; links, commands against {exe}, paths, C blocks"
          f"{'' if skip_run else ', ' + str(len(runnable_examples(root))) + ' runnable examples'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
