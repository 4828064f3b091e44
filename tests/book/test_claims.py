"""One verdict per claim: what the chapters publish is what the scorecard shows, on every page."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from irtbook import claims as published
from irtbook import scorecard as sc

ROOT = Path(__file__).resolve().parents[2]
EXECUTED = ROOT / "_build" / "executed"


def _glue_output(name: str, value: str) -> dict:
    # what myst_nb.glue(name, value, display=False) leaves in a papermill-executed notebook
    prefix = "application/papermill.record/"
    return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}},
            "data": {prefix + "text/plain": repr(value)}}


def _notebook(path: Path, glued: dict) -> Path:
    cells = [{"cell_type": "code", "source": "", "metadata": {}, "execution_count": 1,
              "outputs": [_glue_output(k, v) for k, v in glued.items()]}]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _claim(cid: str, verdict: str = "reproduced", kind: str = "real") -> sc.Claim:
    return sc.Claim("a claim", "Figure 2", "the paper's data", "rho 0.99", "{ref}`ch-fit`", verdict, "bound",
                    id=cid, kind=kind)


def _published(c: sc.Claim) -> dict:
    return {published.CLAIM_PREFIX + c.id: json.dumps(asdict(c)), published.VERDICT_PREFIX + c.id: c.verdict}


def test_collect_reads_back_exactly_what_a_chapter_published(tmp_path):
    a, b = _claim("fit_rho_real"), _claim("left_k_harmbench", "partly", "real")
    _notebook(tmp_path / "02_fit.ipynb", {**_published(a), "other": "x"})
    _notebook(tmp_path / "06_table2.ipynb", _published(b))
    _notebook(tmp_path / "scorecard.ipynb", _published(_claim("fit_rho_real", "reversed")))   # skipped
    assert published.collect(tmp_path) == [a, b]
    verdicts = published.glued_verdicts(tmp_path)
    assert set(verdicts["id"]) == {"fit_rho_real", "left_k_harmbench"}


def test_a_claim_published_by_two_chapters_is_refused(tmp_path):
    _notebook(tmp_path / "02_fit.ipynb", _published(_claim("fit_rho_real")))
    _notebook(tmp_path / "03_ceiling.ipynb", _published(_claim("fit_rho_real")))
    with pytest.raises(ValueError, match="02_fit and 03_ceiling"):
        published.collect(tmp_path)


def test_publish_refuses_missing_and_repeated_ids():
    pytest.importorskip("myst_nb")
    with pytest.raises(ValueError, match="needs an id"):
        published.publish([_claim("")])
    with pytest.raises(ValueError, match="published twice"):
        published.publish([_claim("x"), _claim("x")])


def test_claim_refuses_unknown_verdicts_and_kinds():
    assert _claim("x", verdict="close").verdict == "close"
    with pytest.raises(ValueError, match="verdict"):
        _claim("x", verdict="mostly")
    with pytest.raises(ValueError, match="kind"):
        _claim("x", kind="real-ish")


def test_count_verdict_on_hand_made_counts():
    assert sc.count_verdict([67, 19, 0], [67, 19, 0]) == "reproduced"
    assert sc.count_verdict([66, 19, 0], [67, 19, 0]) == "not reproduced"
    assert sc.count_verdict([60, 19], [67, 19]) == "not reproduced"
    assert sc.count_verdict([], []) == "not testable here"


def test_every_page_shows_the_scorecards_verdict_for_a_claim():
    """In the built book, every verdict any page glued for a claim is the one its chapter published."""
    if not (EXECUTED / "scorecard.ipynb").exists():
        pytest.skip("no executed scorecard: run `make book QUICK=1` first")
    card = {c.id: c.verdict for c in published.collect(EXECUTED)}
    assert card, "the chapters published no claims"
    shown = published.glued_verdicts(EXECUTED)
    unknown = sorted(set(shown["id"]) - set(card))
    assert not unknown, f"pages glue verdicts of claims no chapter published: {unknown}"
    wrong = [(r.notebook, r.id, r.verdict, card[r.id]) for r in shown.itertuples() if r.verdict != card[r.id]]
    assert not wrong, f"pages whose verdict differs from the scorecard's: {wrong}"


def test_the_results_line_of_a_bound_over_several_benchmarks_says_how_many():
    """The results page shows a claim's first clause ("ours"): for a bound judged on several benchmarks that
    clause counts them, so a verdict about all of them never stands beside one benchmark's number alone."""
    if not (EXECUTED / "scorecard.ipynb").exists():
        pytest.skip("no executed scorecard: run `make book QUICK=1` first")
    from irtbook import results

    several = [c for c in published.collect(EXECUTED) if c.rule == "bound" and c.benchmarks > 1]
    assert several, "no bound claim on several benchmarks was published"
    silent = [(c.id, results.ours(c.evidence)) for c in several
              if not re.search(rf"\b{c.benchmarks}\b", results.ours(c.evidence))]
    assert not silent, f"results lines that do not say on how many benchmarks: {silent}"


