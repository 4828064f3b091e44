"""Hostile input to sessions and files: resumes with other settings, lock paths, file kinds, pipes, full disks.

Each case runs the command line (in this process, or in a subprocess where streams or the real
entry point matter) or the API, and checks the exit status, the first line of the error and that
every file present before is byte-identical afterwards. Helpers and data are those of
``test_hostile_input.py`` (a 30 x 60 2PL simulation and a bank calibrated from it).
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import test_hostile_input as hostile
from test_hostile_input import assert_untouched, rehash, simulate, snapshot

from irtlib import map_ability
from irtlib.bank.session import LOCK_MAGIC
from irtlib.cli import main

cli = hostile.cli               # the in-process command-line fixture


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile18")
    wide = simulate()
    wide.to_csv(root / "wide.csv", index=False)
    assert main(["calibrate", str(root / "wide.csv"), "-o", str(root / "bank.csv"), "-q"]) == 0
    # a new model's graded judge scores (0, 0.25, ..., 1) on every item: the binarization rule matters
    rng = np.random.default_rng(7)
    items = [c for c in wide.columns if c != "model"]
    graded = pd.DataFrame({"model": "new", "item": items, "score": rng.choice([0, 0.25, 0.5, 0.75, 1.0], len(items))})
    graded.to_csv(root / "graded.csv", index=False)
    return root


@pytest.fixture
def ws(source, tmp_path):
    for name in ("wide.csv", "bank.csv", "graded.csv"):
        shutil.copy(source / name, tmp_path / name)
    return tmp_path


def first_error(result, code):
    """Exit status ``code``, no traceback, and the first line of stderr is an ``irtlib... error:`` line."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines, "nothing on stderr"
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def evaluate(cli, ws, *extra, state="s.json"):
    """``evaluate`` of graded.csv with ``--state`` (``--binarize strict`` unless ``extra`` names a rule)."""
    if "--binarize" not in extra:
        extra = ("--binarize", "strict", *extra)
    return cli("evaluate", "bank.csv", "--responses", "graded.csv", "--state", state, "-q", *extra, cwd=ws)


# ---------------------------------------------------------------------------- BAD: state files mix settings
@pytest.mark.parametrize("first, second, difference", [
    (["--binarize", "strict"], ["--binarize", "lenient"],
     "started with --binarize strict, this run has --binarize lenient"),
    (["--binarize", "lenient"], ["--binarize", "lenient", "--threshold", "0.7"],
     "started with --threshold 0.5, this run has --threshold 0.7"),
    (["--binarize", "strict"], ["--binarize", "strict", "--score-column", "other"], None),
])
def test_a_resume_with_other_settings_is_refused(ws, cli, first, second, difference):
    if difference is None:                   # a score column the file lacks: refused when reading, state untouched
        pd.read_csv(ws / "graded.csv").assign(other=1.0).to_csv(ws / "graded.csv", index=False)
        difference = "started with --score-column score, this run has --score-column other"
    assert evaluate(cli, ws, *first, "--max-items", "5").returncode == 0
    before = snapshot(ws)
    result = evaluate(cli, ws, *second, "--max-items", "10")
    line = first_error(result, 1)
    assert line.startswith("irtlib: error: s.json: the session was started with"), line
    assert difference in line, line
    assert_untouched(before, ws)
    assert not (ws / ".s.json.lock").exists()


def test_a_resume_with_the_same_rule_equals_one_whole_run(ws, cli):
    """strict then lenient used to give an estimate of neither rule; the same rule resumes as before."""
    assert evaluate(cli, ws, "--binarize", "strict", "--max-items", "5").returncode == 0
    resumed = evaluate(cli, ws, "--binarize", "strict", "--max-items", "10", "--json")
    assert resumed.returncode == 0, resumed.stderr
    whole = cli("evaluate", "bank.csv", "--responses", "graded.csv", "--binarize", "strict", "--max-items", "10",
                "--json", "-q", cwd=ws)
    assert json.loads(resumed.stdout)["predicted_score"] == json.loads(whole.stdout)["predicted_score"]
    state = json.loads((ws / "s.json").read_text())
    assert state["context"]["--binarize"] == "strict" and state["context"]["responses from"] == "file"


