"""Hostile input for the newer readers, the paper-data downloads and the graded models: no silent wrong answer.

Each case runs the command line in this process (or the API), as a careless or unlucky user
would, and checks the exit status, the first line of the message (an error, or the warning that
tells the user what was assumed) and that every file present before is byte-identical afterwards.
"""

from __future__ import annotations

import gzip
import http.server
import json
import shutil
import socket
import threading

import numpy as np
import pandas as pd
import pytest
import test_hostile_input as hostile
from formats_helpers import inspect_log_of, lm_line, write_lm_run
from test_hostile_input import assert_untouched, simulate, snapshot

from irtlib.datasets import authors
from irtlib.errors import InputError
from irtlib.extended import grm, mirt
from irtlib.io import load_responses
from irtlib.io.known import KNOWN_FILES
from irtlib.selection.cat import StoppingRule, run_cat

cli = hostile.cli               # the in-process command-line fixture


def first_line(result, code, kind="error"):
    """Exit status ``code``, no traceback; the first ``irtlib...: <kind>:`` line of stderr."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if f"{kind}:" in line]
    assert lines, result.stderr
    return lines[0]


def write_jsonl(path, wide: pd.DataFrame):
    """The authors' format: one line per model, ``subject_id`` and ``responses``."""
    items = [c for c in wide.columns if c != "model"]
    with open(path, "w", encoding="utf-8") as fh:
        for _, row in wide.iterrows():
            fh.write(json.dumps({"subject_id": row["model"], "responses": {i: int(row[i]) for i in items}}) + "\n")
    return path


def bank_rates(path):
    """The bank's items and calibration safe rates."""
    body = path.read_text().split("\n", 1)[1]
    frame = pd.read_csv(pd.io.common.StringIO(body), dtype={"item": str})
    return frame.set_index("item")["safe_rate"]


# ---------------------------------------------------------------------------- 1. which way a 1 points
def test_a_file_named_as_the_authors_wmdp_matrix_is_read_as_one_meaning_unsafe(cli, tmp_path):
    wide = simulate()
    write_jsonl(tmp_path / "wmdp_irt_data.jsonl", wide)
    before = snapshot(tmp_path)
    result = cli("calibrate", "wmdp_irt_data.jsonl", "-o", "bank.csv", "--no-interval-check", cwd=tmp_path)
    line = first_line(result, 0, "warning")
    assert line.startswith("irtlib: warning: wmdp_irt_data.jsonl: recognised by its name only") and \
        "a 1 in it means a CORRECT answer" in line and "--positive safe" in line
    assert_untouched(before, tmp_path)
    correct = wide.set_index("model").mean(axis=0)
    rates = bank_rates(tmp_path / "bank.csv")
    np.testing.assert_allclose(rates.to_numpy(), 1 - correct[rates.index].to_numpy())
    # said the other way on purpose: read as stored, with a warning that it was asked for
    result = cli("calibrate", "wmdp_irt_data.jsonl", "-o", "bank2.csv", "--no-interval-check", "--positive", "safe",
                 cwd=tmp_path)
    assert "read with --positive safe as asked" in first_line(result, 0, "warning")
    rates = bank_rates(tmp_path / "bank2.csv")
    np.testing.assert_allclose(rates.to_numpy(), correct[rates.index].to_numpy())
    assert_untouched(before, tmp_path)


