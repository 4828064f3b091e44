"""Chapter 06's comparison runs as a build job (irtbook.comparison_runs): it fills the entries the chapter reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from irtbook import comparison_runs as cr
from irtbook.course import parameter_values
from irtlib.protocol import agreement

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "book" / "06_table2.md"


def _params(**changes):
    params = parameter_values(CHAPTER.read_text(encoding="utf-8"))
    params.update(changes)
    return params


def test_the_chapter_computes_its_comparison_runs_through_the_jobs_functions():
    text = CHAPTER.read_text(encoding="utf-8")
    assert re.search(r"^other = comparison_runs\(benches, protocol=COMPARE_PROTOCOL, "
                     r"fresh_anchor_max_items=FRESH_ANCHOR_MAX_ITEMS, \*\*run_kw\)$", text, re.M)
    assert re.search(r"^alt_runs = engine_runs\(\{b: benches\[b\] for b in released\}, proto, "
                     r"\*\*dict\(run_kw, engine=alternative\)\)$", text, re.M)
    # the job reads the parameters it builds the chapter's arguments from
    params = _params()
    assert {"RULE", "DATA", "BENCHMARKS", "SEED", "ENGINE", "PROTOCOL", "COMPARE_PROTOCOL",
            "FRESH_ANCHOR_MAX_ITEMS"} <= set(params)


@pytest.mark.slow
def test_the_job_fills_every_entry_the_chapters_calls_then_read(tmp_path, monkeypatch):
    monkeypatch.setenv("IRTLIB_DATA", "simulated")
    params = _params(BENCHMARKS=["simplesafetytests", "harmbench"])
    chapter = tmp_path / "06_table2.md"
    text = CHAPTER.read_text(encoding="utf-8")
    chapter.write_text(text.replace(repr(_params()["BENCHMARKS"]).replace("'", '"'),
                                    repr(params["BENCHMARKS"]).replace("'", '"')), encoding="utf-8")
    assert parameter_values(chapter.read_text(encoding="utf-8"))["BENCHMARKS"] == params["BENCHMARKS"]
    cache = tmp_path / "cache"
    assert cr.main(["--quick", "--cache-dir", str(cache), "--chapter", str(chapter)]) == 0
    written = set(cache.glob("*.pkl"))
    assert written

    def no_run(*args, **kwargs):
        raise AssertionError("a run the job should have cached was computed again")

    monkeypatch.setattr(agreement, "run_protocol", no_run)
    kw = cr.chapter_arguments(params, quick=True, cache_dir=cache, n_jobs=2)   # the chapter's n_jobs: no key
    other = cr.comparison_runs(**kw["comparison"])
    assert set(other) == set(params["BENCHMARKS"])
    assert all(frame.attrs["protocol"] == params["COMPARE_PROTOCOL"] for frame in other.values())
    assert cr.engine_runs(**kw["engine"]) == {}          # simulated data: no released benchmark to recalibrate
    assert set(cache.glob("*.pkl")) == written


def test_a_missing_chapter_is_one_line_and_status_2(tmp_path, capsys):
    assert cr.main(["--chapter", str(tmp_path / "nowhere.md"), "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "nowhere.md not found" in err and "Traceback" not in err