def test_auto_and_its_resolved_rule_are_the_same_setting(ws, cli):
    wide = pd.read_csv(ws / "wide.csv")
    wide[wide["model"] == "m001"].to_csv(ws / "one.csv", index=False)
    args = ("evaluate", "bank.csv", "--responses", "one.csv", "--state", "t.json", "-q")
    assert cli(*args, "--max-items", "3", cwd=ws).returncode == 0                      # auto = binary for a file
    assert cli(*args, "--binarize", "binary", "--max-items", "6", cwd=ws).returncode == 0
    before = snapshot(ws)
    line = first_error(cli(*args, "--binarize", "lenient", "--max-items", "9", cwd=ws), 1)
    assert "started with --binarize binary, this run has --binarize lenient" in line
    assert_untouched(before, ws)


def test_a_stdin_session_is_not_resumed_from_a_file(ws, cli):
    assert cli("evaluate", "bank.csv", "--stdin", "--state", "s.json", "--max-items", "2", "-q", cwd=ws,
               stdin="1\n0\n").returncode == 0
    before = snapshot(ws)
    line = first_error(evaluate(cli, ws, "--binarize", "strict", "--max-items", "4"), 1)
    assert "started with responses from stdin, this run has responses from file" in line
    assert_untouched(before, ws)


def test_an_unnamed_stdin_session_takes_the_name_given_on_resume(ws, cli):
    args = ("evaluate", "bank.csv", "--stdin", "--state", "s.json", "-q")
    assert cli(*args, "--max-items", "2", cwd=ws, stdin="1\n0\n").returncode == 0
    assert json.loads((ws / "s.json").read_text())["model"] is None
    resumed = cli(*args, "--max-items", "3", "--model", "X", "--json", cwd=ws, stdin="1\n")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["model"] == "X"
    assert json.loads((ws / "s.json").read_text())["model"] == "X"
    # and a named one still refuses another name
    before = snapshot(ws)
    line = first_error(cli(*args, "--max-items", "4", "--model", "Y", cwd=ws, stdin="1\n"), 1)
    assert line == "irtlib: error: s.json: is a session of model 'X', not 'Y'"
    assert_untouched(before, ws)


def test_a_state_without_a_context_is_resumed_and_records_one(ws, cli):
    """States written by older versions carry no context: they resume, and record this run's settings."""
    assert evaluate(cli, ws, "--binarize", "strict", "--max-items", "3").returncode == 0
    state = json.loads((ws / "s.json").read_text())
    del state["context"]
    (ws / "s.json").write_text(json.dumps(state))
    assert evaluate(cli, ws, "--binarize", "strict", "--max-items", "5").returncode == 0
    assert json.loads((ws / "s.json").read_text())["context"]["--binarize"] == "strict"


# ---------------------------------------------------------------------------- BAD: the lock path
def test_a_symlink_at_the_lock_path_is_left_alone(ws, cli):
    victim = ws / "victim.txt"
    victim.write_text("precious\n")
    (ws / ".s.json.lock").symlink_to(victim)
    before = snapshot(ws)
    line = first_error(evaluate(cli, ws, "--max-items", "3"), 1)
    assert line.startswith("irtlib: error: s.json: .s.json.lock exists and is not a lock file irtlib made (it is a "
                           "symbolic link)"), line
    assert_untouched(before, ws)
    assert (ws / ".s.json.lock").is_symlink() and victim.read_text() == "precious\n"
    assert not (ws / "s.json").exists()


def test_a_dangling_symlink_at_the_lock_path_creates_nothing(ws, cli):
    (ws / ".s.json.lock").symlink_to(ws / "elsewhere.txt")
    line = first_error(evaluate(cli, ws, "--max-items", "3"), 1)
    assert "is not a lock file irtlib made (it is a symbolic link)" in line
    assert not (ws / "elsewhere.txt").exists() and (ws / ".s.json.lock").is_symlink()


@pytest.mark.parametrize("kind, said", [
    ("file", "it does not begin with 'irtlib-state-lock pid'"),
    ("directory", "it is a directory"),
    ("hardlink", "it is a file with 2 hard links"),
    ("fifo", "it is not a regular file"),
])
def test_anything_irtlib_did_not_create_at_the_lock_path_is_refused(ws, cli, kind, said):
    lock = ws / ".s.json.lock"
    if kind == "file":
        lock.write_text("my notes\n")
    elif kind == "directory":
        lock.mkdir()
        (lock / "inside.txt").write_text("x")
    elif kind == "hardlink":
        (ws / "mine.txt").write_text("mine\n")
        os.link(ws / "mine.txt", lock)
    else:
        os.mkfifo(lock)
    before = snapshot(ws)
    line = first_error(evaluate(cli, ws, "--max-items", "3"), 1)
    assert "s.json: .s.json.lock exists and is not a lock file irtlib made" in line and said in line, line
    assert_untouched(before, ws)
    assert os.path.lexists(lock)


