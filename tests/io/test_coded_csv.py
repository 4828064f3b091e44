"""CSV files read by pyarrow as codes (irtlib.io.csv_codes) against the same files read by pandas.

The fast reader is the default for CSV text; pandas reads whatever pyarrow refuses. Both must give the
same matrix (values, order of models and items), the same warnings and the same errors naming rows and
columns, for long files (runs of one model coded once) and wide files (every item column in one dictionary).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import irtlib.io.tables as tables
from irtlib.errors import InputError
from irtlib.io import load_responses


def _read(path, monkeypatch, *, fast: bool, **options):
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(tables, "read_coded", lambda *args, **kwargs: None)
            patch.setattr(tables, "_header_fields", lambda *args, **kwargs: None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = load_responses(path, **options)
            except InputError as exc:
                return ("error", str(exc)), [str(w.message) for w in caught]
    m = got.matrix
    return (m.values.tolist(), list(m.models), list(m.items), got.layout, got.found), [str(w.message) for w in caught]


def _same(path, monkeypatch, **options):
    fast = _read(path, monkeypatch, fast=True, **options)
    slow = _read(path, monkeypatch, fast=False, **options)
    assert repr(fast) == repr(slow)               # NaN == NaN as text
    return fast


def _long_file(path, rng, n_models=9, n_items=70, blank=0.1):
    lines = ["model,item,score"]
    for m in range(n_models):                      # model by model: runs of one model
        for j in rng.permutation(n_items):
            score = "" if rng.random() < blank else str(int(rng.integers(0, 2)))
            lines.append(f"m{m},q{j},{score}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _wide_file(path, rng, n_models=12, n_items=30, blank=0.1, *, first="model"):
    cells = rng.integers(0, 2, (n_models, n_items)).astype(str).astype(object)
    cells[rng.random(cells.shape) < blank] = ""
    cells[:, 4] = ""                               # an item with only blank scores: left out, named
    cells[3, :] = ""                               # a model too
    header = [f"q{j}" for j in range(n_items)]
    rows = [[f"m{i}", *cells[i]] for i in range(n_models)]
    if first != "model":                          # the model column elsewhere than first
        header, rows = header[:2] + ["model"] + header[2:], [r[1:3] + [r[0]] + r[3:] for r in rows]
    else:
        header = ["model"] + header
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    return path


@pytest.mark.parametrize("seed", range(3))
def test_long_files_give_the_pandas_readers_matrix_and_warnings(tmp_path, monkeypatch, seed):
    path = _long_file(tmp_path / "long.csv", np.random.default_rng(seed))
    (values, models, items, layout, _), _ = _same(path, monkeypatch)
    assert layout == "long" and models[0] == "m0" and len(items) == 70


@pytest.mark.parametrize("first", ["model", "elsewhere"])
def test_wide_files_give_the_pandas_readers_matrix_and_warnings(tmp_path, monkeypatch, first):
    path = _wide_file(tmp_path / "wide.csv", np.random.default_rng(4), first=first)
    (values, models, items, layout, _), caught = _same(path, monkeypatch)
    assert layout == "wide" and "m3" not in models and "q4" not in items
    assert any("left out 1 model" in w for w in caught) and any("left out 1 item" in w for w in caught)


@pytest.mark.parametrize("rule", ["strict", "lenient"])
def test_graded_wide_scores_are_binarized_as_by_pandas(tmp_path, monkeypatch, rule):
    path = tmp_path / "graded.csv"
    path.write_text("model,a,b,c\nm1,0.25,1,0.5\nm2,1.0,,0.75\nm3,0,0.5,1\n")
    (values, *_), _ = _same(path, monkeypatch, rule=rule, threshold=0.5)
    assert values[1][0] == 1.0 and np.isnan(values[1][1])


@pytest.mark.parametrize("text, match", [
    ("model,a,b\nm1,1,0\nm2,0,yes\nm3,x,1\n", r"row 3: score 'x' in column 'a' is not a number"),
    ("model,a,b\nm1,1,0\nm2,0,2\nm1,1,1\n", r"row 3: model 'm1' appears in more than one row"),
    ("model,a,b\nm1,1,0\nm2,0,2\nm3,1,1\n", r"row 2: model 'm2', column 'b': score 2 is not 0 or 1 \(1 such"),
    ("model,a,b\nm1,1,0\n,0,1\n", r"row 2: column 'model' is empty"),
    ("model,a,b\n", r"found 0 rows x 3 columns"),
])
def test_bad_wide_files_are_refused_with_the_pandas_readers_message(tmp_path, monkeypatch, text, match):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    (kind, message), _ = _same(path, monkeypatch)
    assert kind == "error" and __import__("re").search(match, message)


def test_a_long_file_with_a_blank_model_in_a_run_is_refused_naming_its_row(tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    path = _long_file(tmp_path / "long.csv", rng)
    lines = path.read_text().splitlines()
    lines[100] = "," + lines[100].split(",", 1)[1]
    path.write_text("\n".join(lines) + "\n")
    (kind, message), _ = _same(path, monkeypatch)
    assert kind == "error" and "row 100: column 'model' is empty" in message


def _columns(values, cuts=()):
    import pyarrow as pa

    parts = np.split(np.array(values, dtype=object), list(cuts))
    return [pa.array(list(p), type=pa.string()) for p in parts]


@pytest.mark.parametrize("values, cuts", [
    (["1", "0", "0", "1"] * 50, (77,)),                                   # one byte each: a 0/1 score column
    (["1", None, "0", "1", "0.5"] * 20 + ["0"], (13, 40)),                 # nulls, longer texts
    (["0"] * 70000 + [f"{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40)] + ["1"], ()),   # seen late
    (["10", "é", "", "1"] * 30, (5,)),                                     # two bytes, a two-byte character
    ([f"q{j}" for j in (5, 3, 9, 1)] * 40, (50, 51)),                      # one sequence repeated
    ([f"q{j}" for j in range(70)] * 3 + ["q1"], ()),                       # repeated, then cut short
    ([f"q{j}" for j in range(70)] * 3 + ["other"], ()),                    # repeated, then broken
    ([f"q{j}" for j in range(70)] + [None] + [f"q{j}" for j in range(1, 70)] * 2, ()),   # a null in a period
    (["m1"] * 100 + ["m2"] * 100 + [None] * 10 + ["m1"] * 50, (150,)),     # runs, a model seen again
])
def test_each_shape_of_column_is_coded_as_by_one_hash_table_in_order_of_appearance(values, cuts):
    import pyarrow as pa

    from irtlib.io import csv_codes

    codes, texts = csv_codes._encode(_columns(values, cuts))
    want_codes, want_texts = csv_codes._dictionary(pa.chunked_array(_columns(values, cuts), type=pa.string()))
    np.testing.assert_array_equal(codes, want_codes)
    assert list(texts) == list(want_texts)
    assert [texts[c] if c >= 0 else None for c in codes] == values


def _in_order_file(path, n_models=6, n_items=80, *, item_major=False, extra=()):
    rng = np.random.default_rng(11)
    scores = rng.integers(0, 2, (n_models, n_items))
    pairs = [(m, j) for j in range(n_items) for m in range(n_models)] if item_major else \
        [(m, j) for m in range(n_models) for j in range(n_items)]
    lines = ["model,item,score", *(f"m{m},q{j},{scores[m, j]}" for m, j in pairs), *extra]
    path.write_text("\n".join(lines) + "\n")
    return scores


@pytest.mark.parametrize("item_major", [False, True])
def test_a_complete_long_file_in_either_order_gives_the_matrix_it_holds(tmp_path, monkeypatch, item_major):
    path = tmp_path / "long.csv"
    scores = _in_order_file(path, item_major=item_major)
    (values, models, items, layout, _), caught = _same(path, monkeypatch)
    assert layout == "long" and not caught
    assert models == [f"m{m}" for m in range(6)] and items == [f"q{j}" for j in range(80)]
    np.testing.assert_array_equal(values, scores)


def test_a_file_in_the_matrixs_order_with_one_judgment_repeated_is_read_once(tmp_path, monkeypatch):
    path = tmp_path / "long.csv"
    scores = _in_order_file(path)                              # the same scores again, one judgment repeated:
    _in_order_file(path, extra=[f"m2,q7,{scores[2, 7]}"])
    (values, *_), _ = _same(path, monkeypatch)
    np.testing.assert_array_equal(values, scores)


def test_a_file_in_the_matrixs_order_with_a_conflicting_judgment_is_refused_naming_its_rows(tmp_path, monkeypatch):
    path = tmp_path / "long.csv"
    scores = _in_order_file(path)
    _in_order_file(path, extra=[f"m2,q7,{1 - scores[2, 7]}"])
    (kind, message), _ = _same(path, monkeypatch)
    assert kind == "error" and "rows [168, 481]: model 'm2', item 'q7' has conflicting scores" in message


@pytest.mark.parametrize("data", [
    b"model,item,score\nm1,a,1\nm1,b,\xff\n",                                  # a score
    b"model,item,score\n" + b"".join(b"m%d,q\xe9%d,1\n" % (m, j) for m in range(3) for j in range(40)),  # periodic ids
    b"model,item,score\n" + b"".join(b"m\xff,q%d,1\n" % j for j in range(100)),     # runs of one model
    b"model,a,b\nm1,1,0\nm2,\xe9,1\n",                                           # a wide cell
    b"model,a,b\nm1,1,0\nm\xff,0,1\n",                                           # a wide file's model
])
def test_bytes_that_are_not_utf8_are_refused_with_the_pandas_readers_message(tmp_path, monkeypatch, data):
    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    (kind, message), _ = _same(path, monkeypatch)
    assert kind == "error" and "cannot read as a CSV table: 'utf-8' codec can't decode byte" in message


@pytest.mark.parametrize("header", [
    "model,a,b", "\ufeffmodel,a,b", "model,a,b\r", "model,a ,b,", "model,#a,NA,nan", "model,'a',b|c",
    '"model","a",b', "  model,a,b", "model,a\x0bb,c",
])
def test_header_lines_are_split_as_pandas_splits_them(tmp_path, monkeypatch, header):
    import pandas as pd

    path = tmp_path / "wide.csv"
    path.write_bytes((header + "\n").encode() + b"m1" + b",1" * (header.count(",") - header.count('"a"')) + b"\n")
    fields = tables._header_fields(path, ",", None)
    pandas = [str(v) for v in pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0]]
    assert fields is None or fields == pandas
    assert (fields is None) == (header[0] in ' "')             # quotes and leading blanks are left to pandas
    _same(path, monkeypatch)
