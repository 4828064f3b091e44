import re

import pytest

from irtbook.compare import cite, comparison_table, judge, row, style_comparison, tally
from irtlib.datasets import paper


def test_rows_are_judged_by_the_scorecards_rules_at_the_printed_decimals():
    table = comparison_table([
        row("CV of a, WMDP", "FIGURE3_CV[wmdp-bio]", 0.965),                       # prints as 0.97
        row("CV of a, SafetyBench", "FIGURE3_CV[safetybench]", 0.91, note="fewer items"),   # 0.02 off
        row("CV of a, AIR-Bench", "FIGURE3_CV[airbench2024]", 0.86),               # 0.06 off
        row("observations, AIR-Bench", "TABLE1[airbench2024].observations", "466.9k"),
        row("Fluid at k, AIR-Bench", "TABLE2_LEFT[airbench2024].fluid", None),
        row("models, HarmBench", "TABLE1[harmbench].models", 76),
        row("RMSE, HarmBench", "ITEM_RMSE[harmbench]", 0.0164),                    # three decimals: 0.016
        row("CV by eye", "FIGURE3_CV[harmbench]", 0.2, judged=False),
        row("a claim's row", "SPEARMAN_THETA_SCORE[min]", 0.99, verdict="reproduced"),
    ])
    assert table["paper"].tolist()[:5] == [0.97, 0.93, 0.92, "467k", 0.91]
    assert table["difference"].tolist()[:2] == [pytest.approx(-0.005), pytest.approx(-0.02)]
    assert table["verdict"].tolist() == ["reproduced", "close", "not reproduced", "n/a", "not reproduced",
                                         "not reproduced", "reproduced", "n/a", "reproduced"]
    assert "within" not in table.columns and "tolerance" not in table.columns
    assert table["ours"].tolist()[4] == "not reached"
    assert table["ref"].tolist()[0] == "FIGURE3_CV[wmdp-bio]"
    assert table["source in the paper"].tolist()[:5] == ["Figure 3", "Figure 3", "Figure 3", "Table 1",
                                                         "Table 2, left column"]
    assert tally(table) == {"judged": 7, "reproduced": 3, "close": 1, "partly": 0, "not reproduced": 3,
                            "reversed": 0, "not testable here": 0}


def test_a_row_refuses_a_verdict_outside_the_scorecards_words():
    with pytest.raises(ValueError, match="verdict 'yes'"):
        row("x", "FIGURE3_CV[wmdp-bio]", 0.97, verdict="yes")


def test_the_example_pairs_gap_is_judged_in_whole_units_with_the_claims_band():
    ref = "CEILING[anthropic-red-team].example_pair_theta_gap"
    assert [judge(ref, x) for x in (4.6, 4.2, 3.9)] == ["reproduced", "close", "not reproduced"]


def test_unknown_reference_is_an_error():
    with pytest.raises(KeyError, match="no paper number"):
        row("x", "FIGURE3_CV[nope]", 1.0)


def test_numbers_cover_every_reported_table():
    refs = paper.numbers()
    assert refs["TABLE2_LEFT[safetybench].others.disco"] == 0.91
    assert refs["CEILING[anthropic-red-team].theta_range_above.1"] == 6.06
    assert refs["TABLE2_RIGHT[simplesafetytests].k_over_n"] == "63%"
    assert {r.split("[")[0] for r in refs} == set(paper.REPORTED)


def shaded_rows(html: str) -> set[int]:
    """Rows whose cells carry the miss colour in the Styler's CSS."""
    # the rules of the <style> element only: the same pattern over the whole page backtracks
    # quadratically through the brace-free table (30 s for 80 rows)
    rows = set()
    css = "".join(re.findall(r"<style[^>]*>(.*?)</style>", html, flags=re.S))
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        if "#fde2e1" in body:
            rows.update(int(r) for r in re.findall(r"_row(\d+)_col\d+", selectors))
    return rows


def test_styled_table_shows_every_row_and_shades_only_misses():
    rows = [row(f"CV {i}", "FIGURE3_CV[wmdp-bio]", 0.97 + (0.5 if i in (3, 41) else 0)) for i in range(80)]
    html = style_comparison(comparison_table(rows)).to_html()
    assert html.count('title="FIGURE3_CV[wmdp-bio]"') == 80     # no truncation at display.max_rows
    assert shaded_rows(html) == {3, 41}                          # the misses, and nothing else


def rendered_cells(html: str) -> list[list[str]]:
    body = html.split("<tbody>")[1]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)]