def test_a_stale_lock_irtlib_left_is_reused_and_removed(ws, cli):
    """A lock left by a killed evaluation (its magic, a dead pid) does not block the next one."""
    (ws / ".s.json.lock").write_text(f"{LOCK_MAGIC}999999\n")
    assert evaluate(cli, ws, "--max-items", "3").returncode == 0
    assert not os.path.lexists(ws / ".s.json.lock") and (ws / "s.json").is_file()


# ---------------------------------------------------------------------------- POOR: an impossible bank summary
def test_an_impossible_filtered_summary_is_rejected(ws, cli):
    bank = ws / "bank.csv"
    n_bank = len(bank.read_text().splitlines()) - 2
    rehash(bank, lambda meta: (meta.__setitem__("filtered", {"n_items": 100000, "n_safe": 100000, "n_unsafe": 0,
                                                             "safe_rate_sum": 0.0}),
                               meta["data"].__setitem__("n_items", n_bank + 100000)))
    before = snapshot(ws)
    result = cli("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m001", "--max-items", "5", "-q",
                 cwd=ws)
    line = first_error(result, 1)
    assert line.startswith("irtlib: error: bank.csv: line 1: header field filtered.safe_rate_sum: expected a number "
                           "in [98989.8, 100000] for 100000 near-all-safe and 0 near-all-unsafe filtered items"), line
    assert_untouched(before, ws)


# ---------------------------------------------------------------------------- POOR: messages
def test_a_bank_with_a_byte_order_mark(ws, cli):
    (ws / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (ws / "bank.csv").read_bytes())
    before = snapshot(ws)
    line = first_error(cli("evaluate", "bom.csv", "--responses", "wide.csv", "--model", "m001", "--max-items", "3",
                           "-q", cwd=ws), 1)
    assert line.startswith("irtlib: error: bom.csv: begins with a byte-order mark"), line
    assert_untouched(before, ws)


def test_json_lines_of_another_layout_given_as_csv(ws, cli):
    """A '{'-first file is read as the authors' JSON lines: another layout is named by line."""
    wide = pd.read_csv(ws / "wide.csv")
    target = ws / "responses.csv"
    wide.melt(id_vars="model", var_name="item", value_name="score").to_json(target, orient="records", lines=True)
    before = snapshot(ws)
    line = first_error(cli("calibrate", "responses.csv", "-o", "out.csv", "-q", cwd=ws), 1)
    assert line.startswith("irtlib: error: responses.csv (read as JSON lines: it begins with '{'): line 1: missing "
                           "key(s) 'subject_id', 'responses' (found keys: 'model', 'item', 'score')"), line
    assert_untouched(before, ws)
    assert not (ws / "out.csv").exists()


@pytest.mark.parametrize("kind, looks", [
    ("json", "looks like JSON or JSON Lines (it begins with '{' or '[')"),
    ("xlsx", "looks like an Excel workbook (.xlsx)"),
    ("xls", "looks like an Excel workbook (.xls)"),
])
def test_json_and_excel_files_given_as_csv_are_named(ws, cli, kind, looks):
    import zipfile

    wide = pd.read_csv(ws / "wide.csv")
    target = ws / "responses.csv"
    if kind == "json":
        target.write_text(wide.to_json(orient="records"))
    elif kind == "xlsx":
        with zipfile.ZipFile(target, "w") as archive:      # the parts that make a zip an Excel workbook
            archive.writestr("[Content_Types].xml", "<Types/>")
            archive.writestr("xl/workbook.xml", "<workbook/>")
    else:
        target.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    before = snapshot(ws)
    line = first_error(cli("calibrate", "responses.csv", "-o", "out.csv", "-q", cwd=ws), 1)
    assert line.startswith(f"irtlib: error: responses.csv: {looks}, not a table irtlib reads; irtlib reads "
                           "CSV/TSV"), line
    assert "Parquet" in line and "save it as CSV first" in line
    assert_untouched(before, ws)
    assert not (ws / "out.csv").exists()


