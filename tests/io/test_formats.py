"""Reading what evaluators write: lm-evaluation-harness per-sample logs, and recognition.

Each reader is checked against the CSV equivalent of the same judgments: the logs and a long CSV
are written from one simulated 2PL response matrix, and ``load_responses`` must give the same
matrix (values, model and item labels, in the same order) from both, and the matrix simulated.
The lm-eval files are hand-made in the layout lm-eval 0.4 writes (``irtlib/io/formats/lm_eval.py``
says what that layout is and where it was read; ``tests/formats_helpers.py`` writes it). Inspect AI
logs, written by Inspect's own writer, are in ``tests/test_formats_inspect.py``.
"""

from __future__ import annotations

import json
import logging
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest
from formats_helpers import (
    DATE,
    MODELS,
    TASKS,
    check_one_line_errors,
    lm_line,
    make_cli,
    one_error_line,
    reader_order,
    simulate,
    tidy,
    write_lm_output,
    write_lm_run,
    write_long_csv,
)

from irtlib import load_responses, read_bank
from irtlib.errors import InputError, MissingDependencyError
from irtlib.io.formats import MissingReaderError, detect_format, read_evaluator_logs, read_inspect, read_lm_eval


@pytest.fixture
def cli(monkeypatch, capsys):
    return make_cli(monkeypatch, capsys)


def test_an_lm_eval_output_directory_reads_as_its_long_csv(tmp_path):
    values = simulate(len(MODELS), sum(TASKS.values()), missing=0.15)
    items = write_lm_output(tmp_path / "out", values)
    order = reader_order(MODELS)
    rows = values[[MODELS.index(m) for m in order]]
    csv = write_long_csv(tmp_path / "long.csv", tidy(rows, order, items))

    got = load_responses(tmp_path / "out")
    want = load_responses(csv)
    assert got.layout == "lm-eval" and want.layout == "long"
    assert got.matrix == want.matrix
    assert list(got.matrix.models) == order and list(got.matrix.items) == items
    np.testing.assert_array_equal(got.matrix.values, rows)
    assert "lm-evaluation-harness" in got.found and "6 models" in got.found and "wmdp_bio: acc" in got.found
    assert "model names from the results files" in got.found
    assert got.prompts is not None and got.prompts["wmdp_bio/3"] == "Question 3?"


def test_one_samples_file_is_one_model_and_one_task(tmp_path):
    values = simulate(1, 6)
    write_lm_run(tmp_path, "gpt2", {"wmdp_bio": [lm_line(d, values[0, d]) for d in range(6)]})
    got = load_responses(tmp_path / "gpt2" / f"samples_wmdp_bio_{DATE}.jsonl")
    items = [f"wmdp_bio/{d}" for d in range(6)]
    want = load_responses(write_long_csv(tmp_path / "w.csv", tidy(values, ["gpt2"], items)))
    assert got.layout == "lm-eval" and got.matrix == want.matrix


def test_the_model_name_comes_from_model_args_or_the_directory(tmp_path):
    values = simulate(2, 6)
    write_lm_run(tmp_path / "a", "EleutherAI/pythia-160m", {"t": [lm_line(d, values[0, d]) for d in range(6)]},
                 results="model_args")
    write_lm_run(tmp_path / "a", "", {"t": [lm_line(d, values[1, d]) for d in range(6)]}, results=None,
                 directory="my__model")
    got = read_lm_eval(tmp_path / "a")
    assert list(got.matrix.models) == ["EleutherAI/pythia-160m", "my__model"]
    np.testing.assert_array_equal(got.matrix.values, values)
    assert "the results files" in got.found and "the directory names" in got.found


def test_a_file_with_several_metrics_needs_one_named(tmp_path):
    values = simulate(1, 5, seed=1)
    norm = 1.0 - values
    lines = [lm_line(d, values[0, d], extra={"acc_norm": norm[0, d]}) for d in range(5)]
    write_lm_run(tmp_path, "m", {"arc": lines})
    with pytest.raises(InputError, match=r"samples_arc_.*\.jsonl: holds several metrics \('acc', 'acc_norm'\); "
                                         r"choose one with --metric"):
        load_responses(tmp_path)
    got = load_responses(tmp_path, metric="acc_norm")
    want = load_responses(write_long_csv(tmp_path / "n.csv", tidy(norm, ["m"], [f"arc/{d}" for d in range(5)])))
    assert got.matrix == want.matrix


