"""`longattn --version`, and every command's --help: exit 0, one layout (scripts/check_docs.py's
parse_help: usage lines, options one per row with the description at column 24, --help
listed), and every option the command's source accepts is listed. The commands come from
the program's own table (`longattn --help`, `longattn bench --help`)."""
import glob
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_docs  # noqa: E402


@pytest.fixture(scope="module")
def prog(build_dir):
    return check_docs.Program(str(build_dir / "longattn"))


def all_words(prog):
    return [()] + [(c,) for c in prog.commands()] + [("bench", b) for b in prog.benches()]


def test_version_is_the_library_version(build_dir):
    r = subprocess.run([str(build_dir / "longattn"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    core = (ROOT / "include" / "longattn" / "core.h").read_text()
    v = [re.search(rf"#define LA_VERSION_{k}\s+(\d+)", core).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    assert r.stdout == f"longattn {'.'.join(v)}\n"


@pytest.mark.skipif(not pathlib.Path("/dev/full").exists(), reason="no /dev/full (every Linux has one)")
def test_a_failed_stdout_write_is_an_error(build_dir):
    """What cannot be printed (a full disk: /dev/full) ends with exit 1 and a message, for the
    program's own --help and --version and for a command's output; before 2026-12-05 it was exit 0."""
    for args in (["--version"], ["--help"], ["gguf", "types"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([str(build_dir / "longattn"), *args], stdout=full, stderr=subprocess.PIPE, text=True)
        assert r.returncode == 1 and "writing the standard output failed" in r.stderr, (args, r.stderr)
    r = subprocess.run([str(build_dir / "longattn"), "gguf", "types"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout and not r.stderr


def test_command_table_is_read(prog):
    assert len(prog.commands()) >= 10 and "study" in prog.commands() and "bench" in prog.commands()
    assert "attn" in prog.benches()


def test_every_help_exits_0_in_the_one_layout(prog):
    bad = []
    # plus the help of the GGUF form of generate, which --model selects
    for words in all_words(prog) + [("generate", "--model", "x")]:
        rc, out, err = prog.run_help(words)
        name = " ".join(("longattn",) + words)
        if rc != 0:
            bad.append(f"{name} --help exited {rc}: {err.strip()[:200]}")
            continue
        cmd = " ".join(("longattn",) + words[:2 if words[:1] == ("bench",) else 1])
        if not out.startswith("usage: " + cmd + " ") and out != "usage: " + cmd + "\n":
            bad.append(f"{name} --help: the first line is not 'usage: {name} ...'")
        bad += [f"{name} --help: {p}" for p in check_docs.parse_help(out)[1]]
    assert bad == [], "\n".join(bad)


def test_layout_check_rejects_a_bad_help():
    good = "usage: longattn x [options]\n       longattn x --y\n\nAbout.\n\noptions:\n" \
           "  --a N                 text\n                        more\n" \
           "  --a-very-long-option-name VALUE\n                        text\n\ngroup:\n" \
           "  --help                print this help and exit\n\nNotes.\n"
    opts, problems = check_docs.parse_help(good)
    assert problems == [] and opts == ["--a", "--a-very-long-option-name", "--help"]
    for bad, why in [
        (good.replace("  --a N                 text", "  --a N --b M          text"), "two options"),
        (good.replace("  --a N                 text", "  --a N             text"), "column 24"),
        (good.replace("                        more", "      more"), "neither"),
        (good.replace("  --help                print this help and exit\n", ""), "--help is not listed"),
        (good.replace("options:\n", ""), "options:"),
        (good.replace("usage: ", "Usage: "), "line 1"),
    ]:
        assert any(why in p for p in check_docs.parse_help(bad)[1]), (why, check_docs.parse_help(bad))


def source_options(path):
    """the option names a source file compares arguments with (string literals '--name';
    the literals of help rows such as {"--out DIR", ...} carry an argument and do not match)"""
    return set(re.findall(r'"(--[a-z0-9][a-z0-9-]*)"', open(path).read()))


# literals that are not options of the command but arguments the code passes to another
# program: bench train starts bench/torch_train.py with --threads, --vocab and --autocast
PASSED_ON = {("bench", "train"): {"--threads", "--vocab", "--autocast"}}


def test_help_lists_every_option_the_source_accepts(prog):
    """src/cli/<cmd>.c (function cli_<cmd>) and bench/bench_<name>.c (bench_<name>): every
    '--name' literal of a file that implements one command is in that command's help; the
    literals of the other files (shared helpers, a file with several commands) are in
    some command's help."""
    defines = {}
    for path in glob.glob(str(ROOT / "src" / "cli" / "*.c")) + glob.glob(str(ROOT / "bench" / "*.c")):
        text = open(path).read()
        for words in all_words(prog)[1:]:
            fn = ("bench_" + words[1] if words[0] == "bench" and len(words) == 2 else "cli_" + words[0]).replace("-", "_")
            if re.search(rf"^int {fn}\(int argc, char \*\*argv\) {{", text, re.M):
                defines.setdefault(path, []).append(words)
    assert len(defines) >= 12, defines
    listed = {w: set(prog.options(w)) for w in all_words(prog)}
    everywhere = set().union(*listed.values())
    bad = []
    for path in glob.glob(str(ROOT / "src" / "cli" / "*.c")) + glob.glob(str(ROOT / "bench" / "*.c")):
        opts = source_options(path)
        cmds = defines.get(path, [])
        if len(cmds) == 1:
            missing = opts - listed[cmds[0]] - PASSED_ON.get(cmds[0], set())
            where = "longattn " + " ".join(cmds[0])
        else:
            missing = opts - everywhere
            where = "any command"
        if missing:
            bad.append(f"{path}: {sorted(missing)} not in the --help of {where}")
    assert bad == [], "\n".join(bad)
