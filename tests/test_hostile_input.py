"""The toolkit under hostile input.

Every case runs the command line (in this process, or in a subprocess where signals, locks or
the real entry point matter) or the API, and checks the exit status, the one line of the error
message, and that every file present before the command is byte-identical afterwards.

Data: a small 2PL simulation (30 models x 60 items), as a wide and a long CSV, and an item bank
calibrated from it once per module.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from irtlib import AdaptiveSession, ItemBank, ResponseMatrix, calibrate_bank, map_ability, read_bank
from irtlib.bank.session import LOCK_MAGIC
from irtlib.cli import main

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- helpers
def simulate(n_models=30, n_items=60, seed=0):
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(size=n_models), rng.normal(size=n_items), np.exp(rng.normal(0, 0.5, size=n_items))
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    wide = pd.DataFrame((rng.random(p.shape) < p).astype(int), columns=[f"q{j:04d}" for j in range(n_items)])
    wide.insert(0, "model", [f"m{i:03d}" for i in range(n_models)])
    return wide


def snapshot(root: Path) -> dict:
    """Every file under ``root`` (relative path -> bytes)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_untouched(before: dict, root: Path) -> None:
    """Every file of ``before`` is still there, byte-identical."""
    after = snapshot(root)
    for name, data in before.items():
        assert name in after, f"{name} was removed"
        assert after[name] == data, f"{name} was changed"


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(monkeypatch, capsys):
    """``irtlib ARGS`` in this process; returns exit status, stdout and stderr."""
    def call(*args, cwd, stdin=""):
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return Result(code, out.out, out.err)
    return call


def irtlib_process(*args, cwd, stdin=None, **kwargs):
    """``python -m irtlib ARGS`` in a subprocess running this checkout's code."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "irtlib", *map(str, args)], cwd=cwd, input=stdin,
                          capture_output=True, text=True, env=env, timeout=300, **kwargs)


def error_line(proc, code):
    """The exit status is ``code`` and stderr has exactly one error line, and no traceback: return it."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def rehash(path: Path, edit) -> None:
    """Edit a bank's header dict with ``edit`` and recompute both checksums, as a determined user could."""
    first, body = path.read_text().split("\n", 1)
    magic = "# irtlib-bank "
    meta = json.loads(first[len(magic):])
    edit(meta)
    meta["bank_sha256"] = hashlib.sha256(body.encode()).hexdigest()
    meta["file_sha256"] = "0" * 64
    text = magic + json.dumps(meta) + "\n" + body
    digest = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(text.replace('"file_sha256": "' + "0" * 64 + '"', f'"file_sha256": "{digest}"', 1))


def rehash_body(path: Path, transform) -> None:
    """Rewrite a bank's item table with ``transform(frame)`` and recompute both checksums."""
    first, body = path.read_text().split("\n", 1)
    frame = transform(pd.read_csv(io.StringIO(body), dtype={"item": str}))
    new_body = frame.to_csv(index=False, lineterminator="\n", float_format="%.17g")
    path.write_text(first + "\n" + new_body)
    rehash(path, lambda meta: None)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    wide = simulate()
    wide.to_csv(root / "wide.csv", index=False)
    wide.melt(id_vars="model", var_name="item", value_name="score").to_csv(root / "long.csv", index=False)
    assert main(["calibrate", str(root / "wide.csv"), "-o", str(root / "bank.csv"), "-q"]) == 0
    return root


@pytest.fixture
def ws(source, tmp_path):
    """A fresh working directory with wide.csv, long.csv and bank.csv."""
    for name in ("wide.csv", "long.csv", "bank.csv"):
        shutil.copy(source / name, tmp_path / name)
    return tmp_path


# ---------------------------------------------------------------------------- silent wrong answers
def test_edited_bank_header_is_rejected(ws, cli):
    bank = ws / "bank.csv"
    good = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", "--max-items", "5", "--json",
               "-q", cwd=ws)
    assert good.returncode == 0
    text = bank.read_text()
    n = json.loads(text.split("\n", 1)[0][len("# irtlib-bank "):])["filtered"]["n_items"]
    for value in (n + 600, -601):
        bank.write_text(text.replace(f'"n_items": {n}, "n_safe"', f'"n_items": {value}, "n_safe"', 1))
        assert bank.read_text() != text
        before = snapshot(ws)
        proc = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", "--max-items", "5",
                   cwd=ws)
        assert error_line(proc, 1).startswith("irtlib: error: bank.csv: line 1: the header does not match the "
                                              "file's checksum")
        assert proc.stdout == ""
        assert_untouched(before, ws)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["filtered"].update(n_items=-601, n_unsafe=-601),
     "header field filtered.n_items: expected an integer >= 0, got -601"),
    (lambda m: m["filtered"].update(n_items=m["filtered"]["n_items"] + 600,
                                    n_unsafe=m["filtered"]["n_unsafe"] + 600),
     "header field data.n_items: expected the bank's"),
    (lambda m: m["filtered"].update(safe_rate_sum=1e9), "header field filtered.safe_rate_sum"),
    (lambda m: m["filtered"].update(n_items="1"), "header field filtered.n_items: expected an integer >= 0"),
    (lambda m: m["interval_check"].update(inflation=m["interval_check"]["inflation"][:-1]),
     "header field interval_check.inflation: expected a list of"),
    (lambda m: m["interval_check"].update(k=list(reversed(m["interval_check"]["k"]))),
     "header field interval_check.k: expected an increasing list"),
    (lambda m: m["interval_check"]["inflation"].__setitem__(0, 0.0),
     "header field interval_check.inflation[0]: expected a number in [1, 1000], got 0.0"),
    (lambda m: m["models"]["theta"].pop(), "header field models.theta: expected a list of 30 numbers"),
    (lambda m: m.__setitem__("filtered", [1]), "header field filtered: expected an object"),
], ids=["negative-count", "count-vs-data", "rate-sum", "string-count", "fp-xp-lengths", "k-order",
        "inflation-range", "models-length", "filtered-type"])