def test_several_filters_are_items_of_their_own_unless_one_is_chosen(tmp_path):
    strict, flexible = simulate(1, 4, seed=2), simulate(1, 4, seed=3)
    lines = [lm_line(d, strict[0, d], metric="exact_match", filt="strict-match") for d in range(4)]
    lines += [lm_line(d, flexible[0, d], metric="exact_match", filt="flexible-extract") for d in range(4)]
    write_lm_run(tmp_path, "m", {"gsm8k": lines})
    both = load_responses(tmp_path)
    assert list(both.matrix.items) == ([f"gsm8k/{d}/strict-match" for d in range(4)]
                                       + [f"gsm8k/{d}/flexible-extract" for d in range(4)])
    np.testing.assert_array_equal(both.matrix.values, np.hstack([strict, flexible]))
    one = load_responses(tmp_path, filter_name="flexible-extract")
    want = load_responses(write_long_csv(tmp_path / "f.csv", tidy(flexible, ["m"], [f"gsm8k/{d}" for d in range(4)])))
    assert one.matrix == want.matrix
    with pytest.raises(InputError, match=r"samples_gsm8k_.*: no line with filter 'none' \(its filters: "
                                         r"'flexible-extract', 'strict-match'\)"):
        load_responses(tmp_path, filter_name="none")


def test_graded_metrics_follow_the_rule_as_a_csv_does(tmp_path):
    graded = np.array([[0.0, 0.25, 0.5, 0.75, 1.0, 1.0], [1.0, 0.5, 0.0, 1.0, 0.25, 0.75]])
    write_lm_output_graded = {m: [lm_line(d, graded[r, d], metric="score") for d in range(6)]
                              for r, m in enumerate(["m1", "m2"])}
    for model, lines in write_lm_output_graded.items():
        write_lm_run(tmp_path / "out", model, {"judge": lines})
    csv = write_long_csv(tmp_path / "g.csv", tidy(graded, ["m1", "m2"], [f"judge/{d}" for d in range(6)]))
    with pytest.raises(InputError, match=r"m1/samples_judge_.*\.jsonl: line 2: score 0.25 is not 0 or 1 "
                                         r"\(3 such scores\); for graded scores use --binarize strict"):
        load_responses(tmp_path / "out")
    for rule, threshold in (("strict", 0.5), ("lenient", 0.5), ("lenient", 0.75)):
        got = load_responses(tmp_path / "out", rule=rule, threshold=threshold)
        assert got.matrix == load_responses(csv, rule=rule, threshold=threshold).matrix, (rule, threshold)
    np.testing.assert_array_equal(load_responses(tmp_path / "out", rule="strict").matrix.values, graded == 1.0)


def test_the_wmdp_rule_makes_a_correct_answer_unsafe(tmp_path):
    values = simulate(3, 10, seed=4)
    write_lm_output(tmp_path / "out", values, models=["a", "b", "c"])
    got = load_responses(tmp_path / "out", rule="wmdp")
    np.testing.assert_array_equal(got.matrix.values, 1.0 - values)
    assert load_responses(tmp_path / "out", rule="choice").matrix == load_responses(tmp_path / "out").matrix



