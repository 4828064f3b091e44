"""The page of results (irtbook.results) and the chapters' CSV downloads (irtbook.downloads)."""

from __future__ import annotations

import pandas as pd
import pytest

from irtbook import downloads, results
from irtbook import scorecard as sc

ENGINE_NOTE = "Possible reasons the data give: our calibration engine is MAP engine, not the authors' calibration."
SUBSET_NOTE = ("Possible reasons the data give: it rests on real AIR-Bench 2024 judgments, 22 of the paper's 82 "
               "models, not on the paper's matrix.")


def _claims():
    return [
        sc.Claim("HarmBench: Fluid's agreement at k = 20 is 0.90", "Table 2, left column", "paper",
                 "ours 0.873 (95% Monte Carlo interval over splits [0.85, 0.89]), at the nearest swept k = 25",
                 "{ref}`ch-table2`", "not reproduced", "value", id="t2_hb", kind="paper", note=ENGINE_NOTE),
        sc.Claim("WMDP-Bio: CV of a 0.97", "Figure 3", "paper", "ours 0.968 (MAP engine)", "{ref}`ch-disc`",
                 "reproduced", "value", id="cv_wmdp", kind="paper",
                 difference=sc.difference_text(0.968, 0.97, places=3)),
        sc.Claim("HarmBench: Fluid first reaches 0.90 at k = 20", "Table 2, left column", "paper",
                 "our k: 25 (+1 grid steps); bootstrap over splits: [20, 31]", "{ref}`ch-table2`", "close",
                 "budget", id="left_k_hb", kind="paper"),
        sc.Claim("Adaptive selection leads at small k (AIR-Bench 2024)", "Figure 4", "real AIR-Bench",
                 "at k = 6, Fluid minus random: +0.020 [-0.010, +0.050]", "{ref}`ch-selection`", "partly",
                 "direction", id="air_lead", kind="real", note=SUBSET_NOTE),
        sc.Claim("CV of a per benchmark (Figure 3)", "Figure 3", "sim", "CVs were generation targets",
                 "{ref}`ch-disc`", "not testable here", "construction", id="cv_sim", kind="sim"),
    ]


def test_each_claim_is_one_line_with_the_published_verdict_ours_and_the_rules_reason():
    frame = results.results_frame(_claims())
    assert frame["verdict"].tolist() == [c.verdict for c in _claims()]       # never recomputed
    assert frame["ours"].tolist()[:3] == ["0.873, at the nearest swept k = 25", "0.968 (MAP engine)",
                                          "our k: 25 (+1 grid steps)"]
    assert frame["why"].tolist() == [
        "more than 2 units of the last printed decimal away; another calibration engine than the authors'",
        "prints as the paper's number", "one step of the authors' budget grid away",
        "ahead in the mean, within the split-to-split noise; rests on a subset of the paper's models",
        "the simulated release was generated to match it"]
    table = results.results_markdown(frame[frame["kind"] == "paper"])
    lines = table.splitlines()
    assert len(lines) == 2 + 3 and lines[0].startswith("| the paper's claim | ours | verdict | why | shown in |")
    assert lines[2].endswith("| {ref}`ch-table2` |")
    assert "| data |" in results.results_markdown(frame, with_data=True).splitlines()[0]
    # a value claim shows ours minus the paper's beside ours; the others show nothing invented
    assert frame["difference"].tolist() == ["", "-0.002", "", "", ""]
    assert "| 0.968 (MAP engine); -0.002 against the paper |" in lines[3]


def test_ours_keeps_a_parenthesised_aside_whole_and_stops_at_the_next_clause():
    evidence = ("AIR-Bench 2024 (real, 22 models): 0 of 22 at or above 0.95 (paper 0; 0 strictly above); "
                "WMDP (Bio): 0 of 29 at or above 0.95 (paper 0; 0 strictly above)")
    first = "AIR-Bench 2024 (real, 22 models): 0 of 22 at or above 0.95 (paper 0; 0 strictly above)"
    assert results.ours(evidence) == first
    assert results.ours("ours 0.5 (a; b (c; d)); e") == "0.5 (a; b (c; d))"


def test_a_table_with_a_data_column_leaves_the_data_limits_out_of_why_and_keeps_the_others():
    frame = results.results_frame(_claims())
    with_data = results.results_markdown(frame, with_data=True).splitlines()
    row = next(line for line in with_data if "Adaptive selection leads" in line)
    assert "| ahead in the mean, within the split-to-split noise |" in row
    assert "rests on a subset" not in row
    engine = next(line for line in with_data if "Fluid's agreement at k = 20" in line)
    assert "another calibration engine than the authors'" in engine
    # without the data column the limit stays, and the counts read the frame either way
    assert "rests on a subset of the paper's models" in results.results_markdown(frame)
    assert results.limit_counts(frame)["subset"] == 1