def test_model_choice_claims_split_by_kind_on_hand_made_gains():
    from types import SimpleNamespace

    from irtbook import paper_claims

    def bench(name, kind):
        return SimpleNamespace(display_name=name, data=SimpleNamespace(kind=kind, label=f"{kind} data"))

    benches = {"x": bench("X", "paper"), "y": bench("Y", "paper"), "z": bench("Z", "simulated"),
               "w": bench("W", "real-subset")}
    out = {c.id: c for c in paper_claims.model_choice_claims(benches, {"x": 0.01, "y": -0.002, "z": 0.03,
                                                                       "w": 0.02})}
    assert set(out) == {"model_2pl_1pl_paper", "model_2pl_1pl_real", "model_2pl_1pl_sim"}
    real, sim = out["model_2pl_1pl_paper"], out["model_2pl_1pl_sim"]
    assert (real.verdict, real.kind, sim.verdict, sim.kind) == ("partly", "paper", "reproduced", "sim")
    assert (out["model_2pl_1pl_real"].verdict, out["model_2pl_1pl_real"].kind) == ("reproduced", "real")
    assert "> 0 on 1 of 2" in real.evidence and "-0.002 (Y)" in real.evidence
    # a gain of exactly zero is not a win: neither of two holds, "not reproduced"
    none = paper_claims.model_choice_claims({k: benches[k] for k in "xy"}, {"x": 0.0, "y": -0.1})
    assert none[0].verdict == "not reproduced"


def test_printed_decimals_follow_the_papers_print():
    from irtlib.datasets import paper

    assert paper.printed_decimals("TABLE2_LEFT[harmbench].fluid") == 2          # 0.90, stored as 0.9
    assert paper.printed_decimals("ITEM_RMSE[anthropic-red-team]") == 3         # 0.008
    assert paper.printed_decimals("SAVINGS[airbench2024_adaptive_at_090]") == 3   # 99.9%
    assert paper.printed_decimals("SAVINGS[abstract_min_where_090_reachable]") == 2   # 80%
    assert paper.printed_decimals("CEILING[anthropic-red-team].above") == 0
    assert paper.printed_decimals("CEILING[anthropic-red-team].example_pair_theta_gap") == 0   # "almost five"


def test_why_note_names_what_the_data_say_and_only_for_a_miss():
    from types import SimpleNamespace

    from irtbook import paper_claims

    def bench(name, kind, label=""):
        return SimpleNamespace(display_name=name, data=SimpleNamespace(kind=kind, label=label))

    air = {"airbench2024": bench("AIR-Bench 2024", "real-subset", "real judgments of 22 of the paper's 82 models")}
    note = paper_claims.why_note("close", air, engine="MAP")
    assert note == ("Possible reasons the data give: it rests on real judgments of 22 of the paper's 82 models, "
                    "not on the paper's matrix; our calibration engine is MAP, not the authors' calibration.")
    # the authors' own calibration is no reason in itself: what differs is the fit the released code lacks
    own = paper_claims.why_note("not reproduced", {"x": bench("X", "paper")},
                                engine="authors' calibration, 1,000 epochs")
    assert "released code calibrates on each split" in own and "engine is" not in own
    assert "never released" in paper_claims.why_note("not reproduced", {"safetybench": bench("SafetyBench",
                                                                                             "simulated")})
    assert paper_claims.why_note("reproduced", air, engine="MAP") == ""
    assert paper_claims.why_note("not reproduced", {"x": bench("X", "paper")}) == ""
    assert paper_claims.kind_of({**air, "x": bench("X", "paper")}) == "mixed"


def test_savings_claims_keep_kinds_apart_and_judge_both_ends_of_a_range():
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from irtbook import paper_claims

    def bench(name, kind):
        return SimpleNamespace(display_name=name, data=SimpleNamespace(kind=kind, label=f"{kind} data"))

    benches = {"anthropic-red-team": bench("Anthropic Red Team", "paper"),
               "simplesafetytests": bench("SimpleSafetyTests", "paper"),
               "safetybench": bench("SafetyBench", "simulated")}
    savings = pd.DataFrame({"adaptive": [0.949, 0.80, np.nan], "best static": [0.95, 0.85, 0.998],
                            "marginal-fisher": [0.93, 0.80, np.nan]}, index=list(benches))
    out = {c.id: c for c in paper_claims.savings_claims(benches, savings)}
    assert out["save_adaptive_paper"].verdict == "reproduced"                 # 80.0% and 94.9%: at least 80%
    assert out["save_static_paper"].evidence == "85.0% to 95.0% on 2 benchmarks"   # SafetyBench's 99.8% not pooled
    assert out["save_body_adaptive_paper"].verdict == "reproduced"            # 94.9% prints as 95%
    assert out["save_body_marginal_fisher_paper"].verdict == "close"          # 93% against "80 to 92%"
    assert out["save_adaptive_sim"].verdict == "not reproduced" and out["save_adaptive_sim"].kind == "sim"
    assert out["save_static_sim"].verdict == "reproduced"
    assert "save_airbench" not in out
