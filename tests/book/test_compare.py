import re

import pytest

from irtlib.book.compare import cite, comparison_table, row, style_comparison
from irtlib.datasets import paper


def test_rows_look_up_paper_values_and_judge_tolerance():
    table = comparison_table([
        row("CV of a, WMDP", "FIGURE3_CV[wmdp-bio]", 0.9, tolerance=0.1),
        row("CV of a, SafetyBench", "FIGURE3_CV[safetybench]", 0.8, tolerance=0.1, note="fewer items"),
        row("observations, AIR-Bench", "TABLE1[airbench2024].observations", "466.9k"),
        row("Fluid at k, AIR-Bench", "TABLE2_LEFT[airbench2024].fluid", None, tolerance=0.05),
    ])
    assert table["paper"].tolist() == [0.97, 0.93, "467k", 0.91]
    assert table["difference"].tolist()[:2] == [pytest.approx(-0.07), pytest.approx(-0.13)]
    assert table["within"].tolist() == ["yes", "no", "n/a", "n/a"]
    assert table["ours"].tolist()[3] == "not reached"
    assert table["ref"].tolist()[0] == "FIGURE3_CV[wmdp-bio]"
    assert table["source in the paper"].tolist() == ["Figure 3", "Figure 3", "Table 1", "Table 2, left column"]


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
    rows = set()
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", html):
        if "#fde2e1" in body:
            rows.update(int(r) for r in re.findall(r"_row(\d+)_col\d+", selectors))
    return rows


def test_styled_table_shows_every_row_and_shades_only_misses():
    rows = [row(f"CV {i}", "FIGURE3_CV[wmdp-bio]", 0.97 + (0.5 if i in (3, 41) else 0), tolerance=0.1)
            for i in range(80)]
    html = style_comparison(comparison_table(rows)).to_html()
    assert html.count('title="FIGURE3_CV[wmdp-bio]"') == 80     # no truncation at display.max_rows
    assert shaded_rows(html) == {3, 41}                          # the misses, and nothing else


def rendered_cells(html: str) -> list[list[str]]:
    body = html.split("<tbody>")[1]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)]


def test_numbers_are_rendered_like_a_paper():
    table = comparison_table([
        row("CV of a, WMDP", "FIGURE3_CV[wmdp-bio]", 0.123456, tolerance=0.1),
        row("RMSE, HarmBench", "ITEM_RMSE[harmbench]", 0.001, tolerance=0.01),
        row("items, AIR-Bench", "TABLE1[airbench2024].items", 1234, tolerance=100),
        row("left k/N, AIR-Bench", "TABLE2_LEFT[airbench2024].k_over_n", 0.001),
        row("saving, AIR-Bench", "SAVINGS[airbench2024_adaptive_at_090]", 0.9994, tolerance=0.01),
        row("left k/N, SafetyBench", "TABLE2_LEFT[safetybench].k_over_n", "27.1%", note="a <b> & c"),
        row("Fluid, AIR-Bench", "TABLE2_LEFT[airbench2024].fluid", None, tolerance=0.05),
    ])
    html = style_comparison(table).to_html()
    cells = rendered_cells(html)
    header = re.findall(r"<th[^>]*>(.*?)</th>", html.split("<tbody>")[0])
    assert header == ["quantity", "paper", "ours", "difference", "tolerance", "within", "note", "source in the paper"]
    assert cells == [
        ["CV of a, WMDP", "0.97", "0.123", "-0.847", "0.1", "no", "", "Figure 3"],
        ["RMSE, HarmBench", "0.016", "0.001", "-0.015", "0.01", "no", "", "Appendix E"],
        ["items, AIR-Bench", "5,694", "1,234", "-4,460", "100", "no", "", "Table 1"],
        ["left k/N, AIR-Bench", "0.1%", "0.1%", "", "", "n/a", "", "Table 2, left column"],
        ["saving, AIR-Bench", "99.9%", "99.9%", "0.0%", "1.0%", "yes", "", "Results, savings (body)"],
        ["left k/N, SafetyBench", "&gt; 26%", "27.1%", "", "", "n/a", "a &lt;b&gt; &amp; c", "Table 2, left column"],
        ["Fluid, AIR-Bench", "0.91", "not reached", "", "0.05", "n/a", "", "Table 2, left column"],
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
