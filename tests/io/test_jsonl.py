"""The reader of the authors' JSON-lines format (``irtlib.io.jsonl``, ``irtlib.io``, ``irtlib calibrate``).

Hand-made files with known matrices, and every malformed case: one line naming the file and the
line (and the item and value where there is one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from irtlib import io as irtio
from irtlib.errors import InputError
from irtlib.io.jsonl import looks_like_jsonl, read_jsonl


def write(path, lines):
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines),
                    encoding="utf-8")
    return path


def line(subject, responses):
    return {"subject_id": subject, "responses": responses}


def test_exact_matrix_models_in_file_order_items_in_first_line_order(tmp_path):
    f = write(tmp_path / "r.jsonl", [
        line("zeta", {"q2": 1, "q10": 0, "q1": 1}),
        "",                                                     # a blank line is skipped
        line("alpha", {"q1": 0, "q2": 1.0, "q10": None}),       # other order, a float, a null
        line("mid", {"q10": 1, "q1": 0, "q2": 0}),
    ])
    m = read_jsonl(f)
    assert list(m.models) == ["zeta", "alpha", "mid"]
    assert list(m.items) == ["q2", "q10", "q1"]
    np.testing.assert_array_equal(m.values, [[1, 0, 1], [1, np.nan, 0], [0, 1, 0]])
    r = irtio.load_responses(f)
    assert r.layout == "jsonl" and r.prompts is None
    np.testing.assert_array_equal(r.matrix.values, m.values)
    assert list(irtio.read_responses(f).models) == ["zeta", "alpha", "mid"]


def test_sniffed_under_another_name(tmp_path):
    f = write(tmp_path / "responses.csv", [line("a", {"x": 1, "y": 0}), line("b", {"x": 0, "y": 1})])
    assert looks_like_jsonl(f)
    r = irtio.load_responses(f)
    assert r.layout == "jsonl" and r.matrix.shape == (2, 2)
    bad = write(tmp_path / "bad.txt", [line("a", {"x": 1}), line("b", {"x": 7})])
    with pytest.raises(InputError, match=r"bad\.txt \(read as JSON lines: it begins with '\{'\): line 2: item 'x'"):
        irtio.load_responses(bad)
    csv = tmp_path / "t.csv"
    csv.write_text("model,item,score\nm,i,1\n")
    assert not looks_like_jsonl(csv)


def test_graded_values_take_strict_and_lenient(tmp_path):
    f = write(tmp_path / "g.jsonl", [line("a", {"x": 1, "y": 0.5}), line("b", {"x": 0.5, "y": 0})])
    with pytest.raises(InputError, match=r"g\.jsonl: line 1: item 'y': value 0\.5 is not 0 or 1 \(2 such values\)"):
        irtio.load_responses(f)
    np.testing.assert_array_equal(irtio.read_responses(f, rule="strict").values, [[1, 0], [0, 0]])
    np.testing.assert_array_equal(irtio.read_responses(f, rule="lenient").values, [[1, 1], [1, 0]])
    with pytest.raises(InputError, match=r"g\.jsonl: line 1: item 'y': value 0\.5 is not 0 or 1"):
        irtio.load_responses(f, rule="wmdp")        # wmdp reads 0/1 correctness: graded values are refused


def test_the_wmdp_rule_and_positive_unsafe_invert_json_lines_like_the_log_readers(tmp_path):
    f = write(tmp_path / "c.jsonl", [line("a", {"x": 1, "y": 0}), line("b", {"x": 0, "y": None})])
    for options in ({"rule": "wmdp"}, {"positive": "unsafe"}):
        np.testing.assert_array_equal(irtio.read_responses(f, **options).values, [[0, 1], [1, np.nan]])
    np.testing.assert_array_equal(irtio.read_responses(f, rule="choice").values, [[1, 0], [0, np.nan]])


def test_all_null_item_is_left_out_with_a_warning(tmp_path):
    f = write(tmp_path / "n.jsonl", [line("a", {"x": 1, "y": None}), line("b", {"x": 0, "y": None})])
    with pytest.warns(irtio.InputWarning, match="left out 1 item with only blank scores: 'y'"):
        m = irtio.read_responses(f)
    assert list(m.items) == ["x"]


@pytest.mark.parametrize(("lines", "message"), [
    ([], r"e\.jsonl: empty file"),
    (["", "   "], r"e\.jsonl: empty file"),
    ([line("a", {"x": 1}), '{"subject_id": "b", "responses": {"x": 1}'],
     r"e\.jsonl: line 2: not valid JSON \("),
    (["{", '  "subject_id": "a"', "}"], r"e\.jsonl: line 1: not valid JSON .*pretty-printed JSON document"),
    ([line("a", {"x": 1}), "[1, 2]"], r"e\.jsonl: line 2: expected a JSON object"),
    ([line("a", {"x": 1}), {"subject_id": "b"}], r"e\.jsonl: line 2: missing key\(s\) 'responses'"),
    ([{"responses": {"x": 1}}], r"e\.jsonl: line 1: missing key\(s\) 'subject_id'"),
    ([line("a", {"x": 1}), line("", {"x": 1})], r"e\.jsonl: line 2: 'subject_id' must be a non-empty string"),
    ([line("a", {"x": 1}), line("b", [1])], r"e\.jsonl: line 2: 'responses' must be an object"),
    ([line("a", {})], r"e\.jsonl: line 1: 'responses' is empty"),
    ([line("a", {"x": 1, "y": 0}), line("b", {"x": 1})],
     r"e\.jsonl: line 2: item 'y' of line 1 is missing; every line must list the same items"),
    ([line("a", {"x": 1, "y": 0}), line("b", {"x": 1, "y": 1, "z": 0})],
     r"e\.jsonl: line 2: item 'z' is not on line 1; every line must list the same items \(ragged file\)"),
    ([line("a", {"x": 1, "y": 0}), line("b", {"x": 1, "z": 0})], r"e\.jsonl: line 2: item 'z' is not on line 1"),
    ([line("a", {"x": 1}), line("b", {"x": 2})], r"e\.jsonl: line 2: item 'x': value 2 is not 0 or 1"),
    ([line("a", {"x": 1}), line("b", {"x": "1"})], r"e\.jsonl: line 2: item 'x': value '1' is not a number"),
    ([line("a", {"x": 1}), line("b", {"x": True})], r"e\.jsonl: line 2: item 'x': value True is not a number"),
    ([line("a", {"x": 1}), line("b", {"x": [0]})], r"e\.jsonl: line 2: item 'x': value \[0\] is not a number"),
    ([line("a", {"x": 1}), "", line("a", {"x": 0})],
     r"e\.jsonl: line 3: subject_id 'a' already appears on line 1"),
    ([line("a", {"x": 1}), '{"subject_id": "b", "responses": {"x": 1, "x": 0}}'],
     r"e\.jsonl: line 2: key 'x' appears twice in one object"),
])
def test_errors_name_file_and_line(tmp_path, lines, message):
    f = write(tmp_path / "e.jsonl", lines) if lines else tmp_path / "e.jsonl"
    if not lines:
        f.write_bytes(b"")
    with pytest.raises(InputError, match=message) as err:
        irtio.load_responses(f)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match=message):
        read_jsonl(f)


def test_line_numbers_count_blank_lines(tmp_path):
    f = write(tmp_path / "b.jsonl", [line("a", {"x": 1}), "", "", line("b", {"x": 0.25})])
    with pytest.raises(InputError, match=r"line 4: item 'x': value 0\.25"):
        read_jsonl(f)


def test_not_utf8(tmp_path):
    f = tmp_path / "u.jsonl"
    f.write_bytes(b'{"subject_id": "\xff", "responses": {"x": 1}}\n')
    with pytest.raises(InputError, match=r"u\.jsonl: not UTF-8"):
        read_jsonl(f)


def test_calibrate_a_jsonl_file_end_to_end(tmp_path):
    """``irtlib calibrate FILE.jsonl -o bank.csv`` on a 2PL-simulated matrix: the bank ranks items by b."""
    rng = np.random.default_rng(3)
    n_models, n_items = 60, 40
    theta = rng.normal(0, 1, n_models)
    b = np.linspace(-2, 2, n_items)
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-1.5 * (theta[:, None] - b)))).astype(int)
    items = [f"it{j}" for j in range(n_items)]
    f = write(tmp_path / "sim.jsonl", [line(f"m{i}", dict(zip(items, map(int, row), strict=True)))
                                       for i, row in enumerate(x)])
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "irtlib.cli", "calibrate", str(f), "-o", str(tmp_path / "bank.csv"),
                           "--no-interval-check"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "60 models x 40 items" in proc.stderr and "jsonl layout" in proc.stderr
    from irtlib.bank.build import read_bank

    bank = read_bank(tmp_path / "bank.csv")
    kept = [i for i in items if i in set(bank.items.index)]
    assert len(kept) >= 36
    est_b = bank.items.loc[kept, "b"].to_numpy()
    true_b = b[[items.index(i) for i in kept]]
    from scipy.stats import spearmanr

    assert spearmanr(est_b, true_b).statistic > 0.9
    bad = write(tmp_path / "bad.jsonl", [line("a", {"x": 1}), line("b", {"y": 1})])
    proc = subprocess.run([sys.executable, "-m", "irtlib.cli", "calibrate", str(bad), "-o", str(tmp_path / "b2.csv")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("irtlib: error:")]
    assert len(errors) == 1 and "bad.jsonl: line 2: item 'y' is not on line 1" in errors[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "b2.csv").exists()