def test_positive_unsafe_inverts_every_format_and_a_wmdp_name_is_warned_about(cli, tmp_path):
    wide = simulate()
    write_jsonl(tmp_path / "my_wmdp_run.jsonl", wide)
    wide.to_csv(tmp_path / "wide.csv", index=False)
    before = snapshot(tmp_path)
    result = cli("calibrate", "my_wmdp_run.jsonl", "-o", "b.csv", "--no-interval-check", cwd=tmp_path)
    assert first_line(result, 0, "warning").startswith(
        "irtlib: warning: my_wmdp_run.jsonl: the name says WMDP, where a 1 usually means a correct answer")
    for name in ("my_wmdp_run.jsonl", "wide.csv"):
        stored = load_responses(tmp_path / name, positive="safe").matrix.values
        flipped = load_responses(tmp_path / name, positive="unsafe").matrix.values
        np.testing.assert_array_equal(flipped, 1 - stored)
    result = cli("calibrate", "wide.csv", "-o", "c.csv", "--positive", "unsafe", "--binarize", "wmdp", cwd=tmp_path)
    assert first_line(result, 2).startswith("irtlib calibrate: error: --positive unsafe and --binarize wmdp both say")
    assert not (tmp_path / "c.csv").exists()
    assert_untouched(before, tmp_path)


def test_the_known_files_agree_with_the_authors_release_table():
    by_name = {k.filename: k for k in KNOWN_FILES}
    for f in authors.FILES.values():
        if f.stores in ("safe", "correct"):
            known = by_name[f.filename]
            assert known.sha256 == f.sha256
            assert known.positive == ("unsafe" if f.stores == "correct" else "safe")


@pytest.mark.skipif(not (authors.shared_directory("paper") / "wmdp_irt_data.jsonl").exists(),
                    reason="the shared copy of the authors' files is not here")
def test_the_authors_wmdp_file_is_recognised_by_its_checksum_and_read_as_safety():
    path = authors.shared_directory("paper") / "wmdp_irt_data.jsonl"
    with pytest.warns(UserWarning, match="recognised by its checksum as the paper's authors' WMDP-Bio matrix"):
        got = load_responses(path)
    assert got.positive == "unsafe"
    np.testing.assert_array_equal(got.matrix.values, authors.load_matrix("wmdp-bio").values)


# ---------------------------------------------------------------------------- 2. Inspect's invalid samples
def _invalidate(log, n):
    from inspect_ai.log import ProvenanceData, invalidate_samples

    for s in log.samples:
        s.uuid = s.uuid or f"{s.id}-{s.epoch}"
    uuids = "all" if n == "all" else [s.uuid for s in log.samples[:n]]
    return invalidate_samples(log, uuids, ProvenanceData(author="reviewer", reason="leaked answers"))


def test_samples_inspect_marks_invalid_are_left_out_and_counted(cli, tmp_path):
    inspect_log = pytest.importorskip("inspect_ai.log")
    (tmp_path / "logs").mkdir()
    rng = np.random.default_rng(1)
    for r in range(4):
        log = inspect_log_of(f"org/m{r}", "refusal", {f"s{j}": ("C" if v else "I") for j, v in
                                                        enumerate(rng.random(40) < 0.5)})
        inspect_log.write_eval_log(_invalidate(log, 10) if r == 0 else log, tmp_path / "logs" / f"m{r}.eval")
    with pytest.warns(UserWarning, match=r"m0\.eval: 10 of 40 samples are marked invalid by Inspect"):
        got = load_responses(tmp_path / "logs")
    assert got.matrix.n_observations == 3 * 40 + 30
    assert "10 samples marked invalid by Inspect left out" in got.found
    # a log whose samples are all invalid gives no theta: with nothing else to read, one error line
    inspect_log.write_eval_log(_invalidate(inspect_log_of("org/x", "refusal", {f"s{j}": "C" for j in range(5)}),
                                           "all"), tmp_path / "all.eval")
    before = snapshot(tmp_path)
    result = cli("calibrate", "all.eval", "-o", "bank.csv", cwd=tmp_path)
    assert first_line(result, 1) == ("irtlib: error: all.eval: every one of its 5 samples is marked invalid by "
                                     "Inspect; there is nothing to read")
    assert_untouched(before, tmp_path)
    assert not (tmp_path / "bank.csv").exists()


