"""The command line against its documentation, and the data subcommands' error contract.

docs/cli.md ends with a command reference generated from the parser (tools/cli_reference.py);
these tests fail when an option is added to the parser and not to the documentation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from irtlib.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
sys.path.insert(0, str(ROOT / "tools"))
import cli_reference  # noqa: E402  (tools/cli_reference.py)


def _leaves(parser: argparse.ArgumentParser, prefix=("irtlib",)):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*prefix, name))


def test_the_command_reference_in_docs_cli_md_is_the_parser_s():
    text = DOC.read_text(encoding="utf-8")
    assert text.count(cli_reference.BEGIN) == 1 and text.count(cli_reference.END) == 1
    assert cli_reference.rewritten(text, build_parser()) == text, "run: python tools/cli_reference.py"


def test_every_option_of_every_subcommand_is_in_docs_cli_md():
    """Counted independently of the generator: each command's heading, and each of its flags after it."""
    text = DOC.read_text(encoding="utf-8")
    reference = text[text.index(cli_reference.BEGIN):]
    leaves = list(_leaves(build_parser()))
    assert len(leaves) == 14                              # 7 commands, paper-data x2, airbench-data x3, helm-data x2
    for path, parser in leaves:
        assert f"### `{' '.join(path)}`" in reference, path
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in reference, (path, flag)
    assert "`--epochs EPOCHS`" in reference and "`--prompt-column NAME`" in reference


def test_each_command_module_adds_one_subcommand():
    parser = build_parser()
    names = list(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)
    assert names == ["calibrate", "subset", "evaluate", "agreement", "report", "audit", "drift", "paper-data",
                     "airbench-data", "helm-data"]
    assert [m.__name__.rsplit(".", 1)[1].replace("_", "-") for m in COMMANDS] == names


@pytest.mark.parametrize("args, code, first", [
    (["helm-data", "download"], 2, "irtlib helm-data download: error: the following arguments are required: DEST"),
    (["helm-data", "download", "d", "--project", "nope"], 2, "irtlib helm-data download: error: argument --project"),
    (["airbench-data"], 2, "irtlib airbench-data: error: the following arguments are required: ACTION"),
    (["airbench-data", "verify", "{tmp}/empty"], 1, "irtlib: error: "),
    (["helm-data", "summary", "{tmp}/absent"], 1, "irtlib: error: "),
])
def test_the_data_subcommands_keep_the_error_contract(tmp_path, capsys, args, code, first):
    (tmp_path / "empty").mkdir()
    capsys.readouterr()
    try:
        status = main([a.format(tmp=tmp_path) for a in args])
    except SystemExit as exc:                             # argparse's usage errors
        status = exc.code
    out, err = capsys.readouterr()
    assert status == code, err
    assert err.startswith(first) and err.count("\n") == 1 and "Traceback" not in err, err
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["empty"]          # nothing written
    if code == 1:
        assert str(tmp_path) in err                                                       # names the directory