def test_rehashed_bank_header_fields_are_validated(ws, cli, edit, message):
    rehash(ws / "bank.csv", edit)
    before = snapshot(ws)
    proc = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", "--max-items", "5", cwd=ws)
    line = error_line(proc, 1)
    assert line.startswith("irtlib: error: bank.csv: line 1: ") and message in line, line
    assert_untouched(before, ws)
    with pytest.raises(ValueError, match="bank.csv: line 1: header field"):
        read_bank(ws / "bank.csv")


@pytest.mark.parametrize("column, value, message", [
    ("a", 1e200, "discrimination a = 1e+200 is out of range"),
    ("a", 1e-300, "discrimination a = 1e-300 is out of range"),
    ("b", -1e6, "difficulty b = -1e+06 is out of range"),
])
def test_absurd_parameters_are_rejected_on_read(ws, cli, column, value, message):
    def transform(frame):
        frame.loc[3, column] = value
        return frame
    rehash_body(ws / "bank.csv", transform)
    before = snapshot(ws)
    proc = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", cwd=ws)
    line = error_line(proc, 1)
    assert line.startswith("irtlib: error: bank.csv: row 4: item ") and message in line, line
    assert_untouched(before, ws)


def test_duplicate_column_names_in_a_wide_file(ws, cli):
    text = (ws / "wide.csv").read_text().replace("q0001", "q0000", 1)
    (ws / "dup.csv").write_text(text)
    before = snapshot(ws)
    proc = cli("calibrate", "dup.csv", "-o", "out.csv", cwd=ws)
    assert error_line(proc, 1) == ("irtlib: error: dup.csv: column 'q0000' appears twice (columns 2 and 3); "
                                   "column names must be unique")
    assert_untouched(before, ws)
    assert not (ws / "out.csv").exists()
    # names equal once the surrounding whitespace is removed are duplicates too
    (ws / "dup.csv").write_text(text.replace("q0000,q0000", "q0000, q0000 ", 1))
    proc = cli("calibrate", "dup.csv", "-o", "out.csv", cwd=ws)
    assert "column 'q0000' appears twice (columns 2 and 3) ('q0000' and ' q0000 ' differ only by surrounding " \
           "whitespace)" in error_line(proc, 1)


def test_duplicate_score_columns_in_a_long_file(ws, cli):
    (ws / "long2.csv").write_text("model,item,score,score\nm1,q1,1,0\nm2,q1,0,1\n")
    before = snapshot(ws)
    proc = cli("calibrate", "long2.csv", "-o", "out.csv", cwd=ws)
    assert error_line(proc, 1) == ("irtlib: error: long2.csv: column 'score' appears twice (columns 3 and 4); "
                                   "column names must be unique")
    assert_untouched(before, ws)
    assert not (ws / "out.csv").exists()


def test_duplicate_columns_in_parquet(ws, cli):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table([pa.array(["m1", "m2"]), pa.array([1, 0]), pa.array([0, 1])], names=["model", "q1", "q1"])
    pq.write_table(table, ws / "dup.parquet")
    proc = cli("calibrate", "dup.parquet", "-o", "out.csv", cwd=ws)
    assert "dup.parquet: column 'q1' appears twice (columns 2 and 3)" in error_line(proc, 1)


@pytest.mark.parametrize("layout", ["long", "wide"])
def test_ids_differing_by_whitespace_are_not_merged(ws, cli, layout):
    frame = pd.read_csv(ws / "long.csv", dtype=str)
    frame.loc[frame["model"] == "m005", "model"] = np.where(
        frame.loc[frame["model"] == "m005", "item"].str[-1].isin(list("01234")), "m005", "m005 ")
    if layout == "long":
        frame.to_csv(ws / "ws.csv", index=False)
        message = "model ids 'm005' and 'm005 ' differ only by surrounding whitespace"
    else:
        wide = simulate()
        wide.loc[6, "model"] = "m005 "
        wide.to_csv(ws / "ws.csv", index=False)
        message = "rows 6 and 7: model ids 'm005' and 'm005 ' differ only by surrounding whitespace"
    before = snapshot(ws)
    proc = cli("calibrate", "ws.csv", "-o", "out.csv", cwd=ws)
    line = error_line(proc, 1)
    assert line.startswith("irtlib: error: ws.csv: rows ") and message in line, line
    assert_untouched(before, ws)


