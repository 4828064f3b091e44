"""End-to-end tests of the ``irtlib`` command line, through subprocesses.

Data: the simulated HarmBench of the bundled release (77 models x 400 items, graded two-judge
scores, binarized with ``--binarize strict``); 12 models are held out of the calibration and
evaluated adaptively by replaying their responses.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

N_HELD_OUT = 12


def irtlib(*args, cwd=None, stdin=None, check=None):
    """Run ``python -m irtlib.cli ARGS``; returns the CompletedProcess."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "irtlib.cli", *map(str, args)], cwd=cwd, input=stdin,
                          capture_output=True, text=True, env=env, timeout=300)
    if check is not None:
        assert proc.returncode == check, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


class Result:
    """What an in-process run of :func:`irtlib.cli.main` printed and returned."""

    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run(*args, cwd, stdin="", monkeypatch, capsys):
    """``irtlib ARGS`` in this process (fast; the subprocess tests cover the real entry point)."""
    import io

    from irtlib.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:             # argparse: --help (0) and usage errors (2)
        code = exc.code
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


@pytest.fixture
def cli(monkeypatch, capsys):
    def call(*args, cwd, stdin=""):
        return run(*args, cwd=cwd, stdin=stdin, monkeypatch=monkeypatch, capsys=capsys)
    return call


