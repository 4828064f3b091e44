"""A wide table turned on its side (irtbook.table_layout): exact text on a hand-made table."""

import pandas as pd
import pytest

from irtbook.table_layout import on_its_side


def test_a_table_on_its_side_keeps_each_measure_format():
    frame = pd.DataFrame({"items": [1200, 3], "kept share": [0.5, 0.25], "same rule": [True, False],
                          "rho": [float("nan"), 0.98765]}, index=pd.Index(["HarmBench", "WMDP-Bio"], name="benchmark"))
    turned = on_its_side(frame, {"items": "{:,}", "kept share": "{:.1%}", "rho": "{:.3f}"}, measure="measure")
    assert list(turned.columns) == ["HarmBench", "WMDP-Bio"]
    assert list(turned.index) == ["items", "kept share", "same rule", "rho"] and turned.index.name == "measure"
    assert turned.to_dict("list") == {"HarmBench": ["1,200", "50.0%", "yes", "-"],
                                      "WMDP-Bio": ["3", "25.0%", "no", "0.988"]}


def test_a_format_for_a_missing_column_is_refused():
    with pytest.raises(KeyError, match="'share'"):
        on_its_side(pd.DataFrame({"items": [1]}), {"share": "{:.1%}"})


def test_without_a_measure_name_the_header_has_one_row():
    html = on_its_side(pd.DataFrame({"items": [1]}, index=pd.Index(["A"], name="benchmark"))).style.to_html()
    assert html.count("<tr>") == 2          # the benchmarks' header and one measure, no empty name row