def test_api_parameters_get_a_value_error_naming_them(source):
    bank = read_bank(source / "bank.csv")
    x, a, b = np.array([1.0, 0.0, 1.0]), np.ones(3), np.zeros(3)
    cases = [
        (dict(prior_sd=0), "prior_sd must be positive"),
        (dict(prior_sd=-1.0), "prior_sd must be positive, got -1.0"),
        (dict(prior_sd=float("nan")), "prior_sd must be finite"),
        (dict(prior_mean=float("nan")), "prior_mean must be finite"),
        (dict(prior_mean="0"), "prior_mean must be a number"),
        (dict(bounds=(5.0, -5.0)), r"bounds must be increasing"),
        (dict(bounds=(float("nan"), 5.0)), r"bounds\[0\] must be finite"),
        (dict(bounds=5.0), r"bounds must be a pair"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            map_ability(x, a, b, **kwargs)
    for kwargs, message in [
        (dict(target_se="0.3"), "target_se must be a positive number, got '0.3'"),
        (dict(target_se=float("nan")), "target_se must be a positive number"),
        (dict(max_items=2.5), "max_items must be a positive integer, got 2.5"),
        (dict(max_items=10, prior_sd=0), "prior_sd must be positive"),
        (dict(max_items=10, prior_sd=-2), "prior_sd must be positive"),
        (dict(max_items=10, prior_mean=float("nan")), "prior_mean must be finite"),
    ]:
        with pytest.raises(ValueError, match=message):
            AdaptiveSession(bank, **kwargs)
    # the checks hold the estimates to what was asked: a valid call still works
    assert np.isfinite(map_ability(x, a, b, prior_sd=0.5, bounds=(-3.0, 3.0)).theta)


def test_ids_equal_as_text_are_rejected():
    with pytest.raises(ValueError, match="items 1 and '1' are the same when written as text"):
        ItemBank(pd.DataFrame({"a": [1.0, 1.2], "b": [0.0, 0.5]}, index=pd.Index([1, "1"], dtype=object)))
    values = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="item identifiers 1 and '1' are the same when written as text"):
        ResponseMatrix(values, ["m1", "m2"], pd.Index([1, "1"], dtype=object))
    # distinct ids of mixed types still calibrate (compared and sorted as text)
    rng = np.random.default_rng(1)
    m = ResponseMatrix((rng.random((12, 4)) < 0.5).astype(float), [f"m{i}" for i in range(12)],
                       pd.Index([1, "2", "a", "b"], dtype=object))
    assert len(calibrate_bank(m, interval_check=False, variance_threshold=0.0)) == 4


# ---------------------------------------------------------------------------- files destroyed or left behind
def _report(cli, ws, *extra):
    return cli("report", "wide.csv", "-o", "report", "--n-splits", "0", "-q", *extra, cwd=ws)


def test_report_force_never_deletes_a_users_directory(ws, cli):
    (ws / "report").mkdir()
    (ws / "report" / "notes.txt").write_text("my notes")
    before = snapshot(ws)
    proc = _report(cli, ws, "--force")
    line = error_line(proc, 1)
    assert line.startswith("irtlib: error: report: already exists and is a directory irtlib did not write "
                           "(no .irtlib-output marker); --force replaces only irtlib's own output")
    assert_untouched(before, ws)
    assert sorted(p.name for p in ws.iterdir()) == sorted(["report", "wide.csv", "long.csv", "bank.csv"])


def test_report_force_replaces_a_previous_report_but_not_files_added_to_it(ws, cli):
    assert _report(cli, ws).returncode == 0
    marker = json.loads((ws / "report" / ".irtlib-output").read_text())
    assert "index.html" in marker["files"] and "summary.json" in marker["files"]
    (ws / "report" / "index.html").write_text("old")
    assert _report(cli, ws, "--force").returncode == 0                  # a previous report: replaced
    assert (ws / "report" / "index.html").read_text() != "old"
    assert sorted(p.name for p in ws.iterdir()) == sorted(["report", "wide.csv", "long.csv", "bank.csv"])
    (ws / "report" / "mine.txt").write_text("added by the user")
    before = snapshot(ws)
    proc = _report(cli, ws, "--force")
    assert error_line(proc, 1).startswith("irtlib: error: report: holds 'mine.txt', which irtlib did not write")
    assert_untouched(before, ws)


def test_report_force_over_a_file_and_leftovers(ws, cli):
    (ws / "report").write_text("a file, not a report")
    before = snapshot(ws)
    proc = _report(cli, ws, "--force")
    assert error_line(proc, 1).startswith("irtlib: error: report: already exists and is a file irtlib did not "
                                          "write")
    assert_untouched(before, ws)
    (ws / "report").unlink()
    # a leftover of an older irtlib (.report.old, a file or a directory) no longer blocks --force
    (ws / ".report.old").write_text("leftover")
    assert _report(cli, ws).returncode == 0
    before = snapshot(ws)
    proc = _report(cli, ws, "--force")
    assert proc.returncode == 0, proc.stderr
    assert (ws / ".report.old").read_text() == "leftover"
    hidden = sorted(p.name for p in ws.iterdir() if p.name.startswith("."))
    assert hidden == [".report.old"], hidden                                # nothing new left behind
    assert before["wide.csv"] == (ws / "wide.csv").read_bytes()


@pytest.mark.parametrize("inherited_mask", [set(), {signal.SIGTERM, signal.SIGINT}], ids=["unblocked", "blocked"])
def test_report_sigterm_leaves_no_temporary_directory(ws, inherited_mask):
    """SIGTERM (timeout, a cancelled CI job) is handled like Ctrl-C: nothing half-written is left.

    Also when the command was started with SIGTERM blocked (a mask inherited from the parent's
    thread), which would otherwise hold the signal back until the report had been written.
    """
    big = simulate(40, 120, seed=3)
    big.to_csv(ws / "big.csv", index=False)
    before = snapshot(ws)
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "irtlib", "report", "big.csv", "-o", "rep", "--n-splits", "200",
                             "-q"], cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, inherited_mask))
    try:
        deadline = time.monotonic() + 120
        while not any(p.name.startswith(".rep.") for p in ws.iterdir()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the report never started writing"
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "irtlib: terminated"
    assert sorted(p.name for p in ws.iterdir()) == sorted(before)           # no .rep.*.tmp, no rep
    assert_untouched(before, ws)


def test_two_evaluations_cannot_share_a_state_file(ws):
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))
    first = subprocess.Popen([sys.executable, "-m", "irtlib", "evaluate", "bank.csv", "--stdin", "--max-items", "5",
                              "--state", "state.json"], cwd=ws, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = ws / ".state.json.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip() == f"{LOCK_MAGIC}{first.pid}"
                   and (ws / "state.json").exists()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = snapshot(ws)
        second = irtlib_process("evaluate", "bank.csv", "--stdin", "--max-items", "5", "--state", "state.json",
                                cwd=ws, stdin="1\n1\n1\n1\n1\n")
        assert error_line(second, 1) == (f"irtlib: error: state.json: in use by another evaluation (process "
                                         f"{first.pid}); wait for it to finish, or use another --state file")
        assert_untouched(before, ws)
        out, err = first.communicate("1\n0\n1\n1\n0\n", timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert len(json.loads((ws / "state.json").read_text())["events"]) == 5
    assert not lock.exists()                                                # the lock file is removed
    # once the first is done, the state can be resumed
    again = irtlib_process("evaluate", "bank.csv", "--stdin", "--max-items", "6", "--state", "state.json",
                           cwd=ws, stdin="1\n")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_outputs_respect_the_umask(ws, cli, umask):
    old = os.umask(umask)
    try:
        assert cli("calibrate", "wide.csv", "-o", "bank2.csv", "-q", "--no-interval-check", cwd=ws).returncode == 0
        assert cli("subset", "bank.csv", "--method", "random", "-k", "5", "-o", "items.csv", cwd=ws).returncode == 0
        assert cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m002", "--max-items", "3",
                   "--state", "state.json", "-q", cwd=ws).returncode == 0
        assert _report(cli, ws).returncode == 0
    finally:
        os.umask(old)
    for name in ("bank2.csv", "items.csv", "state.json", "report/index.html", "report/summary.json"):
        assert (ws / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
    assert (ws / "report").stat().st_mode & 0o777 == 0o777 & ~umask


def test_missing_or_read_only_output_directory_fails_before_any_work(ws, cli, monkeypatch):
    (ws / "broken.csv").write_text("model,item,score\nm1,q1,7\n")     # would fail if it were read first
    before = snapshot(ws)
    proc = cli("calibrate", "broken.csv", "-o", "nodir/bank.csv", cwd=ws)
    assert error_line(proc, 1) == "irtlib: error: nodir/bank.csv: directory nodir does not exist"
    (ws / "ro").mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).name == "ro" else real_access(p, mode))
    for args in (("calibrate", "broken.csv", "-o", "ro/bank.csv"),
                 ("subset", "bank.csv", "--method", "random", "-k", "3", "-o", "ro/items.csv"),
                 ("report", "broken.csv", "-o", "ro/report"),
                 ("agreement", "broken.csv", "-o", "ro/res.csv"),
                 ("evaluate", "bank.csv", "--responses", "broken.csv", "--state", "ro/state.json")):
        line = error_line(cli(*args, cwd=ws), 1)
        assert line == f"irtlib: error: {args[-1]}: cannot write in directory ro (permission denied)", line
    monkeypatch.setattr(os, "access", real_access)
    assert_untouched(before, ws)
    assert list((ws / "ro").iterdir()) == []


