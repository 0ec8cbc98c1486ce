"""cli_parse (src/cli/cli_util.c), the one option parser of every command, through the
program: each check names a row kind or rule of cli.h and fails if the parser stops
applying it (usage errors exit 2 and say what is wrong; nothing here trains or reads a
model: every command stops at its argument checks)."""
import subprocess

import pytest


def run(build_dir, *args, cwd=None):
    p = subprocess.run([str(build_dir / "longattn"), *map(str, args)], capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args, says", [
    # an unknown option lists the command's options (each once, though diagnose lists --n twice)
    (("train", "--frob", "1"), "unknown option '--frob'; valid: --data --val-fraction --out"),
    (("diagnose", "--frob"), " --n --offset "),
    # a value that is missing, or is the next option
    (("train", "--steps"), "option '--steps' needs a value"),
    (("generate", "--ckpt", "x", "--prompt", "--quiet"), "option '--prompt' needs a value, got the option '--quiet'"),
    # CLI_A_INT / CLI_A_LONG: the range in the message
    (("study", "--threads", "0"), "--threads expects an integer in [1, 1024], got '0'"),
    (("perplexity", "--ctx", "1"), "--ctx expects an integer in [2, 67108864], got '1'"),
    # CLI_A_NUM_X: open and closed ends, and a bound at infinity
    (("synth", "--lr", "1"), "--lr expects a number in (0, 1), got '1'"),
    (("synth", "--inline-share", "1"), "--inline-share expects a number in [0, 1), got '1'"),
    (("train", "--qk-gain", "0"), "--qk-gain expects a number in (0, 100], got '0'"),
    (("diagnose", "--delta", "1"), "--delta expects a number > 1, got '1'"),
    (("generate", "--ckpt", "x", "--top-p", "0"), "--top-p expects a number in [1e-09, 1], got '0'"),
    # CLI_A_U64: seeds
    (("train", "--seed", "-1"), "--seed expects a non-negative integer, got '-1'"),
    (("train", "--seed", "1.5"), "--seed expects a non-negative integer, got '1.5'"),
    # CLI_A_FN rows shared by commands
    (("train", "--optimizer", "sgd"), "--optimizer must be adamw or muon, got 'sgd'"),
    (("synth", "--precision", "f16"), "--precision must be f32 or bf16, got 'f16'"),
    # CLI_A_ALSO: the GGUF form's rows are in `generate --help` but not options of the byte form
    (("generate", "--ckpt", "x", "--chat"), "unknown option '--chat'"),
    # CLI_A_POS: study takes one file, gguf a subcommand and at most three more
    (("study", "a.json", "b.json"), "give one study file (got 'a.json' and 'b.json')"),
    (("gguf", "dequant", "a", "b", "c", "d"), "too many arguments ('d'; at most 4"),
    (("gguf", "dequant", "a", "b", "c", "--json"), "--json and --full belong to gguf info"),
    # no CLI_A_POS row: an argument that is not an option
    (("train", "stray"), "unexpected argument 'stray'"),
    # cli_doc.eq (attn): --opt=VALUE, and a flag takes no value
    (("attn", "--spec=softmax+ropee", "--q=a", "--k=b", "--v=c", "--out=d"), "unknown position 'ropee'"),
    (("attn", "--stats=1"), "option '--stats' takes no value"),
    (("attn", "--q=a", "--q", "b"), "option --q given twice"),
    # the form is attn's only: train reads --steps=5 as an unknown option
    (("train", "--steps=5"), "unknown option '--steps=5'"),
])
def test_usage_errors(build_dir, args, says):
    rc, out, err = run(build_dir, *args)
    assert rc == 2 and says in err, (args, rc, err)


def test_given_names_the_last_fixed_option(build_dir, tmp_path):
    """cli_given: train --resume refuses the options its checkpoint fixes, naming the one
    given last (argv order, whatever the table order)."""
    for args, last in [(("--lr", "0.1", "--layers", "2"), "--layers"), (("--layers", "2", "--lr", "0.1"), "--lr")]:
        rc, _, err = run(build_dir, "train", "--resume", "--out", tmp_path, *args)
        assert rc == 2 and f"; {last} cannot change them" in err, err


def test_help_and_values_from_one_table(build_dir):
    """--help anywhere prints the table's help and exits 0 without checking the rest; a
    value never counts as an option (--prompt '-x' is a value: one dash)."""
    rc, out, _ = run(build_dir, "synth", "--steps", "5", "--help")
    assert rc == 0 and out.startswith("usage: longattn synth ") and "--max-eval-tokens N" in out
    rc, _, err = run(build_dir, "generate", "--ckpt", "missing.safetensors", "--prompt", "-x")
    assert rc == 1 and "cannot load 'missing.safetensors'" in err, err