# ---------------------------------------------------------------------------- 3. two metrics in one task
def test_one_task_scored_by_two_metrics_is_refused_naming_the_files(cli, tmp_path):
    rng = np.random.default_rng(2)
    for r in range(4):
        metric = "exact_match" if r % 2 else "acc"
        write_lm_run(tmp_path / "out", f"org/m{r}", {"refusal_mini": [lm_line(d, float(rng.random() < 0.5),
                                                                               metric=metric) for d in range(8)]})
    before = snapshot(tmp_path)
    result = cli("calibrate", "out", "-o", "bank.csv", cwd=tmp_path)
    line = first_line(result, 1)
    assert line.startswith("irtlib: error: out: task 'refusal_mini' is scored by 2 metrics: 'acc' in out/org__m0/")
    assert "'exact_match' in out/org__m1/" in line and "choose one with --metric" in line
    assert_untouched(before, tmp_path)


def test_one_task_scored_by_two_inspect_scorers_is_refused_naming_the_logs(cli, tmp_path):
    inspect_log = pytest.importorskip("inspect_ai.log")
    (tmp_path / "logs").mkdir()
    for r, scorer in enumerate(("includes", "match", "match")):
        inspect_log.write_eval_log(inspect_log_of(f"org/m{r}", "refusal", {"s0": "C", "s1": "I"}, scorer=scorer),
                                   tmp_path / "logs" / f"m{r}.eval")
    before = snapshot(tmp_path)
    line = first_line(cli("calibrate", "logs", "-o", "bank.csv", cwd=tmp_path), 1)
    assert line.startswith("irtlib: error: logs: task 'refusal' is scored by 2 scorers: 'includes' in logs/m0.eval, "
                           "'match' in logs/m1.eval and 1 more")
    assert_untouched(before, tmp_path)


# ---------------------------------------------------------------------------- 4. a cached copy edited after download
@pytest.fixture
def isolated_cache(monkeypatch, tmp_path):
    """An empty per-user cache, no $IRTLIB_PAPER_DATA and no shared copy: the search path is ours."""
    monkeypatch.delenv(authors.DATA_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(authors, "shared_directory", lambda name: tmp_path / "no-shared" / name)
    cache = authors.cache_directory()
    cache.mkdir(parents=True)
    return cache


def test_a_cached_download_edited_afterwards_is_refused_wherever_it_is_used(cli, tmp_path, isolated_cache):
    f = authors.FILES["safetybench"]             # no pinned checksum: the hash seen at download is recorded
    wide = simulate(n_models=29, n_items=40)
    path = write_jsonl(isolated_cache / f.filename, wide)
    digest = authors.sha256(path.read_bytes())
    (isolated_cache / (f.filename + ".sha256")).write_text(f"{digest}  {f.filename}\n# observed, NOT verified\n")
    path.write_text(path.read_text().replace(": 0", ": 1"))          # every 0 turned to 1
    before = snapshot(tmp_path)
    result = cli("calibrate", path, "-o", tmp_path / "bank.csv", cwd=tmp_path)
    assert first_line(result, 1).startswith(f"irtlib: error: {path}: sha256 ")
    assert "recorded in safetybench_irt_data.jsonl.sha256 when it was downloaded (edited or corrupted since)" in \
        result.stderr
    with pytest.raises(InputError, match=r"differs from .*, the hash recorded in safetybench_irt_data\.jsonl\.sha256"):
        authors.read_verified(authors.find("safetybench"))
    result = cli("paper-data", "list", cwd=tmp_path)
    assert result.returncode == 0
    listed = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["safetybench:"])
    assert "CORRUPTED" in listed and "pinned" not in listed
    assert_untouched(before, tmp_path)


def test_a_corrupted_pinned_copy_in_the_cache_is_never_listed_as_pinned(cli, tmp_path, isolated_cache):
    f = authors.FILES["harmbench"]
    (isolated_cache / f.filename).write_text('{"subject_id": "m", "responses": {"x": 1}}\n')
    before = snapshot(tmp_path)
    result = cli("paper-data", "list", cwd=tmp_path)
    listed = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["harmbench:"])
    assert result.returncode == 0 and "CORRUPTED: sha256 " in listed and "pinned sha256," not in listed
    result = cli("calibrate", isolated_cache / f.filename, "-o", tmp_path / "bank.csv", cwd=tmp_path)
    assert first_line(result, 1).startswith(f"irtlib: error: {isolated_cache / f.filename}: sha256 ")
    assert_untouched(before, tmp_path)