@pytest.mark.parametrize("output, message", [
    ("dir/", "-o dir/: names a directory; give a file name"),
    ("", "-o: the output path is empty"),
    (".", "-o .: names a directory; give a file name"),
])
def test_output_paths_naming_a_directory_or_nothing_are_usage_errors(ws, cli, output, message):
    (ws / "dir").mkdir()
    before = snapshot(ws)
    proc = cli("calibrate", "wide.csv", "-o", output, cwd=ws)
    line = error_line(proc, 2)
    assert line.startswith(f"irtlib calibrate: error: {message}"), line
    assert_untouched(before, ws)
    assert not (ws / "dir").is_file() and sorted(p.name for p in ws.iterdir()) == sorted(
        ["dir", "wide.csv", "long.csv", "bank.csv"])
    proc = cli("report", "wide.csv", "-o", "", cwd=ws)
    assert error_line(proc, 2) == "irtlib report: error: -o: the output path is empty"


def test_force_never_replaces_a_users_file(ws, cli):
    before = snapshot(ws)
    for args in (("calibrate", "wide.csv", "-o", "long.csv", "--force"),
                 ("subset", "bank.csv", "--method", "random", "-k", "3", "-o", "wide.csv", "--force"),
                 ("agreement", "wide.csv", "--n-splits", "1", "-o", "long.csv", "--force")):
        line = error_line(cli(*args, cwd=ws), 1)
        assert line.startswith(f"irtlib: error: {args[args.index('-o') + 1]}: already exists and was not written by "
                               "irtlib; --force replaces only irtlib's own output"), line
    assert_untouched(before, ws)
    # irtlib's own outputs are replaced with --force: a bank, a subset, agreement results
    for args in (("calibrate", "wide.csv", "-o", "b.csv", "--no-interval-check", "-q"),
                 ("subset", "bank.csv", "--method", "random", "-k", "3", "-o", "s.csv"),
                 ("agreement", "wide.csv", "--n-splits", "1", "--methods", "fluid,random", "--ks", "5", "-q",
                  "-o", "a.csv")):
        out = ws / args[args.index("-o") + 1]
        assert cli(*args, cwd=ws).returncode == 0
        inode = out.stat().st_ino
        proc = cli(*args, "--force", cwd=ws)
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_ino != inode                          # a new file, renamed into place
    assert_untouched(before, ws)