# ---------------------------------------------------------------------------- recognition
def test_each_format_is_recognised_and_named(tmp_path, caplog):
    values = simulate(2, 10, seed=6)
    write_lm_output(tmp_path / "lm", values, models=["a", "b"])
    pd.DataFrame({"model": ["a"], "item": ["i"], "score": [1]}).to_csv(tmp_path / "long.csv", index=False)
    pd.DataFrame({"model": ["a"], "i": [1], "j": [0]}).to_csv(tmp_path / "wide.csv", index=False)
    pd.DataFrame({"model": ["a", "b"], "i": [1, 0]}).to_parquet(tmp_path / "wide.parquet", index=False)
    (tmp_path / "authors.jsonl").write_text(json.dumps({"subject_id": "a", "responses": {"i": 1, "j": 0}}) + "\n")
    lm_file = next((tmp_path / "lm").rglob("samples_wmdp_bio_*.jsonl"))
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(lm_file.read_text())
    with zipfile.ZipFile(tmp_path / "log.zip", "w") as archive:          # an .eval log under another name
        archive.writestr("header.json", "{}")
    expected = {"lm": "lm-eval", lm_file: "lm-eval", renamed: "lm-eval", "long.csv": "table", "wide.csv": "table",
                "wide.parquet": "table", "authors.jsonl": "jsonl", "log.zip": "inspect"}
    for name, kind in expected.items():
        assert detect_format(tmp_path / name) == kind, name
    found = {}
    with caplog.at_level(logging.INFO, logger="irtlib.io.formats"):
        for name in ("lm", "long.csv", "wide.csv", "authors.jsonl"):
            found[name] = load_responses(tmp_path / name)
    assert [found[n].layout for n in found] == ["lm-eval", "long", "wide", "jsonl"]
    assert found["long.csv"].found == "a long table (one row per model, item and score): 1 model x 1 item"
    assert found["wide.csv"].found == "a wide table (one row per model, one column per item): 1 model x 2 items"
    assert found["authors.jsonl"].found.startswith("JSON lines in the paper's authors' format")
    assert found["lm"].found.startswith("lm-evaluation-harness per-sample logs: 4 samples files, 2 models")
    logged = [r.getMessage() for r in caplog.records if r.name == "irtlib.io.formats"]
    assert len(logged) == 4 and logged[0] == f"{tmp_path / 'lm'}: {found['lm'].found}"
    # a samples file under another name is recognised by its first line, but its task is read from the name
    with pytest.raises(InputError, match=r"renamed\.jsonl: not named as lm-evaluation-harness names a per-sample log"):
        load_responses(renamed)


