import pytest

from irtlib.book import paper
from irtlib.book.compare import comparison_table, row


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
    assert table["paper ref"].tolist()[0] == "FIGURE3_CV[wmdp-bio]"


def test_unknown_reference_is_an_error():
    with pytest.raises(KeyError, match="no paper number"):
        row("x", "FIGURE3_CV[nope]", 1.0)


def test_numbers_cover_every_reported_table():
    refs = paper.numbers()
    assert refs["TABLE2_LEFT[safetybench].others.disco"] == 0.91
    assert refs["CEILING[anthropic-red-team].theta_range_above.1"] == 6.06
    assert refs["TABLE2_RIGHT[simplesafetytests].k_over_n"] == "63%"
    assert {r.split("[")[0] for r in refs} == set(paper.REPORTED)


def test_styled_table_shows_every_row_and_shades_misses():
    from irtlib.book.compare import style_comparison

    rows = [row(f"CV {i}", "FIGURE3_CV[wmdp-bio]", 0.97 + (0.5 if i == 3 else 0), tolerance=0.1) for i in range(80)]
    html = style_comparison(comparison_table(rows)).to_html()
    assert html.count("FIGURE3_CV[wmdp-bio]") == 80            # no truncation at display.max_rows
    assert html.count("#fde2e1") >= 1