def test_a_zipped_csv_is_still_read(ws, cli):
    """The Excel check looks inside the zip: a zipped CSV is no workbook."""
    import zipfile

    with zipfile.ZipFile(ws / "wide.zip", "w") as archive:
        archive.write(ws / "wide.csv", "wide.csv")
    assert cli("calibrate", "wide.zip", "-o", "out.csv", "-q", cwd=ws).returncode == 0


def test_state_through_a_symlink_does_not_suggest_force(ws, cli):
    assert evaluate(cli, ws, "--max-items", "3", state="real.json").returncode == 0
    (ws / "link.json").symlink_to(ws / "real.json")
    before = snapshot(ws)
    line = first_error(evaluate(cli, ws, "--max-items", "5", state="link.json"), 1)
    assert line.startswith("irtlib: error: link.json: is a symbolic link (to "), line
    assert "give --state the file itself" in line and "--force" not in line
    assert_untouched(before, ws)
    assert (ws / "link.json").is_symlink()


def test_subset_force_over_a_bank_and_calibrate_force_over_a_subset(ws, cli):
    before = snapshot(ws)
    line = first_error(cli("subset", "bank.csv", "--method", "random", "-k", "5", "-o", "bank.csv", "--force", "-q",
                           cwd=ws), 1)
    assert line == ("irtlib: error: bank.csv: is an item bank irtlib wrote, not a subset file; --force replaces only "
                    "a subset file: choose another -o")
    assert_untouched(before, ws)
    assert cli("subset", "bank.csv", "--method", "random", "-k", "5", "-o", "items.csv", "-q", cwd=ws).returncode == 0
    before = snapshot(ws)
    line = first_error(cli("calibrate", "wide.csv", "-o", "items.csv", "--force", "-q", cwd=ws), 1)
    assert line.startswith("irtlib: error: items.csv: is a subset file irtlib wrote, not an item bank"), line
    assert_untouched(before, ws)
    # a subset over a subset is still replaced with --force
    assert cli("subset", "bank.csv", "--method", "random", "-k", "6", "-o", "items.csv", "--force", "-q",
               cwd=ws).returncode == 0


def test_a_full_disk_names_the_file_being_written(ws, cli, monkeypatch):
    import errno

    import irtlib.io

    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(irtlib.io.atomic.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    before = snapshot(ws)
    line = first_error(cli("calibrate", "wide.csv", "-o", "new_bank.csv", "-q", cwd=ws), 1)
    assert line.startswith("irtlib: error: new_bank.csv: No space left on device while writing it ("), line
    assert_untouched(before, ws)
    assert sorted(snapshot(ws)) == sorted(before)          # no temporary file left behind


def test_parquet_ids_that_are_not_utf8(ws, cli):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"model": pa.array([b"m\xff1", b"m2"] * 2, pa.binary()),
                      "item": pa.array([b"q1", b"q1", b"q2", b"q2"], pa.binary()), "score": [1, 0, 0, 1]})
    pq.write_table(table, ws / "bin.parquet")
    before = snapshot(ws)
    line = first_error(cli("calibrate", "bin.parquet", "-o", "out.csv", "-q", cwd=ws), 1)
    assert line == ("irtlib: error: bin.parquet: row 1: column 'model' holds b'm\\xff1', which is not UTF-8 text; "
                    "ids and scores must be text or numbers")
    assert_untouched(before, ws)


def test_binary_parquet_columns_that_are_utf8_are_read(ws, cli):
    import pyarrow as pa
    import pyarrow.parquet as pq

    long = pd.read_csv(ws / "wide.csv").melt(id_vars="model", var_name="item", value_name="score")
    pq.write_table(pa.table({"model": pa.array([m.encode() for m in long["model"]], pa.binary()),
                             "item": pa.array([i.encode() for i in long["item"]], pa.binary()),
                             "score": long["score"].to_numpy()}), ws / "bin.parquet")
    from_parquet = cli("calibrate", "bin.parquet", "-o", "a.csv", "--json", "-q", cwd=ws)
    from_csv = cli("calibrate", "wide.csv", "-o", "b.csv", "--json", "-q", cwd=ws)
    assert from_parquet.returncode == 0, from_parquet.stderr
    assert json.loads(from_parquet.stdout)["bank_sha256"] == json.loads(from_csv.stdout)["bank_sha256"]