def one_line_error(proc, code=1):
    """The process failed with ``code`` and one ``irtlib: error:`` line, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    from irtlib import datasets

    root = tmp_path_factory.mktemp("cli")
    raw = datasets.load_raw("harmbench", source="simulated")[["model", "item", "score"]]
    models = sorted(raw["model"].unique())
    held_out = list(np.random.default_rng(7).choice(models, N_HELD_OUT, replace=False))
    raw[~raw["model"].isin(held_out)].to_csv(root / "train.csv", index=False)
    test = raw[raw["model"].isin(held_out)]
    test.to_csv(root / "heldout.csv", index=False)
    strict = (test["score"] == 1).astype(float)
    truth = strict.groupby(test["model"]).mean()      # full-benchmark safety score, all 400 items
    proc = irtlib("calibrate", "train.csv", "--binarize", "strict", "-o", "bank.csv", "--json", cwd=root, check=0)
    return {"root": root, "held_out": held_out, "truth": truth, "calibrate": json.loads(proc.stdout),
            "calibrate_stderr": proc.stderr}


# ---------------------------------------------------------------------------- help and usage
@pytest.mark.parametrize("command", ["calibrate", "subset", "evaluate", "agreement", "report"])
def test_every_command_has_help(command, cli, tmp_path):
    proc = cli(command, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: irtlib {command}")


def test_usage_errors_exit_2(work, cli):
    stderr = irtlib(check=2).stderr                                      # through a real process
    assert stderr.startswith("irtlib: error: the following arguments are required: COMMAND")
    assert stderr.count("\n") == 1                                      # one line, no usage block
    proc = cli("evaluate", "bank.csv", "--max-items", "0", cwd=work["root"])
    assert proc.returncode == 2 and "argument --max-items: '0' must be at least 1" in proc.stderr
    proc = cli("calibrate", "train.csv", "--engine", "nope", cwd=work["root"])
    assert proc.returncode == 2 and "invalid choice: 'nope'" in proc.stderr


def test_console_script_entry_point():
    script = Path(sys.executable).with_name("irtlib")
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("irtlib ")


# ---------------------------------------------------------------------------- calibrate
def test_calibrate_writes_a_bank_with_provenance(work):
    doc = work["calibrate"]
    assert doc["n_models"] == 77 - N_HELD_OUT and doc["n_items"] == 400
    assert doc["bank_items"] + doc["filtered"]["n_items"] == 400
    assert doc["diagnostics"]["spearman_theta_score"] > 0.9
    assert "fitting the 2PL model" in work["calibrate_stderr"]            # progress on stderr
    from irtlib.bank.build import read_bank
    from irtlib.io.checksums import file_sha256

    bank = read_bank(work["root"] / "bank.csv")
    assert bank.checksum == doc["bank_sha256"]
    assert bank.meta["data"]["sha256"] == file_sha256(work["root"] / "train.csv")
    assert bank.meta["settings"]["binarize"]["rule"] == "strict"
    assert bank.meta["interval_check"]["k"][0] == 1


def test_calibrate_wide_file_and_quiet(work, tmp_path, cli):
    from irtlib import datasets

    wide = datasets.load("simplesafetytests", source="simulated").to_frame()
    wide.index.name = "model"
    wide.to_csv(tmp_path / "wide.csv")
    proc = cli("calibrate", "wide.csv", "-o", "sst.csv", "--quiet", "--no-interval-check", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.startswith("wrote sst.csv:")


def test_calibrate_standard_scale_and_no_bar_in_a_pipe(tmp_path, cli):
    from irtlib import datasets
    from irtlib.bank.build import read_bank

    wide = datasets.load("simplesafetytests", source="simulated").to_frame()
    wide.index.name = "model"
    wide.to_csv(tmp_path / "wide.csv")
    proc = cli("calibrate", "wide.csv", "-o", "sst.csv", "--scale", "standard", "--no-interval-check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "iteration" not in proc.stderr          # stage lines only, no bar
    bank = read_bank(tmp_path / "sst.csv")
    assert bank.meta["scale"]["kind"] == "standard"
    assert np.std(bank.meta["models"]["theta"]) == pytest.approx(1.0)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_calibrate_bars_show_on_a_terminal_unless_quiet(monkeypatch, tmp_path, quiet):
    from irtlib.cli import _common, calibrate
    from irtlib.io import load_responses

    rows = [f"m{m},i{j},{(m + j) % 2}" for m in range(30) for j in range(40)]
    table = tmp_path / "long.csv"
    table.write_text("model,item,score\n" + "\n".join(rows) + "\n")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    out = _common.Out(argparse.Namespace(quiet=quiet, json=False))
    with calibrate._calibrate_bars(out) as (say, on_read, on_iteration, on_se, on_fold, on_refit):
        say("reading")
        assert load_responses(table, progress=on_read).matrix.shape == (30, 40)
        say("fitting")
        if not quiet:
            for it in range(1, 4):
                on_iteration(it, 10.0 ** -it)
            say("standard errors")
            for done in range(1, 5):
                on_se(done, 4)
            say("checking")
            on_refit(7, 2e-3)                   # a refit's iteration before any refit has finished
            for done in range(1, 6):
                on_fold(done, 5)
    text = terminal.getvalue()
    if quiet:
        assert text == "" and on_read is None and on_iteration is None and on_se is None and on_fold is None
        assert on_refit is None
    else:
        size = table.stat().st_size
        assert "irtlib: reading: 100%" in text and f"{size / 1000:.1f}k" in text
        assert "irtlib: fitting: iteration 3, largest step 1.0e-03" in text
        assert "irtlib: standard errors: 100%" in text and "4/4" in text
        assert text.index("iteration 3") < text.index("irtlib: standard errors\n")   # the fit's bar closed first
        assert text.index("4/4") < text.index("irtlib: checking")                # the errors' bar closed first
        assert "interval check" in text and "5/5" in text and "refit iteration 7, largest step 2.0e-03" in text
        assert text.index("reading: 100%") < text.index("irtlib: fitting\n")      # the reading bar closed first


def test_calibrate_helm_directory(tmp_path, cli):
    helm = Path(__file__).parents[1] / "fixtures" / "helm" / "benchmark_output"
    proc = cli("calibrate", helm, "-o", "helm.csv", "--no-interval-check", "--variance-threshold", "0", cwd=tmp_path)
    assert "choose one with --benchmark" in one_line_error(proc)
    proc = cli("calibrate", helm, "--benchmark", "harmbench", "-o", "helm.csv", "--no-interval-check",
               "--variance-threshold", "0", "--json", "-q", cwd=tmp_path)
    if proc.returncode == 1 and "no item has variance" in proc.stderr:
        pytest.skip("the HELM fixture has no item on which its models disagree")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n_models"] >= 2


# ---------------------------------------------------------------------------- evaluate
def _evaluate(work, model, *extra):
    proc = irtlib("evaluate", "bank.csv", "--responses", "heldout.csv", "--binarize", "strict",
                  "--model", model, "--json", "--quiet", *extra, cwd=work["root"], check=0)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("rule", [("--max-items", "50"), ("--target-se", "0.3")])
def test_replayed_evaluations_cover_the_true_score(work, rule):
    """Held-out models: the predicted full-benchmark score's 95% interval covers the truth.

    Observed when written: 12 of 12 held-out models covered with a 50-item budget; 11 of 12
    when stopping at SE <= 0.3 (2 to 190 items, median 3, of 397 in the bank).
    """
    proc = irtlib("evaluate", "bank.csv", "--responses", "heldout.csv", "--binarize", "strict", "--all-models",
                  "--json", "--quiet", *rule, cwd=work["root"], check=0)
    results = json.loads(proc.stdout)["results"]
    assert sorted(r["model"] for r in results) == sorted(work["held_out"])
    inside = []
    for r in results:
        assert r["stop_reason"] == ("max_items" if rule[0] == "--max-items" else "target_se")
        lo, hi = r["predicted_score_ci95"]
        inside.append(lo <= work["truth"][r["model"]] <= hi)
        assert abs(r["predicted_score"] - work["truth"][r["model"]]) < 0.2
    coverage = float(np.mean(inside))
    items = [r["n_items"] for r in results]
    print(f"\n{' '.join(rule)}: coverage of the 95% interval over {len(inside)} held-out models "
          f"{coverage:.2f}; items used {min(items)}-{max(items)} of {results[0]['bank_items']}")
    assert coverage >= 0.8


def test_target_se_stops_early(work, cli):
    proc = cli("evaluate", "bank.csv", "--responses", "heldout.csv", "--binarize", "strict", "--model",
               work["held_out"][0], "--target-se", "0.3", "--json", "-q", cwd=work["root"])
    doc = json.loads(proc.stdout)
    assert doc["stop_reason"] == "target_se" and doc["se"] <= 0.3
    assert doc["n_items"] < doc["bank_items"] / 10
    text = cli("evaluate", "bank.csv", "--responses", "heldout.csv", "--binarize", "strict", "--model",
               work["held_out"][0], "--target-se", "0.3", "-q", cwd=work["root"]).stdout
    assert "target SE reached" in text and "predicted safety score on the full benchmark (400 items)" in text


def test_evaluate_is_resumable(work, tmp_path, cli):
    """An evaluation stopped after 30 items continues from item 31 in a new process."""
    model = work["held_out"][1]
    state = tmp_path / "state.json"
    first = _evaluate(work, model, "--max-items", "30", "--state", state)
    assert first["n_items"] == 30 and len(json.loads(state.read_text())["events"]) == 30
    resumed = _evaluate(work, model, "--max-items", "45", "--state", state)
    straight = json.loads(cli("evaluate", "bank.csv", "--responses", "heldout.csv", "--binarize", "strict",
                              "--model", model, "--json", "--quiet", "--max-items", "45", cwd=work["root"]).stdout)
    assert resumed["n_items"] == 45
    assert [e["item"] for e in resumed["administered"]] == [e["item"] for e in straight["administered"]]
    assert resumed["theta"] == pytest.approx(straight["theta"], abs=1e-9)


def test_interactive_evaluation_over_a_pipe(work):
    from irtlib.bank.build import read_bank

    bank = read_bank(work["root"] / "bank.csv")
    proc = irtlib("evaluate", "bank.csv", "--stdin", "--max-items", "3", "--json", cwd=work["root"],
                  stdin="1\n0\ns\n1\n", check=0)
    doc = json.loads(proc.stdout)
    assert [e["response"] for e in doc["administered"]] == [1, 0, 1] and len(doc["unavailable"]) == 1
    assert doc["done"] and doc["complete"]
    assert doc["administered"][0]["item"] in bank.item_ids
    # a pipe cannot be asked again: an invalid answer is an error naming the line (tests/test_hostile_input.py)
    proc = irtlib("evaluate", "bank.csv", "--stdin", "--max-items", "3", cwd=work["root"], stdin="1\nmaybe\n0\n")
    assert "stdin line 2: 'maybe' is not a response" in one_line_error(proc)
    # end of input before the budget: the partial result, marked as incomplete, and exit status 1
    proc = irtlib("evaluate", "bank.csv", "--stdin", "--max-items", "5", "--json", cwd=work["root"],
                  stdin="1\n", check=1)
    doc = json.loads(proc.stdout)
    assert doc["n_items"] == 1 and not doc["done"] and doc["interrupted"] == "end of input"
    assert doc["complete"] is False and "before the stopping rule" in proc.stderr


def test_evaluate_without_responses_or_terminal_is_a_usage_error(work, cli):
    proc = cli("evaluate", "bank.csv", cwd=work["root"], stdin="")
    assert "stdin is not a terminal" in one_line_error(proc, code=2)
    proc = cli("evaluate", "bank.csv", "--all-models", "--stdin", cwd=work["root"])
    assert "--all-models needs --responses" in one_line_error(proc, code=2)


# ---------------------------------------------------------------------------- subsets
@pytest.mark.parametrize("method", ["total-fisher", "marginal-fisher", "marginal-fisher-bq", "anchor-points",
                                    "disco", "random"])
def test_subset_methods(work, method, tmp_path, cli):
    out = tmp_path / f"{method}.csv"
    args = ["subset", "bank.csv", "--method", method, "-k", "20", "-o", out, "--json", "--quiet"]
    if method == "anchor-points":
        args += ["--responses", "train.csv", "--binarize", "strict"]
    proc = (irtlib(*args, cwd=work["root"]) if method == "total-fisher"    # one through a real process
            else cli(*args, cwd=work["root"]))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    from irtlib.bank.build import read_bank, read_subset

    frame, meta = read_subset(out)
    assert len(frame) == 20 and frame.index.is_unique and meta["method"] == method
    assert frame.index.isin(read_bank(work["root"] / "bank.csv").item_ids).all()
    assert [row["item"] for row in doc["items"]] == list(frame.index)
    if method == "anchor-points":
        assert frame["weight"].sum() == pytest.approx(doc_bank_items(work))
    # the very items irtlib.selection.static chooses from the bank's parameters and calibration abilities
    assert list(frame.index) == _subsets_choice(work, method, 20, seed=0)


def _subsets_choice(work, method, k, *, seed):
    """Item ids that the public :mod:`irtlib.selection.static` functions choose, called directly."""
    from irtlib.bank.build import read_bank
    from irtlib.io import read_responses
    from irtlib.selection import static as subsets

    bank = read_bank(work["root"] / "bank.csv")
    a, b, theta = bank.a, bank.b, bank.calibration_theta.to_numpy()
    if method == "total-fisher":
        chosen = subsets.total_fisher(a, b, theta, k)
    elif method == "marginal-fisher":
        chosen = subsets.marginal_fisher(a, b, theta, k)
    elif method == "marginal-fisher-bq":
        chosen = subsets.marginal_fisher_bq(a, b, theta, k)
    elif method == "disco":
        chosen = subsets.disco(bank.items["safe_rate"].to_numpy()[None, :], k)
    elif method == "anchor-points":
        train = read_responses(work["root"] / "train.csv", rule="strict").subset(items=bank.item_ids)
        chosen = subsets.anchor_points(train.subset(models=list(bank.calibration_theta.index)).values, k, seed=seed)
    else:
        return list(bank.item_ids[np.random.default_rng(seed).choice(len(bank), size=k, replace=False)])
    return list(bank.item_ids[chosen.items])


def doc_bank_items(work):
    return work["calibrate"]["bank_items"]


def test_anchor_points_needs_responses(work, tmp_path, cli):
    proc = cli("subset", "bank.csv", "--method", "anchor-points", "-k", "5", "-o", tmp_path / "x.csv",
               cwd=work["root"])
    assert "needs the training responses" in one_line_error(proc, code=2)
    assert not (tmp_path / "x.csv").exists()


# ---------------------------------------------------------------------------- bad input
def test_missing_columns(work, tmp_path):
    pd.DataFrame({"model": ["m"], "item": ["q"], "judgement": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    line = one_line_error(irtlib("calibrate", "bad.csv", "-o", "bank.csv", cwd=tmp_path))
    assert line.startswith("irtlib: error: bad.csv: missing column(s) ['score']")
    assert not (tmp_path / "bank.csv").exists()


def test_bad_score_names_the_row(work, tmp_path, cli):
    (tmp_path / "bad.csv").write_text("model,item,score\nm1,q1,1\nm1,q2,0\nm2,q1,2\n")
    line = one_line_error(cli("calibrate", "bad.csv", "-o", "bank.csv", cwd=tmp_path))
    assert line == ("irtlib: error: bad.csv: row 3: score 2 is not 0 or 1 (1 such values; use --binarize "
                    "strict or lenient for graded scores)")


def test_bank_from_another_benchmark(work, tmp_path, cli):
    from irtlib import datasets

    other = datasets.load("simplesafetytests", source="simulated").to_long().query("model == 'sim_helm_01'")
    other.to_csv(tmp_path / "other.csv", index=False)
    proc = cli("evaluate", work["root"] / "bank.csv", "--responses", "other.csv", cwd=tmp_path)
    assert "responses from another benchmark?" in one_line_error(proc)


def test_outputs_are_never_overwritten_without_force(work, tmp_path, cli):
    target = tmp_path / "bank.csv"
    target.write_text("precious\n")
    line = one_line_error(cli("calibrate", work["root"] / "train.csv", "--binarize", "strict", "-o", target,
                              cwd=tmp_path))
    assert "already exists; pass --force" in line and target.read_text() == "precious\n"
    sub = tmp_path / "items.csv"
    sub.write_text("keep\n")
    proc = cli("subset", work["root"] / "bank.csv", "--method", "random", "-k", "5", "-o", sub, cwd=tmp_path)
    assert "already exists" in one_line_error(proc) and sub.read_text() == "keep\n"
    proc = cli("subset", work["root"] / "bank.csv", "--method", "random", "-k", "5", "-o", sub, "--force",
               cwd=tmp_path)                    # --force replaces only irtlib's own output
    assert "not written by irtlib" in one_line_error(proc) and sub.read_text() == "keep\n"
    sub.unlink()
    for force in ((), ("--force",)):
        assert cli("subset", work["root"] / "bank.csv", "--method", "random", "-k", "5", "-o", sub, *force,
                   cwd=tmp_path).returncode == 0
    assert sub.read_text().startswith("# irtlib-subset ")
    report = tmp_path / "report"
    report.mkdir()
    proc = cli("report", work["root"] / "train.csv", "-o", report, cwd=tmp_path)
    assert "already exists; pass --force" in one_line_error(proc) and not any(report.iterdir())


def test_missing_and_tampered_bank(work, tmp_path, cli):
    assert "nope.csv: no such item bank file" in one_line_error(cli("evaluate", "nope.csv", "--stdin",
                                                                    cwd=tmp_path))
    text = (work["root"] / "bank.csv").read_text()
    header, body = text.split("\n", 1)
    lines = body.split("\n")
    lines[5] = lines[5].replace(",", ",1", 1)
    (tmp_path / "tampered.csv").write_text(header + "\n" + "\n".join(lines))
    line = one_line_error(cli("subset", "tampered.csv", "--method", "random", "-k", "3", "-o", "s.csv",
                              cwd=tmp_path))
    assert "tampered.csv: the item table does not match the checksum" in line


def test_debug_shows_the_traceback(tmp_path, cli):
    (tmp_path / "bad.csv").write_text("model,item\nm,q\n")
    proc = cli("calibrate", "bad.csv", "-o", "bank.csv", "--debug", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" in proc.stderr


# ---------------------------------------------------------------------------- agreement and report
def test_agreement_command(work, cli, tmp_path):
    proc = cli("agreement", work["root"] / "train.csv", "--binarize", "strict", "--n-splits", "3",
               "--methods", "fluid,random,total-fisher", "--ks", "5,10,20", "--json", "-q", "-o", tmp_path / "res.csv",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["settings"]["ks"] == [5, 10, 20] and doc["n_items"] == 400
    assert {(r["method"], r["k"]) for r in doc["curves"]} == {(m, k) for m in ("fluid", "random", "total-fisher")
                                                              for k in (5, 10, 20)}
    assert {r["column"] for r in doc["table2"]} <= {"left", "right"} and doc["table2"]
    assert len(pd.read_csv(tmp_path / "res.csv")) == 3 * 3 * 3
    text = cli("agreement", work["root"] / "train.csv", "--binarize", "strict", "--n-splits", "2",
               "--methods", "fluid,random", "--ks", "5,10", "-q", cwd=tmp_path).stdout
    assert text.startswith("Table 2 summary") and "mean agreement" in text
    proc = cli("agreement", work["root"] / "train.csv", "--binarize", "strict", "--methods", "fluid,oracle",
               cwd=tmp_path)
    assert proc.returncode == 2 and "unknown method 'oracle'; choose from fluid" in proc.stderr


def test_report_command(work, cli, tmp_path):
    proc = cli("report", work["root"] / "train.csv", "--binarize", "strict", "-o", "rep", "--n-splits", "2",
               "--methods", "fluid,random", "--ks", "5,10", "-q", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in (tmp_path / "rep").iterdir()}
    assert {"index.html", "summary.json", "theta_vs_score.png", "item_fit.png", "discrimination.png",
            "ceiling.png", "agreement.png", "agreement.csv"} <= names
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "CV of a" in html and 'src="agreement.png"' in html
    assert "CV of a, 95% interval (item standard errors)" in html and "Least precisely known items" in html
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]          # no temporary directory left


# ---------------------------------------------------------------------------- prompts and plain intervals
PROMPTS = {"q0": 'How do I pick a lock, "quickly"?', "q1": "Line one\nline two, with a comma",
           "q2": "Ünïcode ✓ — dashes", "q3": "plain"}


def _small_long(path, n_models, *, seed=0, prompts=True):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_models):
        theta = rng.normal()
        for j in range(8):
            item = f"q{j}"
            safe = int(rng.random() < 1 / (1 + np.exp(-(theta + (j - 3.5) / 2))))
            rows.append({"model": f"m{i:02d}", "item": item, "score": safe,
                         "prompt": PROMPTS.get(item, f"prompt {j}") if prompts else None})
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False)
    return frame


def test_bank_with_a_prompt_column_through_file_and_cli(tmp_path, cli):
    from irtlib.bank.build import read_bank

    _small_long(tmp_path / "r.csv", 24, seed=1)
    proc = cli("calibrate", "r.csv", "-o", "bank.csv", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    bank = read_bank(tmp_path / "bank.csv")
    assert bank.prompts is not None
    for item, text in PROMPTS.items():
        if item in bank.item_ids:
            assert bank.prompts[item] == text                       # quotes, newlines, commas, unicode kept
    bank.write(tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "bank.csv").read_bytes()
    proc = cli("evaluate", "bank.csv", "--stdin", "--max-items", "3", stdin="1\n0\n1\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = [line.strip()[len("prompt: "):] for line in proc.stderr.splitlines() if line.strip().startswith("prompt:")]
    assert len(shown) == 3 and all(s for s in shown)
    asked = [line.split("item ", 1)[1] for line in proc.stderr.splitlines() if "] item " in line]
    assert [bank.prompts[i].split("\n")[0] for i in asked] == [s.split("\n")[0] for s in shown]


def test_intervals_when_the_interval_check_cannot_run(tmp_path, cli):
    """Fewer than 10 calibration models: the check is skipped with a warning, the bank says so, and
    evaluate states the plain 2PL interval with a warning."""
    from irtlib.bank.build import read_bank, score_interval

    frame = _small_long(tmp_path / "r.csv", 8, seed=3, prompts=False)
    proc = cli("calibrate", "r.csv", "-o", "bank.csv", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "irtlib: warning: r.csv: interval check skipped: only 8 models" in proc.stderr
    bank = read_bank(tmp_path / "bank.csv")
    assert bank.meta["interval_check"]["skipped"].startswith("skipped: only 8 models")
    assert bank.interval_inflation(5) == 1.0
    frame[frame["model"] == "m00"].to_csv(tmp_path / "m00.csv", index=False)
    proc = cli("evaluate", "bank.csv", "--responses", "m00.csv", "--max-items", "4", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "the score interval is the plain 2PL one" in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["interval_note"] and doc["interval_inflation"] == 1.0
    answered = [a["item"] for a in doc["administered"]]
    known = np.isin(bank.item_ids, answered)
    score, lo, hi = score_interval(bank.a, bank.b, doc["theta"], doc["se"], known_mask=known,
                                   known_sum=sum(a["response"] for a in doc["administered"]),
                                   filtered_sum=bank.filtered["safe_rate_sum"], n_full=bank.n_items_full)
    assert doc["predicted_score"] == pytest.approx(float(score))
    assert doc["predicted_score_ci95"] == pytest.approx([float(lo), float(hi)])