def test_a_bound_judged_on_one_benchmark_says_so_and_on_several_keeps_the_rules_words():
    def bound(verdict, n):
        return sc.Claim("Fluid reaches 0.90 saving at least 80% of the items", "Abstract", "PandaGuard",
                        "saves 65%", "{ref}`ch-pandaguard`", verdict, "bound", id="b", kind="real", benchmarks=n)

    assert results.reason(bound("not reproduced", 1)) == "fails on the one benchmark tested"
    assert results.reason(bound("reproduced", 1)) == "holds on the one benchmark tested"
    assert results.reason(bound("not reproduced", 4)) == "fails on more than half of the benchmarks"
    assert results.reason(bound("not reproduced", 0)) == "fails on more than half of the benchmarks"   # not said
    assert results.results_frame([bound("not reproduced", 1)])["why"].tolist() == ["fails on the one benchmark tested"]


def test_every_rule_and_verdict_pair_a_claim_can_take_has_a_reason():
    allowed = {"value": ["reproduced", "close", "not reproduced"], "budget": ["reproduced", "close", "not reproduced",
               "not testable here"], "count": ["reproduced", "not reproduced"],
               "bound": ["reproduced", "close", "partly", "not reproduced", "not testable here"],
               "direction": ["reproduced", "partly", "not reproduced", "reversed", "not testable here"],
               "match": ["reproduced", "close", "not reproduced", "not testable here"],
               "correlation": ["reproduced", "partly", "not reproduced", "reversed", "not testable here"],
               "construction": ["not testable here"]}
    assert set(allowed) == set(sc.RULES)
    assert {(rule, v) for rule, vs in allowed.items() for v in vs} == set(results.REASONS)


def test_limits_count_the_claims_each_limit_may_explain():
    counts = results.limit_counts(results.results_frame(_claims()))
    assert counts == {"subset": 1, "unreleased": 0, "training": 0, "engine": 1}


def test_what_a_chapter_found_agrees_with_its_verdicts():
    text = results.found_sentences(_claims())
    assert text.startswith("On the paper's data this chapter tested 3 of its claims: 1 reproduced, 1 close and "
                           "1 not reproduced or reversed.")
    assert "Those that did not reproduce: HarmBench: Fluid's agreement at k = 20 is 0.90 (not reproduced:" in text
    assert text.endswith("On other real data and the simulated release, 2 claims: 1 partly and 1 not testable here.")
    assert results.found_sentences(_claims()[1:2]) == ("On the paper's data this chapter tested 1 of its claims: "
                                                       "1 reproduced. None of them failed outright (not reproduced "
                                                       "or reversed).")
    # nothing failed: the claims that held only in part or were close are named, with the reason
    assert results.found_sentences(_claims()[1:3]).endswith(
        "None failed outright; not fully reproduced: HarmBench: Fluid first reaches 0.90 at k = 20 "
        "(close: one step of the authors' budget grid away).")
    # a failure on other data is named after that data's counts
    failed = sc.Claim("Random wins on SafetyBench", "Appendix F", "sim", "ours -0.1", "{ref}`ch-selection`",
                      "not reproduced", "direction", id="sb", kind="sim")
    assert results.found_sentences([failed]) == ("On the simulated release, 1 claim: 1 not reproduced or reversed; "
                                                  "not reproduced there: Random wins on SafetyBench (not reproduced: "
                                                  "not ahead in the mean, within the noise).")


def test_downloads_are_written_to_the_build_and_linked(tmp_path, monkeypatch):
    monkeypatch.setenv(downloads.ENV, str(tmp_path))
    frame = pd.DataFrame({"k": [1, 2], "mean": [0.5, 0.75]})
    d = downloads.write(frame, "agreement_curves", chapter="05_selection", description="one row per  budget.")
    assert pd.read_csv(tmp_path / "05_selection" / "agreement_curves.csv").equals(frame)
    assert downloads.markdown([d]) == ("- {download}`agreement_curves.csv </book_downloads/05_selection/"
                                       "agreement_curves.csv>` (2 rows): one row per budget.")
    with pytest.raises(ValueError, match="lower-case"):
        downloads.write(frame, "../escape", chapter="05_selection", description="x")


def test_item_parameters_table_names_benchmark_engine_and_data():
    class Cal:
        a = pd.Series([1.0, 2.0], index=["i1", "i2"])
        b = pd.Series([0.5, -0.5], index=["i2", "i1"])        # another order: matched by item

    class Data:
        label = "the paper's data"

    class Bench:
        display_name, data = "HarmBench", Data()

    table = downloads.item_parameters({"harmbench": Cal()}, {"harmbench": Bench()}, engine="MAP engine")
    assert table.to_dict("list") == {"benchmark": ["HarmBench"] * 2, "item": ["i1", "i2"], "a": [1.0, 2.0],
                                     "b": [-0.5, 0.5], "engine": ["MAP engine"] * 2, "data": ["the paper's data"] * 2}