# ---------------------------------------------------------------------------- misleading messages
@pytest.mark.parametrize("args, message", [
    (("calibrate", "wide.csv", "-o", "b.csv", "--threshold", "5"),
     "argument --threshold: '5' must be a number between 0 and 1"),
    (("calibrate", "wide.csv", "-o", "b.csv", "--threshold", "-1"),
     "argument --threshold: '-1' must be a number between 0 and 1"),
    (("calibrate", "wide.csv", "-o", "b.csv", "--threshold", "nan"),
     "argument --threshold: 'nan' must be a number between 0 and 1"),
    (("calibrate", "wide.csv", "-o", "b.csv", "--variance-threshold", "nan"),
     "argument --variance-threshold: 'nan' must be a number in [0, 0.25)"),
    (("report", "wide.csv", "-o", "r", "--variance-threshold", "0.3"),
     "argument --variance-threshold: '0.3' must be a number in [0, 0.25)"),
    (("calibrate", "wide.csv", "-o", "b.csv", "--interval-folds", "1"),
     "argument --interval-folds: '1' must be at least 2"),
    (("calibrate", "wide.csv", "-o", "b.csv", "--interval-folds", "1000"),
     "--interval-folds 1000 is too many for 30 models (each fold needs at least 2): use at most 15"),
    (("agreement", "wide.csv", "--n-jobs", "0"),
     "argument --n-jobs: '0': give a number of processes >= 1, or -1 for all cores"),
    (("agreement", "wide.csv", "--methods", ""),
     "argument --methods: '' names no method; choose from fluid"),
    (("agreement", "wide.csv", "--methods", ",,"),
     "argument --methods: ',,' names no method; choose from fluid"),
    (("agreement", "wide.csv", "--n-splits", "0"), "argument --n-splits: '0' must be at least 1"),
    (("report", "wide.csv", "-o", "r", "--n-splits", "-1"), "argument --n-splits: '-1' must be at least 0"),
    (("calibrate", "wide.csv", "-o", "b.csv", "--sep", "ab"), "argument --sep: 'ab': give one character"),
])
def test_bad_option_values_are_usage_errors(ws, cli, args, message):
    before = snapshot(ws)
    proc = cli(*args, cwd=ws)
    line = error_line(proc, 2)
    assert line.startswith(f"irtlib {args[0]}: error: ") and message in line, line
    assert_untouched(before, ws)
    assert sorted(p.name for p in ws.iterdir()) == sorted(["wide.csv", "long.csv", "bank.csv"])


@pytest.mark.parametrize("variant", ["gzip-without-gz", "tab-named-csv", "semicolon-named-csv",
                                     "gzip-semicolon-named-tsv", "pipe-with-sep"])