def test_streams_are_refused_at_once_and_a_fifo_does_not_hang(ws, cli):
    fifo = ws / "fifo.csv"
    os.mkfifo(fifo)                              # no writer: opening it would block forever
    before = snapshot(ws)
    line = first_error(cli("calibrate", "fifo.csv", "-o", "out.csv", "-q", cwd=ws), 1)
    assert line.startswith("irtlib: error: fifo.csv: is a pipe or another stream, not a regular file"), line
    assert "save it to a file first" in line
    read, write = os.pipe()                      # what `<(cat wide.csv)` gives: /dev/fd/N
    try:
        os.write(write, b"model,q0000\nm000,1\n")
        os.close(write)
        line = first_error(cli("evaluate", "bank.csv", "--responses", f"/dev/fd/{read}", "--max-items", "2", "-q",
                               cwd=ws), 1)
        assert line.startswith(f"irtlib: error: /dev/fd/{read}: is a pipe or another stream"), line
    finally:
        os.close(read)
    assert_untouched(before, ws)


def test_a_bank_through_a_pipe_is_read_once(ws, cli):
    args = ("--responses", "wide.csv", "--model", "m001", "--max-items", "4", "--json", "-q")
    from_file = cli("evaluate", "bank.csv", *args, cwd=ws)
    read, write = os.pipe()
    try:
        data = (ws / "bank.csv").read_bytes()
        assert len(data) < 60000                 # fits the pipe's buffer: no writer thread needed
        os.write(write, data)
        os.close(write)
        from_pipe = cli("evaluate", f"/dev/fd/{read}", *args, cwd=ws)
    finally:
        os.close(read)
    assert from_pipe.returncode == 0, from_pipe.stderr
    keep = ("theta", "se", "predicted_score", "bank_sha256")
    assert {k: json.loads(from_pipe.stdout)[k] for k in keep} == {k: json.loads(from_file.stdout)[k] for k in keep}


def test_a_directory_given_as_a_bank(ws, cli):
    (ws / "bankdir").mkdir()
    line = first_error(cli("evaluate", "bankdir", "--responses", "wide.csv", "--model", "m001", "--max-items", "3",
                           "-q", cwd=ws), 1)
    assert line.startswith("irtlib: error: bankdir: is a directory, not an item bank file"), line


def test_quiet_silences_numpy_warnings_on_a_tiny_report(ws):
    import subprocess
    import sys

    # every model unsafe on q0: an item with no variance, whose statistics make numpy warn
    pd.DataFrame({"model": ["m0", "m1", "m2", "m3"], "q0": [0, 0, 0, 0], "q1": [0, 1, 1, 0]}).to_csv(
        ws / "tiny.csv", index=False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env["PYTHONPATH"] = str(hostile.REPO)

    def report(out, *extra):
        return subprocess.run([sys.executable, "-m", "irtlib", "report", "tiny.csv", "-o", out, "--n-splits", "0",
                               *extra], cwd=ws, capture_output=True, text=True, env=env, timeout=300)
    loud = report("loud")
    assert loud.returncode == 0 and "Warning" in loud.stderr      # the input does make numpy warn
    quiet = report("quiet", "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


@pytest.mark.parametrize("command", ["agreement", "report"])
def test_n_test_1_is_a_usage_error(ws, cli, command):
    extra = ["-o", "out"] if command == "report" else []
    result = cli(command, "wide.csv", "--n-test", "1", *extra, cwd=ws)
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"irtlib {command}: error: argument --n-test: '1' is too few: Spearman's rho over the "
                           "test models is undefined for fewer than 2"), line
    assert not (ws / "out").exists()


def test_map_ability_refuses_overflowing_discriminations():
    from irtlib.errors import InputError

    with pytest.raises(InputError, match=r"^a contains 1e\+200 \(position 0\): item parameters beyond \+/-1e\+06"):
        map_ability(np.array([1.0, 0.0, 1.0]), np.array([1e200, 1.0, 1.0]), np.zeros(3))
    theta, se = map_ability(np.array([1.0, 0.0, 1.0]), np.array([1e5, 1.0, 1.0]), np.zeros(3))
    assert np.isfinite(theta) and 0 < se < 1                 # large but representable: still an estimate
