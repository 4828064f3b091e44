"""Bad input and bugs are told apart: :mod:`irtlib.errors` and the command line's exit status."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import irtlib
from irtlib import cli
from irtlib.errors import InputError, IrtlibError, MissingDependencyError, UsageError


def _main(argv, capsys):
    capsys.readouterr()
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_error_classes():
    assert issubclass(InputError, ValueError) and issubclass(InputError, IrtlibError)
    assert issubclass(UsageError, InputError)
    assert issubclass(MissingDependencyError, ImportError) and issubclass(MissingDependencyError, IrtlibError)
    assert cli.CLIUsageError is UsageError
    from irtlib.bank.session import StateLockedError

    assert issubclass(StateLockedError, IrtlibError) and issubclass(StateLockedError, RuntimeError)


def test_library_input_problems_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="row 3"):          # a file irtlib cannot use
        (tmp_path / "bad.csv").write_text("model,item,score\nm1,q1,1\nm1,q2,0\nm2,q1,2\n")
        irtlib.read_responses(tmp_path / "bad.csv")
    with pytest.raises(InputError):                          # an argument out of range
        irtlib.budget_grid(0)
    (tmp_path / "bank.csv").write_text("not a bank\n")
    with pytest.raises(InputError):                          # a file that is not a bank
        irtlib.read_bank(tmp_path / "bank.csv")


def _bug(args, out):
    raise KeyError("a bug")


@pytest.mark.parametrize("exc, code, label", [
    (InputError("bank.csv: row 4: a is not a number"), 1, "irtlib: error: bank.csv: row 4: a is not a number"),
    (FileNotFoundError(2, "No such file or directory", "x.csv"), 1, "irtlib: error: x.csv: No such file or directory"),
    (UsageError("-k 9 is larger than the bank (5 items)"), 2, "irtlib calibrate: error: -k 9 is larger"),
    (KeyError("a bug"), 3, "irtlib: internal error: KeyError: 'a bug'"),
    (ZeroDivisionError("division by zero"), 3, "irtlib: internal error: ZeroDivisionError"),
    (ValueError("a ValueError irtlib did not mean"), 3, "irtlib: internal error: ValueError"),
])
def test_exit_status_separates_input_from_bugs(monkeypatch, capsys, tmp_path, exc, code, label):
    def handler(args, out):
        raise exc

    monkeypatch.setattr(cli.calibrate, "_cmd_calibrate", handler)     # read when the parser is built
    code_, out, err = _main(["calibrate", str(tmp_path / "r.csv"), "-o", str(tmp_path / "b.csv")], capsys)
    assert code_ == code, err
    assert label in err and "Traceback" not in err and out == ""
    assert ("bug in irtlib" in err) == (code == 3)


def test_debug_shows_the_traceback_of_a_bug(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli.calibrate, "_cmd_calibrate", _bug)
    code, _, err = _main(["calibrate", str(tmp_path / "r.csv"), "-o", str(tmp_path / "b.csv"), "--debug"], capsys)
    assert code == 3 and "Traceback (most recent call last)" in err and "_bug" in err
    assert "irtlib: internal error: KeyError: 'a bug'" in err


def test_a_bug_in_a_real_process_exits_3(tmp_path):
    """The installed entry point: a library function that fails unexpectedly is an internal error."""
    (tmp_path / "r.csv").write_text("model,item,score\n" + "".join(
        f"m{i},q{j},{int(v)}\n" for i, row in enumerate(np.random.default_rng(0).random((6, 8)) < 0.5)
        for j, v in enumerate(row)))
    code = ("import sys, irtlib.bank.build, irtlib.cli\n"
            "def boom(*a, **k):\n    raise AttributeError('simulated bug')\n"
            "irtlib.bank.build.calibrate_bank = boom\n"
            "sys.exit(irtlib.cli.main(sys.argv[1:]))\n")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", code, "calibrate", "r.csv", "-o", "bank.csv", "-q"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "irtlib: internal error: AttributeError: simulated bug" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "bank.csv").exists()
    bad = subprocess.run([sys.executable, "-m", "irtlib", "calibrate", "missing.csv", "-o", "bank.csv"], cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1 and "irtlib: error: " in bad.stderr and "internal" not in bad.stderr