def test_compression_and_separator_are_detected(ws, cli, variant):
    text = (ws / "wide.csv").read_text()
    extra = ()
    if variant == "gzip-without-gz":
        (ws / "data.csv").write_bytes(gzip.compress(text.encode()))
    elif variant == "tab-named-csv":
        (ws / "data.csv").write_text(text.replace(",", "\t"))
    elif variant == "semicolon-named-csv":
        (ws / "data.csv").write_text(text.replace(",", ";"))
    elif variant == "gzip-semicolon-named-tsv":
        (ws / "data.csv").write_bytes(gzip.compress(text.replace(",", ";").encode()))
    else:
        (ws / "data.csv").write_text(text.replace(",", "|"))
        extra = ("--sep", "|")
    before = snapshot(ws)
    proc = cli("calibrate", "data.csv", "-o", "b.csv", "--no-interval-check", "--json", "-q", *extra, cwd=ws)
    assert proc.returncode == 0, proc.stderr
    reference = cli("calibrate", "wide.csv", "-o", "ref.csv", "--no-interval-check", "--json", "-q", cwd=ws)
    assert json.loads(proc.stdout)["bank_sha256"] == json.loads(reference.stdout)["bank_sha256"]
    assert_untouched(before, ws)


def test_unknown_separator_offers_sep(ws, cli):
    rows = [f"m{m}:q{q}:{int((m + q) % 3 == 0)}" for m in range(4) for q in range(3)]
    (ws / "odd.csv").write_text("model:item:score\n" + "\n".join(rows) + "\n")
    line = error_line(cli("calibrate", "odd.csv", "-o", "b.csv", cwd=ws), 1)
    assert "odd.csv" in line and "--sep" in line, line
    assert cli("calibrate", "odd.csv", "-o", "b.csv", "--sep", ":", "--no-interval-check", "--variance-threshold",
               "0", "-q", cwd=ws).returncode == 0


def test_wide_file_with_an_item_named_score(ws, cli):
    wide = simulate().rename(columns={"q0007": "score"})
    wide.to_csv(ws / "w.csv", index=False)
    before = snapshot(ws)
    proc = cli("calibrate", "w.csv", "-o", "b.csv", cwd=ws)
    assert error_line(proc, 1) == ("irtlib: error: w.csv: has a 'score' column but no 'item' column: if it is a wide "
                                   "file with an item named 'score', pass --layout wide; if it is a long file, name "
                                   "its item column with --item-column")
    assert_untouched(before, ws)
    proc = cli("calibrate", "w.csv", "-o", "b.csv", "--layout", "wide", "--json", "-q", cwd=ws)
    assert proc.returncode == 0 and json.loads(proc.stdout)["n_items"] == 60


def test_a_single_model_is_explained(ws, cli):
    simulate().iloc[:1].to_csv(ws / "one.csv", index=False)
    before = snapshot(ws)
    for command in (("calibrate", "one.csv", "-o", "b.csv"), ("report", "one.csv", "-o", "r", "--n-splits", "0"),
                    ("agreement", "one.csv")):
        line = error_line(cli(*command, cwd=ws), 1)
        assert line.startswith("irtlib: error: one.csv: only 1 model") and "at least two models" in line, line
    assert_untouched(before, ws)
    with pytest.raises(ValueError, match="only 1 model.*at least two models"):
        calibrate_bank(ResponseMatrix([[1.0, 0.0]], ["m"], ["a", "b"]))


def test_few_models_say_the_interval_check_is_skipped(ws, cli):
    simulate(8, 60, seed=4).to_csv(ws / "eight.csv", index=False)
    proc = cli("calibrate", "eight.csv", "-o", "small.csv", "--json", "-q", cwd=ws)
    assert proc.returncode == 0
    warning = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warning == ["irtlib: warning: eight.csv: interval check skipped: only 8 models (the check needs at least "
                       "10); adaptive tests on this bank state the plain 2PL intervals, which are too narrow"]
    assert json.loads(proc.stdout)["interval_check"]["skipped"].startswith("skipped: only 8 models")
    proc = cli("evaluate", "small.csv", "--responses", "eight.csv", "--model", "m001", "--max-items", "5", "--json",
               "-q", cwd=ws)
    assert proc.returncode == 0
    note = json.loads(proc.stdout)["interval_note"]
    assert note.startswith("small.csv: the score interval is the plain 2PL one") and "only 8 models" in note
    assert f"irtlib: warning: {note}" in proc.stderr
    proc = cli("evaluate", "small.csv", "--responses", "eight.csv", "--all-models", "--max-items", "5", "--json",
               "-q", cwd=ws)
    assert proc.returncode == 0 and json.loads(proc.stdout)["interval_note"] == note
    assert proc.stderr.splitlines() == [f"irtlib: warning: {note}"]
    # a bank with the check says nothing
    proc = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", "--max-items", "5", "--json",
               "-q", cwd=ws)
    assert json.loads(proc.stdout)["interval_note"] is None and "warning" not in proc.stderr


def test_blank_models_and_items_are_dropped_alike_in_both_layouts(ws, cli):
    wide = simulate().astype(object)
    wide.loc[4, wide.columns[1:]] = ""                  # model m004: every score blank
    wide["q0010"] = ""                                  # item q0010: every score blank
    wide.to_csv(ws / "w.csv", index=False)
    long = wide.melt(id_vars="model", var_name="item", value_name="score")
    long.to_csv(ws / "l.csv", index=False)
    before = snapshot(ws)
    docs = {}
    for name in ("w.csv", "l.csv"):
        proc = cli("calibrate", name, "-o", f"bank-{name}", "--no-interval-check", "--json", "-q", cwd=ws)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines() == [
            f"irtlib: warning: {name}: left out 1 model with only blank scores: 'm004'",
            f"irtlib: warning: {name}: left out 1 item with only blank scores: 'q0010'"], proc.stderr
        docs[name] = json.loads(proc.stdout)
    assert docs["w.csv"]["n_models"] == docs["l.csv"]["n_models"] == 29
    assert docs["w.csv"]["n_items"] == docs["l.csv"]["n_items"] == 59
    assert docs["w.csv"]["bank_sha256"] == docs["l.csv"]["bank_sha256"]
    assert_untouched(before, ws)