def test_numbers_are_rendered_like_a_paper():
    table = comparison_table([
        row("CV of a, WMDP", "FIGURE3_CV[wmdp-bio]", 0.123456),
        row("RMSE, HarmBench", "ITEM_RMSE[harmbench]", 0.001),
        row("items, AIR-Bench", "TABLE1[airbench2024].items", 1234),
        row("left k/N, AIR-Bench", "TABLE2_LEFT[airbench2024].k_over_n", 0.001),
        row("saving, AIR-Bench", "SAVINGS[airbench2024_adaptive_at_090]", 0.9994),
        row("left k/N, SafetyBench", "TABLE2_LEFT[safetybench].k_over_n", "27.1%", note="a <b> & c"),
        row("Fluid, AIR-Bench", "TABLE2_LEFT[airbench2024].fluid", None),
    ])
    html = style_comparison(table).to_html()
    cells = rendered_cells(html)
    header = re.findall(r"<th[^>]*>(.*?)</th>", html.split("<tbody>")[0])
    assert header == ["quantity", "paper", "ours", "difference", "verdict", "note", "source in the paper"]
    assert cells == [
        ["CV of a, WMDP", "0.97", "0.123", "-0.847", "not reproduced", "", "Figure 3"],
        ["RMSE, HarmBench", "0.016", "0.001", "-0.015", "not reproduced", "", "Appendix E"],
        ["items, AIR-Bench", "5,694", "1,234", "-4,460", "not reproduced", "", "Table 1"],
        ["left k/N, AIR-Bench", "0.1%", "0.1%", "", "n/a", "", "Table 2, left column"],
        ["saving, AIR-Bench", "99.9%", "99.9%", "0.0%", "reproduced", "", "Results, savings (body)"],
        ["left k/N, SafetyBench", "&gt; 26%", "27.1%", "", "n/a", "a &lt;b&gt; &amp; c", "Table 2, left column"],
        ["Fluid, AIR-Bench", "0.91", "not reached", "", "not reproduced", "", "Table 2, left column"],
    ]
    # no number anywhere with more than three decimals
    text = " ".join(c for r in cells for c in r)
    assert not re.search(r"\d\.\d{4,}", text)
    # the raw reference is hidden from the reader but kept as the cell's tooltip
    assert "TABLE2_LEFT[airbench2024].fluid" not in text
    assert 'title="TABLE2_LEFT[airbench2024].fluid"' in html


def test_style_takes_a_caption():
    html = style_comparison(comparison_table([row("CV", "FIGURE3_CV[wmdp-bio]", 0.9)]), caption="Chapter 4").to_html()
    assert "<caption>Chapter 4</caption>" in html


def test_citations_read_like_a_paper():
    assert cite("TABLE2_LEFT[airbench2024].fluid") == "Table 2, left column"
    assert cite("TABLE2_RIGHT[harmbench].values.fluid") == "Table 2, right column"
    assert cite("FIGURE3_CV[wmdp-bio]") == "Figure 3"
    assert cite("ITEM_RMSE[harmbench]") == "Appendix E"
    assert cite("SPEARMAN_THETA_SCORE[min]") == "Figure 2"
    assert cite("CEILING[anthropic-red-team].above") == "Ceiling separation (Results)"
    assert cite("TABLE1[wmdp-bio].observations") == "Table 1"
    assert cite("SAFETYBENCH_APPENDIX_F[k_small]") == "Appendix F"
    assert cite("SAVINGS[abstract_static_range].0") == "Abstract (savings)"
    assert cite("SAVINGS[body_adaptive_range_excl_harmbench].1") == "Results, savings (body)"
    assert cite("VARIANCE_FILTER[max_variance_dropped]") == "Binarization (Method)"
    with pytest.raises(KeyError):
        cite("NOPE[x]")


def test_every_paper_number_cites_its_place():
    for ref in paper.numbers():
        text = cite(ref)
        assert text and "[" not in text and "_" not in text, ref


def test_compared_refs_are_found_in_the_rendered_table():
    """tests/book/test_book_content.py finds the compared references in the notebooks' HTML this way."""
    refs = ["TABLE2_LEFT[airbench2024].fluid", "CEILING[anthropic-red-team].theta_range_above.1",
            "SAVINGS[abstract_static_range].0"]
    html = style_comparison(comparison_table([row(r, r, 0.5) for r in refs])).to_html()
    assert set(refs) <= set(re.findall(r"[A-Z0-9_]+\[[^\]]+\][\w.\-]*", html))
