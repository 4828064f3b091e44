"""The course kit's data check: a chapter meant for real data refuses to run on the simulated release
unless asked, in one line naming the missing files (irtbook.course, tools/student.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from irtbook import course
from irtlib.datasets import authors

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import student  # noqa: E402  (tools/student.py)


def test_needed_benchmarks_come_from_the_parameters():
    assert course.needed_benchmarks({"DATA": None, "BENCHMARK": "harmbench"}) == ["harmbench"]
    assert course.needed_benchmarks({"DATA": None, "BENCHMARKS": ["safetybench", "wmdp-bio"],
                                     "CEILING_BENCHMARK": "wmdp-bio"}) == ["wmdp-bio"]    # SafetyBench has no real data
    assert course.needed_benchmarks({"BENCHMARK": "harmbench"}) == []                     # no DATA: not a paper chapter
    assert course.needed_benchmarks({"DATA": None}, entry="book/10_beyond") == ["airbench2024"]
    text = "# T\n\n```{code-cell} ipython3\n:tags: [parameters]\n\nQUICK = False  # q\nDATA = None  # d\n" \
           "BENCHMARK = \"harmbench\"  # b\n```\n"
    assert course.parameter_values(text) == {"QUICK": False, "DATA": None, "BENCHMARK": "harmbench"}


def test_missing_real_data_is_refused_in_one_line_naming_the_files(tmp_path):
    params = {"DATA": None, "DATA_DIR": str(tmp_path), "BENCHMARKS": ["harmbench", "wmdp-bio"]}
    with pytest.raises(course.MissingData) as caught:
        course.require_real_data("book/02_fit", params)
    message = str(caught.value)
    assert "\n" not in message and caught.value._render_traceback_() == [f"MissingData: {message}"]
    for name in ("harmbench", "wmdp-bio"):
        assert authors.FILES[name].filename in message
    assert "book/02_fit" in message and "`irtlib paper-data download`" in message
    assert "-p DATA simulated" in message


def test_the_simulated_release_runs_only_when_asked_and_real_data_pass(tmp_path):
    params = {"DATA": "simulated", "DATA_DIR": None, "BENCHMARKS": ["harmbench"]}
    assert course.require_real_data("book/02_fit", params) == ["harmbench"]
    (tmp_path / authors.FILES["harmbench"].filename).write_text("")      # found (read only when used)
    assert course.require_real_data("book/02_fit", {"DATA": None, "DATA_DIR": str(tmp_path),
                                                    "BENCHMARK": "harmbench"}) == ["harmbench"]
    with pytest.raises(course.MissingData, match=r"--with-unverified airbench2024"):
        course.require_real_data("book/10_beyond", {"DATA": None, "DATA_DIR": str(tmp_path)})


def test_student_notebook_checks_its_data_right_after_its_parameters():
    import jupytext

    nb = jupytext.read(ROOT / "book" / "07_own_benchmark.md")
    kid, answers = student.student_and_answers(nb, entry="book/07_own_benchmark")
    tags = [(c.get("metadata", {}).get("tags") or []) for c in kid["cells"]]
    at = next(i for i, t in enumerate(tags) if "parameters" in t)
    assert student.DATA_CHECK_TAG in tags[at + 1]
    assert "require_real_data('book/07_own_benchmark', globals())" in "".join(kid["cells"][at + 1]["source"])
    assert not any(student.DATA_CHECK_TAG in (c.get("metadata", {}).get("tags") or []) for c in answers["cells"])
    pandaguard = jupytext.read(ROOT / "book" / "09_pandaguard.md")       # its own data, no DATA parameter
    kid, _ = student.student_and_answers(pandaguard, entry="book/09_pandaguard")
    assert not any(student.DATA_CHECK_TAG in (c.get("metadata", {}).get("tags") or []) for c in kid["cells"])