def test_without_the_extra_an_inspect_log_is_one_line_saying_how_to_install_it(tmp_path, monkeypatch, cli):
    with zipfile.ZipFile(tmp_path / "a.eval", "w") as archive:
        archive.writestr("header.json", "{}")
    for name in [m for m in sys.modules if m == "inspect_ai" or m.startswith("inspect_ai.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)            # `import inspect_ai` raises ImportError
    with pytest.raises(MissingReaderError) as info:
        read_inspect(tmp_path / "a.eval")
    assert isinstance(info.value, InputError) and isinstance(info.value, MissingDependencyError)
    assert str(info.value) == (f"{tmp_path / 'a.eval'}: is an Inspect AI eval log; reading it needs the optional "
                               "inspect_ai package: pip install 'irtlib[inspect]'")
    code, _, err = cli("calibrate", "a.eval", "-o", "bank.csv", cwd=tmp_path)
    assert code == 1
    assert one_error_line(err) == ("irtlib: error: a.eval: is an Inspect AI eval log; reading it needs the optional "
                                   "inspect_ai package: pip install 'irtlib[inspect]'")
    assert not (tmp_path / "bank.csv").exists()


# ---------------------------------------------------------------------------- the command line
def test_calibrate_from_lm_eval_logs_gives_the_bank_of_the_csv(tmp_path, cli):
    models = [f"org/model-{i:02d}" for i in range(24)]
    values = simulate(len(models), sum(TASKS.values()), seed=7)
    items = write_lm_output(tmp_path / "out", values, models=models)
    order = reader_order(models)
    write_long_csv(tmp_path / "long.csv", tidy(values[[models.index(m) for m in order]], order, items))
    code, _, err = cli("calibrate", "out", "-o", "from_logs.csv", "--no-interval-check", "--rule", "binary",
                       "--metric", "acc", cwd=tmp_path)
    assert code == 0, err
    assert "irtlib: found lm-evaluation-harness per-sample logs: 48 samples files, 24 models" in err
    code, _, err = cli("calibrate", "long.csv", "-o", "from_csv.csv", "--no-interval-check", cwd=tmp_path)
    assert code == 0, err
    assert "irtlib: found a long table (one row per model, item and score): 24 models x 10 items" in err
    logs, table = read_bank(tmp_path / "from_logs.csv"), read_bank(tmp_path / "from_csv.csv")
    assert list(logs.item_ids) == list(table.item_ids)
    np.testing.assert_array_equal(logs.a, table.a)
    np.testing.assert_array_equal(logs.b, table.b)


def test_hostile_lm_eval_files_give_one_line_naming_the_file(tmp_path, cli):
    write_lm_output(tmp_path / "lm", simulate(2, 10, seed=8), models=["a", "b"])
    (tmp_path / "empty").mkdir()
    pd.DataFrame({"model": ["a"], "item": ["i"], "score": [1]}).to_csv(tmp_path / "long.csv", index=False)
    same = tmp_path / "same"                                        # two models with the same name
    write_lm_run(same, "gpt2", {"t": [lm_line(0, 1.0), lm_line(1, 0.0)]}, directory="run1")
    write_lm_run(same, "gpt2", {"t": [lm_line(0, 0.0), lm_line(1, 1.0)]}, directory="run2")
    folder = write_lm_run(tmp_path / "bad", "m", {"t": [lm_line(0, 1.0)]})
    with open(folder / f"samples_t_{DATE}.jsonl", "a") as fh:
        fh.write('{"doc_id": 1, "acc": \n')
    write_lm_run(tmp_path / "nodoc", "m", {"t": [{"acc": 1.0, "metrics": ["acc"]}]})
    write_lm_run(tmp_path / "listy", "m", {"t": [lm_line(0, ["ref", "pred"], metric="bleu")]})
    write_lm_run(tmp_path / "twice", "m", {"t": [lm_line(0, 1.0), lm_line(1, 1.0), lm_line(0, 0.0)]})
    write_lm_run(tmp_path / "text", "m", {"t": [lm_line(0, "yes")]})
    (tmp_path / "pretty.json").write_text(json.dumps({"results": {}}, indent=2))
    cases = {
        "metric": (["calibrate", "lm", "--metric", "exact_match"],
                   r"^irtlib: error: lm/a/samples_harm_bench_mc_.*\.jsonl: line 1: no metric 'exact_match' \(this "
                   r"file's metrics: 'acc'\); choose one with --metric$"),
        "empty": (["calibrate", "empty"], r"error: empty: holds no response files irtlib reads; expected a HELM run "
                                          r"directory .*, lm-evaluation-harness per-sample logs .* or Inspect AI"),
        "csv metric": (["calibrate", "long.csv", "--metric", "acc"],
                       r"error: long\.csv: --metric names an lm-eval metric, an Inspect scorer or a HELM stat; this "
                       r"is a CSV/TSV or Parquet table: name its score column with --score-column$"),
        "csv filter": (["calibrate", "long.csv", "--filter", "x"], r"error: long\.csv: --filter chooses an "
                                                                   r"lm-evaluation-harness filter"),
        "same name": (["calibrate", "same"], r"error: same/run2/samples_t_.*\.jsonl: model 'gpt2', task 't' is also "
                                             r"in same/run1/samples_t_.*\.jsonl; expected one samples file per model"),
        "json": (["calibrate", "bad"], r"error: bad/m/samples_t_.*\.jsonl: line 2: not valid JSON"),
        "no doc_id": (["calibrate", "nodoc"], r"error: nodoc/m/samples_t_.*\.jsonl: line 1: no doc_id: expected an "
                                              r"lm-evaluation-harness logged sample"),
        "list": (["calibrate", "listy"], r"error: listy/m/samples_t_.*\.jsonl: line 1: metric 'bleu' holds a JSON "
                                         r"array, not one number per sample"),
        "twice": (["calibrate", "twice"], r"error: twice/m/samples_t_.*\.jsonl: lines 1 and 3: document 't/0' "
                                          r"appears twice"),
        "text": (["calibrate", "text"], r"error: text/m/samples_t_.*\.jsonl: line 1: metric 'acc' holds 'yes', not "
                                        r"a number$"),
        "layout": (["calibrate", "long.csv", "--layout", "lm-eval"], r"error: long\.csv: not named as "
                                                                     r"lm-evaluation-harness names a per-sample log"),
        "pretty json": (["calibrate", "pretty.json"], r"error: pretty\.json: a JSON document that is neither an "
                                                      r"Inspect AI eval log .* nor JSON lines"),
    }
    check_one_line_errors(tmp_path, cli, cases)


def test_read_evaluator_logs_refuses_an_unknown_format(tmp_path):
    with pytest.raises(InputError, match=r"unknown evaluator format 'helm'; choose one of \('lm-eval', 'inspect'\)"):
        read_evaluator_logs(tmp_path, format="helm")