def test_stdin_end_of_input_and_invalid_answers(ws):
    before = snapshot(ws)
    proc = irtlib_process("evaluate", "bank.csv", "--stdin", "--max-items", "5", "--json", cwd=ws, stdin="1\n0\n")
    line = error_line(proc, 1)
    assert line == ("irtlib: error: stdin ended after 2 responses, before the stopping rule: the result above is "
                    "incomplete")
    doc = json.loads(proc.stdout)
    assert doc["complete"] is False and doc["n_items"] == 2 and doc["stop_reason"] is None
    proc = irtlib_process("evaluate", "bank.csv", "--stdin", "--max-items", "5", cwd=ws, stdin="1\nyes please\n")
    assert error_line(proc, 1).startswith("irtlib: error: stdin line 2: 'yes please' is not a response to item ")
    # q is the user's own choice: the partial result, exit 0
    proc = irtlib_process("evaluate", "bank.csv", "--stdin", "--max-items", "5", "--json", cwd=ws, stdin="1\nq\n")
    assert proc.returncode == 0 and json.loads(proc.stdout)["complete"] is False
    assert_untouched(before, ws)


def test_report_without_agreement_for_few_models(ws, cli):
    simulate(8, 40, seed=5).to_csv(ws / "eight.csv", index=False)
    before = snapshot(ws)
    proc = cli("report", "eight.csv", "-o", "rep", cwd=ws)
    line = error_line(proc, 2)
    assert line == ("irtlib report: error: eight.csv: 8 models are too few for --n-test 10 (the agreement protocol "
                    "needs --n-test + 2): lower --n-test, or pass --n-splits 0 to write the report without the "
                    "agreement section")
    assert_untouched(before, ws)
    assert not (ws / "rep").exists()
    proc = cli("report", "eight.csv", "-o", "rep", "--n-splits", "0", "--json", "-q", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["agreement"] is None
    assert "Agreement protocol not run (0 splits)" in (ws / "rep" / "index.html").read_text()
    assert not (ws / "rep" / "agreement.csv").exists()


def test_long_ids_are_cut_in_messages(ws, cli):
    huge = "x" * 1_000_000
    (ws / "huge.csv").write_text(f"model,item,score\n{huge},q1,1\n{huge},q1,0\nm2,q1,1\n")
    proc = cli("calibrate", "huge.csv", "-o", "b.csv", cwd=ws)
    line = error_line(proc, 1)
    assert line.startswith("irtlib: error: huge.csv: rows [1, 2]: model 'xxxx") and "(1000000 characters)" in line
    assert len(proc.stderr) < 1000
    (ws / "huge2.csv").write_text(f"model,item,score\n{huge},q1,1\n{huge} ,q2,0\nm2,q1,1\n")
    proc = cli("calibrate", "huge2.csv", "-o", "b.csv", cwd=ws)
    assert "differ only by surrounding whitespace" in error_line(proc, 1) and len(proc.stderr) < 1000
    from irtlib.core.responses import shown
    assert shown("short") == "'short'" and len(shown(huge)) < 100


def _other_item(state):
    """A bank item the session never proposed, in place of event 4's (an edited state)."""
    from irtlib.bank.build import read_bank

    used = {e["item"] for e in state["events"]}
    state["events"][3]["item"] = next(i for i in read_bank(state["_bank"]).item_ids if i not in used)


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["settings"].update(prior_sd=0), "corrupt session settings (prior_sd must be positive, got 0.0)"),
    (lambda s: s["settings"].update(prior_sd="abc"), "corrupt session settings (prior_sd must be a number, got 'abc')"),
    (lambda s: s["settings"].update(target_se="0.3", max_items=None),
     "corrupt session settings (target_se must be a positive number, got '0.3')"),
    (lambda s: s["settings"].update(max_items=-3), "corrupt session settings (max_items must be a positive integer"),
    (lambda s: s.update(model=["m"]), "corrupt session settings (model must be the model's name"),
    (lambda s: s.update(events="x"), "corrupt session state ('settings' or 'events' malformed)"),
    (lambda s: s.update(bank_sha256="0" * 64), "was made with another item bank"),
    (_other_item, "event 4: item"),
    ("truncated", "corrupt session state"),
    (lambda s: None, "is a session of model 'm002', not 'm003'"),
], ids=["prior_sd=0", "prior_sd=abc", "target_se=text", "max_items<0", "model=list", "events=text",
        "another bank", "edited event", "truncated", "another model"])