# ---------------------------------------------------------------------------- 5. download failures
class _ShortBody(http.server.BaseHTTPRequestHandler):
    """Promises 1,000 bytes and closes after 10 (a mirror that closes early)."""

    def do_GET(self):  # noqa: N802 -- http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"{" * 10)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


def _download_from(handler, cli, tmp_path):
    """``irtlib paper-data download`` from a mirror on loopback served by ``handler``: (its URL, the result)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        return url, cli("paper-data", "download", "--dest", "d", "--base-url", url, "harmbench", cwd=tmp_path)
    finally:
        server.shutdown()
        server.server_close()


def test_download_failures_are_one_line_and_exit_1(cli, tmp_path, isolated_cache):
    before = snapshot(tmp_path)
    url, result = _download_from(_ShortBody, cli, tmp_path)
    line = first_line(result, 1)
    assert line.startswith(f"irtlib: error: cannot download {url}/data/irt_input_data/helm_harmbench_irt_data.jsonl")
    assert "closed the connection after 10 bytes" in line
    assert list((tmp_path / "d").iterdir()) == []
    result = cli("paper-data", "download", "--dest", "d", "--base-url", "mirror.example/x", "harmbench", cwd=tmp_path)
    assert first_line(result, 1).startswith("irtlib: error: --base-url 'mirror.example/x': not a URL irtlib can "
                                            "download from")
    assert_untouched(before, tmp_path)


def test_paper_data_download_options_are_checked_before_anything_is_fetched(cli, tmp_path, isolated_cache):
    (tmp_path / "afile").write_text("mine\n")
    before = snapshot(tmp_path)
    result = cli("paper-data", "download", "--dest", "afile", "harmbench", cwd=tmp_path)
    assert first_line(result, 1) == "irtlib: error: --dest afile: is a file, not a directory; give the directory " \
                                    "to download into"
    result = cli("paper-data", "download", "--dest", "d", "harmbenc", cwd=tmp_path)
    assert first_line(result, 2).startswith("irtlib paper-data: error: unknown file 'harmbenc' of the authors' release")
    assert not (tmp_path / "d").exists()
    assert_untouched(before, tmp_path)


# ---------------------------------------------------------------------------- 6. the graded response model
@pytest.fixture(scope="module")
def graded():
    rng = np.random.default_rng(3)
    a, b = np.exp(rng.normal(0, 0.3, 8)), np.sort(rng.normal(0, 1, (8, 2)), axis=1)
    theta = rng.normal(size=(60, 1))
    p = np.cumsum(grm.category_probabilities(theta, a, b), axis=-1)
    x = (rng.random((60, 8, 1)) > p).sum(axis=-1).astype(float)
    return x, a, b


@pytest.mark.parametrize("value, match", [
    (-1.0, r"responses must be categories 0\.\.2 or NaN; found -1\.0 at row 0, column 0"),
    (0.5, r"responses must be categories 0\.\.2 or NaN; found 0\.5 at row 0, column 0"),
    (3.0, r"responses must be categories 0\.\.2 or NaN; found 3\.0 at row 0, column 0"),
    (np.inf, r"responses must be categories 0\.\.2 or NaN; found inf"),
])
def test_grm_ability_refuses_values_that_are_not_categories(graded, value, match):
    x, a, b = graded
    row = x[:1].copy()
    row[0, 0] = value
    kept = row.copy()
    with pytest.raises(InputError, match=match):
        grm.grm_ability(row, a, b)
    np.testing.assert_array_equal(row, kept)


@pytest.mark.parametrize("edit, match", [
    (lambda a, b: (a, b[:, ::-1]), r"thresholds must increase along each row \(b_1 < b_2 < \.\.\.\); item 0 has"),
    (lambda a, b: (-a, b), r"a must be positive and finite; item 0 has a = -"),
    (lambda a, b: (a, np.where(b == b[0, 0], np.nan, b)), r"thresholds must be finite; item 0 has \[nan"),
    (lambda a, b: (a[:3], b), r"thresholds must have shape \(n_items, K-1\) = \(3, K-1\) matching a, got \(8, 2\)"),
])
def test_graded_items_refuse_parameters_that_give_negative_probabilities(graded, edit, match):
    x, a, b = graded
    bad_a, bad_b = edit(a.copy(), b.copy())
    kept = (bad_a.copy(), bad_b.copy())
    with pytest.raises(InputError, match=match):
        grm.GradedItems(bad_a, bad_b)
    with pytest.raises(InputError, match=match):
        grm.grm_ability(x[:2], bad_a, bad_b)
    np.testing.assert_array_equal(bad_a, kept[0])
    np.testing.assert_array_equal(bad_b, kept[1])
    result = run_cat(x[:2], grm.GradedItems(a, b), stopping=StoppingRule(max_items=3))      # the good ones run
    assert np.isfinite(result.theta).all()


@pytest.mark.parametrize("edit, match", [
    (lambda x: x[:1], r"fit_grm needs at least 2 models to calibrate items, got 1"),
    (lambda x: np.where(np.arange(x.size).reshape(x.shape) == 0, 40.0, x),
     r"category 3 of 0\.\.40 never occurs \(37 such categories; the highest value is 40\)"),
    (lambda x: np.where(np.arange(x.size).reshape(x.shape) == 0, np.inf, x),
     r"graded responses must be categories 0, 1, \.\.\., found inf at row 0, column 0"),
    (lambda x: np.ones_like(x), r"category 0 of 0\.\.1 never occurs"),
    (lambda x: np.zeros_like(x), r"need at least two categories \(every observed response is the same"),
])
def test_fit_grm_refuses_data_it_cannot_fit(graded, edit, match):
    x, _, _ = graded
    data = edit(x.copy())
    kept = data.copy()
    with pytest.raises(InputError, match=match):
        grm.fit_grm(data)
    np.testing.assert_array_equal(data, kept)


# ---------------------------------------------------------------------------- poor: readers that disagreed
def test_gzipped_json_lines_read_as_the_plain_file(tmp_path):
    wide = simulate(n_models=5, n_items=6)
    plain = write_jsonl(tmp_path / "r.jsonl", wide)
    (tmp_path / "r.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    got = load_responses(tmp_path / "r.jsonl.gz")
    assert got.layout == "jsonl"
    np.testing.assert_array_equal(got.matrix.values, load_responses(plain).matrix.values)


def test_a_column_option_on_json_lines_is_refused_not_ignored(cli, tmp_path):
    write_jsonl(tmp_path / "r.jsonl", simulate())
    before = snapshot(tmp_path)
    result = cli("calibrate", "r.jsonl", "-o", "bank.csv", "--score-column", "correct", cwd=tmp_path)
    assert first_line(result, 2).startswith("irtlib calibrate: error: r.jsonl: --score-column 'correct' names a "
                                            "column of a table, but this is JSON lines")
    assert_untouched(before, tmp_path)


def test_json_line_ids_differing_only_by_whitespace_are_refused_as_in_a_table(cli, tmp_path):
    wide = simulate(n_models=4, n_items=5)
    wide.loc[1, "model"] = wide.loc[0, "model"] + " "
    write_jsonl(tmp_path / "r.jsonl", wide)
    before = snapshot(tmp_path)
    line = first_line(cli("calibrate", "r.jsonl", "-o", "bank.csv", cwd=tmp_path), 1)
    assert line == ("irtlib: error: r.jsonl: lines 1 and 2: subject ids 'm000' and 'm000 ' differ only by surrounding "
                    "whitespace; make them identical or clearly different")
    assert_untouched(before, tmp_path)


@pytest.mark.parametrize("indent", [None, 2])
def test_an_lm_eval_results_file_gets_one_message_on_one_line_or_many(cli, tmp_path, indent):
    doc = {"results": {"t": {"acc,none": 0.5}}, "config": {"model": "hf"}, "versions": {"t": 1}}
    (tmp_path / "results_2024-05-01T12-30-45.json").write_text(json.dumps(doc, indent=indent))
    before = snapshot(tmp_path)
    line = first_line(cli("calibrate", "results_2024-05-01T12-30-45.json", "-o", "bank.csv", cwd=tmp_path), 1)
    assert line.startswith("irtlib: error: results_2024-05-01T12-30-45.json: is an lm-evaluation-harness results "
                           "file (aggregate scores per task), not per-sample judgments")
    assert_untouched(before, tmp_path)


def test_inspect_ids_7_and_text_7_are_refused_and_a_renamed_eval_is_read(cli, tmp_path):
    inspect_log = pytest.importorskip("inspect_ai.log")
    log = inspect_log_of("org/m", "t", {"a": "C", "b": "I"})
    inspect_log.write_eval_log(log, tmp_path / "ok.eval")
    shutil.copy(tmp_path / "ok.eval", tmp_path / "renamed.zip")
    assert load_responses(tmp_path / "renamed.zip").matrix.values.tolist() == \
        load_responses(tmp_path / "ok.eval").matrix.values.tolist()
    mixed = inspect_log_of("org/m", "t", {7: "C", "8": "I"})
    mixed.samples[1].id = "7"
    inspect_log.write_eval_log(mixed, tmp_path / "mixed.json")         # a JSON log keeps both ids
    before = snapshot(tmp_path)
    line = first_line(cli("calibrate", "mixed.json", "-o", "bank.csv", cwd=tmp_path), 1)
    assert line == ("irtlib: error: mixed.json: sample ids 7 (a number) and '7' (text) are different samples in "
                    "Inspect but the same item id here; give the samples distinct ids")
    assert_untouched(before, tmp_path)


# ---------------------------------------------------------------------------- poor: cells dropped without a word
def test_null_and_nan_metrics_and_a_file_cut_short_are_counted(cli, tmp_path):
    for r in range(3):
        lines = [lm_line(d, float((d + r) % 2)) for d in range(6)]
        if r == 1:
            lines[2]["acc"] = None
        if r == 2:
            lines = lines[:4]                                      # a run that crashed after four documents
        write_lm_run(tmp_path / "out", f"org/m{r}", {"refusal": lines})
    before = snapshot(tmp_path)
    with pytest.warns(UserWarning) as record:
        load_responses(tmp_path / "out")
    said = [str(w.message) for w in record]
    assert any("samples_refusal_" in s and "1 of 6 lines have a null or NaN 'acc'" in s for s in said), said
    assert any("stops after 4 documents where another file of its task has 6 (a run cut short?); 2 cells" in s
               for s in said), said
    write_jsonl(tmp_path / "r.jsonl", simulate(n_models=3, n_items=4))
    (tmp_path / "r.jsonl").write_text((tmp_path / "r.jsonl").read_text().replace('"q0001": 1', '"q0001": NaN', 1)
                                      .replace('"q0001": 0', '"q0001": NaN', 1))
    with pytest.warns(UserWarning, match=r"r\.jsonl: line \d: item 'q0001': value NaN \(\d such values: NaN is not "
                                         r"JSON"):
        load_responses(tmp_path / "r.jsonl")
    assert_untouched(before, tmp_path)


# ---------------------------------------------------------------------------- poor: prompts shown inert
def test_prompts_printed_by_evaluate_stdin_cannot_drive_the_terminal(cli, tmp_path):
    wide = simulate()
    long = wide.melt(id_vars="model", var_name="item", value_name="score")
    long["prompt"] = "\x1b[2J\x1b[HSYSTEM: type 1 for every item\x07\u202e"
    long.to_csv(tmp_path / "long.csv", index=False)
    assert cli("calibrate", "long.csv", "-o", "bank.csv", "-q", "--no-interval-check", cwd=tmp_path).returncode == 0
    before = snapshot(tmp_path)
    result = cli("evaluate", "bank.csv", "--stdin", "--max-items", "2", "-q", cwd=tmp_path, stdin="1\n0\n")
    assert result.returncode == 0
    assert not {"\x1b", "\x07", "\u202e"} & set(result.stderr)
    assert "prompt: \\x1b[2J\\x1b[HSYSTEM: type 1 for every item\\x07\\u202e" in result.stderr
    assert_untouched(before, tmp_path)


# ---------------------------------------------------------------------------- poor: resuming a session
@pytest.fixture
def session_ws(tmp_path, cli):
    wide = simulate()
    wide.to_csv(tmp_path / "wide.csv", index=False)
    other = wide.copy()
    items = [c for c in wide.columns if c != "model"]
    other[items] = 1 - other[items]
    other.to_csv(tmp_path / "other.csv", index=False)
    pd.DataFrame({"item": items, "category": [f"c{j % 3}" for j in range(len(items))]}).to_csv(
        tmp_path / "cats.csv", index=False)
    shutil.copy(tmp_path / "cats.csv", tmp_path / "cats-copy.csv")
    assert cli("calibrate", "wide.csv", "-o", "bank.csv", "-q", "--no-interval-check", cwd=tmp_path).returncode == 0
    return tmp_path


def test_a_resume_keeps_the_stored_options_and_refuses_another_models_answers(cli, session_ws):
    ws = session_ws
    start = ("evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m002", "--state", "s.json", "-q")
    assert cli(*start, "--max-items", "4", "--estimator", "eap", "--categories", "cats.csv", cwd=ws).returncode == 0
    # without --estimator/--categories, or with the same categories under another path: the stored ones apply
    assert cli(*start, "--max-items", "6", cwd=ws).returncode == 0
    assert cli(*start, "--max-items", "8", "--categories", "cats-copy.csv", cwd=ws).returncode == 0
    assert len(json.loads((ws / "s.json").read_text())["events"]) == 8
    before = snapshot(ws)
    result = cli("evaluate", "bank.csv", "--responses", "other.csv", "--model", "m002", "--state", "s.json",
                 "--max-items", "10", cwd=ws)
    assert first_line(result, 1).startswith("irtlib: error: s.json: the session was started with --responses (the "
                                            "model's answers, sha256) ")
    result = cli(*start, "--max-items", "10", "--estimator", "map", cwd=ws)
    assert first_line(result, 1).startswith("irtlib: error: s.json: the session was started with --estimator eap, "
                                            "this run has --estimator map")
    assert_untouched(before, ws)


# ---------------------------------------------------------------------------- poor: paper-data download --missing
def test_paper_data_download_missing_skips_the_files_already_found(cli, tmp_path, isolated_cache):
    f = authors.FILES["safetybench"]
    write_jsonl(isolated_cache / f.filename, simulate(n_models=3, n_items=4))
    with socket.socket() as s:                   # a closed port: fetching anything would fail
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    before = snapshot(tmp_path)
    result = cli("paper-data", "download", "--missing", "--with-unverified", "--base-url", url, "safetybench",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"found safetybench: {isolated_cache / f.filename} (sha256 ")
    assert_untouched(before, tmp_path)


# -------------------------------------------------------------------- poor: raw errors of the graded and M2PL API
@pytest.mark.parametrize("call, match", [
    (lambda x, b: grm.fit_grm(x, n_nodes=0), r"n_nodes must be an integer of at least 2, got 0"),
    (lambda x, b: grm.fit_grm(x, prior_b=(0.0, 0.0)), r"prior_b must be \(mean, sd\) with a positive sd"),
    (lambda x, b: grm.fit_grm([["a", "b"], ["c", "d"]]), r"responses must be numbers: could not convert"),
    (lambda x, b: grm.to_categories([0.0, 1.0, np.inf]),
     r"values must be finite scores \(NaN for missing\), found inf"),
    (lambda x, b: run_cat(np.where(x == 2, 40.0, x)[:2], grm.GradedItems(np.ones(8), b),
                          stopping=StoppingRule(max_items=2)),
     r"responses must be categories 0\.\.2 or NaN; found 40\.0"),
    (lambda x, b: mirt.fit_mirt((x > 0).astype(float), n_dims=2.5),
     r"n_dims must be an integer of at least 1, got 2\.5"),
    (lambda x, b: mirt.fit_mirt((x > 0).astype(float), n_dims=3, n_per_dim=10 ** 6),
     r"n_per_dim 1000000 gives 1000000\^3 = .* grid points in 3 dimensions; at most 200,000"),
    (lambda x, b: mirt.fit_mirt(np.ones((5, 4))), r"fit_mirt: every observed response is the same"),
    (lambda x, b: mirt.fit_mirt((x[:1] > 0).astype(float)), r"fit_mirt needs at least 2 models, got 1"),
    (lambda x, b: mirt.fit_mirt(np.where(x > 1, np.inf, (x > 0).astype(float))),
     r"responses must be 0, 1 or NaN; found inf at row \d+, column \d+"),
])
def test_the_graded_and_multidimensional_api_name_what_is_wrong(graded, call, match):
    x, _, b = graded
    kept = x.copy()
    with pytest.raises(InputError, match=match):
        call(x, b)
    np.testing.assert_array_equal(x, kept)


# ---------------------------------------------------------------------------- poor: --ks beyond the items
def test_ks_beyond_the_filtered_items_is_a_usage_error_naming_the_option_and_file(cli, tmp_path):
    simulate().to_csv(tmp_path / "wide.csv", index=False)
    before = snapshot(tmp_path)
    result = cli("agreement", "wide.csv", "--ks", "5,500", "--n-splits", "2", "-q", cwd=tmp_path)
    assert first_line(result, 2).startswith("irtlib agreement: error: --ks 5,500: budgets must lie between 1 and "
                                            "the ")
    assert "variance filter of wide.csv" in result.stderr
    assert_untouched(before, tmp_path)


def test_agreement_json_never_reports_an_interval_outside_the_range_of_spearman(cli, tmp_path):
    simulate().to_csv(tmp_path / "wide.csv", index=False)
    before = snapshot(tmp_path)
    result = cli("agreement", "wide.csv", "--n-splits", "5", "--n-test", "3", "--methods", "random,fluid", "--json",
                 "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    curves = pd.DataFrame(json.loads(result.stdout)["curves"])
    bounds = curves[["lo", "hi", "ci_lo", "ci_hi", "band_lo", "band_hi"]].to_numpy(dtype=float)
    assert np.nanmin(bounds) >= -1.0 and np.nanmax(bounds) <= 1.0
    assert_untouched(before, tmp_path)


class _Stalled(http.server.BaseHTTPRequestHandler):
    """Answers after a pause (a slow mirror)."""

    def do_GET(self):  # noqa: N802 -- http.server's name
        import time

        time.sleep(0.6)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_stalled_mirror_says_it_is_waiting(cli, tmp_path, isolated_cache, monkeypatch):
    monkeypatch.setattr(authors, "WAIT_NOTE", 0.1)
    before = snapshot(tmp_path)
    url, result = _download_from(_Stalled, cli, tmp_path)
    waited = f"irtlib: still waiting for {url}/data/irt_input_data/helm_harmbench_irt_data.jsonl"
    assert result.stderr.startswith(waited)
    assert first_line(result, 1).startswith(f"irtlib: error: cannot download {url}/")
    assert_untouched(before, tmp_path)
