"""Reading Inspect AI eval logs, written by Inspect's own writer from its own types.

The logs are ``EvalLog`` objects built directly from Inspect's types (``EvalSpec``, ``EvalSample``,
``Score``; no model is run: its mock model wants the network here for a token count) and written
with ``inspect_ai.log.write_eval_log``, both as ``.eval`` and as ``.json``; irtlib reads them with
``inspect_ai.log.read_eval_log``. Each is checked against the CSV equivalent of the same judgments.
Without the optional extra these tests are skipped (its absence is tested in test_formats.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from formats_helpers import (
    check_one_line_errors,
    inspect_log_of,
    letters,
    make_cli,
    simulate,
    tidy,
    write_lm_output,
    write_long_csv,
)

from irtlib import load_responses
from irtlib.errors import InputError
from irtlib.io.formats import FormatWarning, detect_format

inspect_log = pytest.importorskip("inspect_ai.log", reason="the optional extra irtlib[inspect] is not installed")


@pytest.fixture
def cli(monkeypatch, capsys):
    return make_cli(monkeypatch, capsys)


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_logs_read_as_their_long_csv(tmp_path, suffix):
    models = ["openai/gpt-4o", "anthropic/claude-x", "hf/local:model"]
    values = simulate(3, 8, seed=5, missing=0.1)
    for r, model in enumerate(models):
        log = inspect_log_of(model, "harmbench", letters(values[r]))
        inspect_log.write_eval_log(log, tmp_path / "logs" / f"2025-01-0{r + 1}_harmbench_{r}{suffix}")
    got = load_responses(tmp_path / "logs")
    items = [f"harmbench/s{j}" for j in range(8)]
    want = load_responses(write_long_csv(tmp_path / "l.csv", tidy(values, models, items)))
    assert got.layout == "inspect" and got.matrix == want.matrix
    assert "Inspect AI eval logs: 3 logs" in got.found and "harmbench: scorer match" in got.found
    assert got.prompts["harmbench/s0"] == "prompt s0"
    single = load_responses(next((tmp_path / "logs").glob(f"2025-01-01*{suffix}")))
    assert single.matrix == want.matrix.subset(models=[models[0]], items=list(single.matrix.items))


def test_inspect_epochs_are_averaged_then_binarized(tmp_path):
    scores = {1: ["C", "C", "C"], 2: ["I", "I", "I"], 3: ["C", "I", "C"], 4: ["C", "I", "I"]}
    inspect_log.write_eval_log(inspect_log_of("m", "t", scores, epochs=3), tmp_path / "e.eval")
    with pytest.raises(InputError, match=r"e\.eval: sample '3': score 0.666667 is not 0 or 1 \(2 such scores\).* "
                                         r"\(the mean over epochs that disagree\)"):
        load_responses(tmp_path / "e.eval")
    share = np.array([[1.0, 0.0, 2 / 3, 1 / 3]])
    for rule, threshold in (("strict", 0.5), ("lenient", 0.5), ("lenient", 0.3)):
        got = load_responses(tmp_path / "e.eval", rule=rule, threshold=threshold)
        want = (share == 1.0) if rule == "strict" else (share >= threshold)
        np.testing.assert_array_equal(got.matrix.values, want.astype(float))
    assert "up to 3 epochs per sample averaged" in got.found


def test_inspect_score_values_map_as_inspect_maps_them(tmp_path):
    scores = {"a": "C", "b": "I", "c": "P", "d": "N", "e": True, "f": 0, "g": "yes", "h": "0.5", "i": 1.0}
    inspect_log.write_eval_log(inspect_log_of("m", "t", scores), tmp_path / "v.json")
    got = load_responses(tmp_path / "v.json", rule="lenient", threshold=0.5)
    np.testing.assert_array_equal(got.matrix.values, [[1, 0, 1, 0, 1, 0, 1, 1, 1]])
    strict = load_responses(tmp_path / "v.json", rule="strict")
    np.testing.assert_array_equal(strict.matrix.values, [[1, 0, 0, 0, 1, 0, 1, 0, 1]])
    inspect_log.write_eval_log(inspect_log_of("m", "t", {"a": "C", "b": {"x": 1}}), tmp_path / "d.json")
    with pytest.raises(InputError, match=r"d\.json: sample 'b' \(epoch 1\): score is a dict with keys 'x', not one "
                                         "value per sample"):
        load_responses(tmp_path / "d.json")


def test_errored_samples_are_unobserved_and_counted(tmp_path):
    inspect_log.write_eval_log(inspect_log_of("m", "t", {1: "C", 2: "I", 3: "C"}, errored=(2,), status="error"),
                               tmp_path / "x.eval")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = load_responses(tmp_path / "x.eval")
    said = [str(w.message) for w in seen if issubclass(w.category, FormatWarning)]
    assert any("status is 'error'" in s for s in said)
    assert any("1 of 3 samples have no 'match' score" in s for s in said)
    assert list(got.matrix.items) == ["t/1", "t/3"] and "1 unscored samples left unobserved" in got.found


def test_several_scorers_need_one_named(tmp_path):
    from inspect_ai.scorer import Score

    log = inspect_log_of("m", "t", {1: "C", 2: "I"})
    for sample, refusal in zip(log.samples, ("I", "C"), strict=True):
        sample.scores["refusal"] = Score(value=refusal)
    inspect_log.write_eval_log(log, tmp_path / "two.eval")
    with pytest.raises(InputError, match=r"two\.eval: holds several scorers \('match', 'refusal'\); choose one with "
                                         "--metric"):
        load_responses(tmp_path / "two.eval")
    np.testing.assert_array_equal(load_responses(tmp_path / "two.eval", metric="refusal").matrix.values, [[0, 1]])
    with pytest.raises(InputError, match=r"two\.eval: no scorer 'nope' \(its scorers: 'match', 'refusal'\)"):
        load_responses(tmp_path / "two.eval", metric="nope")




def test_inspect_files_and_directories_are_recognised(tmp_path):
    inspect_log.write_eval_log(inspect_log_of("m", "t", {1: "C"}), tmp_path / "ins" / "x.eval")
    inspect_log.write_eval_log(inspect_log_of("m", "t", {1: "C"}), tmp_path / "ins2" / "sub" / "x.json")
    (tmp_path / "ins2" / "notes.json").write_text('{"unrelated": true}')      # not a log: ignored in a directory
    for name in ("ins", "ins/x.eval", "ins2", "ins2/sub/x.json"):
        assert detect_format(tmp_path / name) == "inspect", name
    got = load_responses(tmp_path / "ins2")
    assert got.layout == "inspect" and list(got.matrix.models) == ["m"] and list(got.matrix.items) == ["t/1"]


def test_hostile_inspect_files_give_one_line_naming_the_file(tmp_path, cli):
    mixed = tmp_path / "mixed"
    write_lm_output(mixed, simulate(2, 10, seed=8), models=["a", "b"])
    inspect_log.write_eval_log(inspect_log_of("m", "t", {1: "C"}), mixed / "inspect" / "x.eval")
    (tmp_path / "corrupt.eval").write_bytes(b"PK\x03\x04 not really a zip")
    inspect_log.write_eval_log(inspect_log_of("m", "t", {1: "C", 2: "I"}), tmp_path / "ok.eval")
    for k in (1, 2):
        inspect_log.write_eval_log(inspect_log_of("same/model", "t", {1: "C", 2: "I"}), tmp_path / "dup" / f"{k}.json")
    empty = inspect_log_of("m", "t", {})
    inspect_log.write_eval_log(empty, tmp_path / "nosamples.eval")
    unscored = inspect_log_of("m", "t", {1: "C"})
    unscored.samples[0].scores = None
    inspect_log.write_eval_log(unscored, tmp_path / "unscored.json")
    cases = {
        "mixed": (["calibrate", "mixed"], r"^irtlib: error: mixed: mixes lm-evaluation-harness per-sample logs "
                                          r"\(samples_<task>_<date>\.jsonl\) \(mixed/a/samples_.*\.jsonl\) and Inspect "
                                          r"AI eval logs \(\.eval, \.json\) \(mixed/inspect/x\.eval\); expected the "
                                          r"output of one evaluator"),
        "corrupt": (["calibrate", "corrupt.eval"], r"error: corrupt\.eval: cannot read it as an Inspect AI eval log "
                                                   r"\(.*\); expected a \.eval or \.json log written by Inspect$"),
        "filter": (["calibrate", "ok.eval", "--filter", "x"], r"error: ok\.eval: --filter chooses an "
                                                              r"lm-evaluation-harness filter; Inspect logs have none$"),
        "same name": (["calibrate", "dup"], r"error: dup/2\.json: model 'same/model', task 't' is also in dup/1\.json; "
                                            r"expected one log per model and task"),
        "no samples": (["calibrate", "nosamples.eval"], r"error: nosamples\.eval: holds no samples"),
        "no scorer": (["calibrate", "unscored.json"], r"error: unscored\.json: no sample has a score"),
        "wrong scorer": (["calibrate", "ok.eval", "--metric", "acc"], r"error: ok\.eval: no scorer 'acc' \(its "
                                                                      r"scorers: 'match'\); name one with --metric$"),
    }
    check_one_line_errors(tmp_path, cli, cases)


def test_calibrate_says_it_found_inspect_logs(tmp_path, cli):
    values = simulate(3, 8, seed=9)
    for r, model in enumerate(["a/x", "b/y", "c/z"]):
        log = inspect_log_of(model, "refusals", letters(values[r]))
        inspect_log.write_eval_log(log, tmp_path / "logs" / f"{r}.eval")
    code, _, err = cli("calibrate", "logs", "-o", "bank.csv", "--no-interval-check", cwd=tmp_path)
    assert code == 0, err
    assert ("irtlib: found Inspect AI eval logs: 3 logs, 3 models ('a/x', 'b/y', 'c/z'), 1 task (refusals: scorer "
            "match), 8 items") in err