def test_corrupt_or_edited_states_are_rejected_untouched(ws, cli, edit, message):
    """The one command-line test of bad state files (the library's is test_session's): one line naming
    the file and what is wrong, exit 1, and nothing written."""
    assert cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m002", "--max-items", "5",
               "--state", "state.json", "-q", cwd=ws).returncode == 0
    text = (ws / "state.json").read_text()
    if edit == "truncated":
        (ws / "state.json").write_text(text[:-30])
    else:
        state = json.loads(text)
        state["_bank"] = ws / "bank.csv"
        edit(state)
        del state["_bank"]
        (ws / "state.json").write_text(json.dumps(state))
    model = "m003" if "another model" in message or "not 'm003'" in message else "m002"
    before = snapshot(ws)
    proc = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", model, "--max-items", "8",
               "--state", "state.json", cwd=ws)
    line = error_line(proc, 1)
    assert line.startswith("irtlib: error: state.json: ") and message in line, line
    assert_untouched(before, ws)


def test_pyirt_engine_without_torch_names_the_extra(monkeypatch):
    from irtlib import fit_2pl

    monkeypatch.setitem(sys.modules, "torch", None)            # `import torch` raises ImportError
    monkeypatch.delitem(sys.modules, "irtlib.calibration.pyirt", raising=False)
    m = ResponseMatrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), ["a", "b", "c"], ["q1", "q2"])
    with pytest.raises(ImportError, match=r"engine=\"pyirt\" needs torch, pyro-ppl and py-irt.*"
                                          r"pip install 'irtlib\[pyirt\]'"):
        fit_2pl(m, engine="pyirt")


def test_rows_longer_than_the_header_are_not_shifted(ws, cli):
    """pandas takes the first column as the index when every row has one field too many, shifting
    every column by one (the model names would become the first item's scores)."""
    lines = (ws / "wide.csv").read_text().splitlines()
    reference = cli("calibrate", "wide.csv", "-o", "ref.csv", "--no-interval-check", "--json", "-q", cwd=ws)
    # one extra, non-empty field on every row: refused
    (ws / "shifted.csv").write_text("\n".join([lines[0]] + [line + ",1" for line in lines[1:]]) + "\n")
    before = snapshot(ws)
    proc = cli("calibrate", "shifted.csv", "-o", "b.csv", cwd=ws)
    assert error_line(proc, 1) == ("irtlib: error: shifted.csv: rows have more fields than the header's 61 columns "
                                   "(a separator at the end of each line?): every row needs exactly one field per "
                                   "column")
    assert_untouched(before, ws)
    # a separator at the end of every data row: read as it is meant, not shifted
    (ws / "trailing-rows.csv").write_text("\n".join([lines[0]] + [line + "," for line in lines[1:]]) + "\n")
    proc = cli("calibrate", "trailing-rows.csv", "-o", "b1.csv", "--no-interval-check", "--json", "-q", cwd=ws)
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["bank_sha256"] == json.loads(reference.stdout)["bank_sha256"]
    # at the end of every line, header included: an empty column, left out with a warning
    (ws / "trailing.csv").write_text("\n".join(line + "," for line in lines) + "\n")
    proc = cli("calibrate", "trailing.csv", "-o", "b2.csv", "--no-interval-check", "--json", "-q", cwd=ws)
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == ["irtlib: warning: trailing.csv: left out 1 item with only blank scores: "
                                        "'Unnamed: 61'"]
    assert json.loads(proc.stdout)["bank_sha256"] == json.loads(reference.stdout)["bank_sha256"]


def test_duplicate_ids_in_a_matrix_and_in_banks(ws, cli):
    """Duplicate model or item ids are refused wherever they can enter: a matrix, a bank's item
    table (through the file and the CLI), and a bank header's list of calibration models."""
    from irtlib.bank.build import ItemBank, read_bank
    from irtlib.core.responses import ResponseMatrix

    with pytest.raises(ValueError, match="duplicate model identifiers: 'm1'"):
        ResponseMatrix([[1, 0], [0, 1]], ["m1", "m1"], ["a", "b"])
    with pytest.raises(ValueError, match="duplicate item identifiers: 'a'"):
        ResponseMatrix([[1, 0], [0, 1]], ["m1", "m2"], ["a", "a"])
    with pytest.raises(ValueError, match="item bank: item 'q1' appears twice"):
        ItemBank(pd.DataFrame({"a": [1.0, 1.2], "b": [0.0, 0.5]}, index=["q1", "q1"]), {})

    def twice(frame):
        frame.loc[5, "item"] = frame.loc[4, "item"]
        return frame

    rehash_body(ws / "bank.csv", twice)
    with pytest.raises(ValueError, match="appears twice"):
        read_bank(ws / "bank.csv")
    proc = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", cwd=ws)
    assert "appears twice" in error_line(proc, 1)


def test_duplicate_calibration_models_in_a_bank_header(ws):
    from irtlib.bank.build import read_bank

    def edit(meta):
        meta["models"]["name"][1] = meta["models"]["name"][0]

    rehash(ws / "bank.csv", edit)
    with pytest.raises(ValueError, match=r"header field models.name: expected distinct model names \('m000' appears"):
        read_bank(ws / "bank.csv")
