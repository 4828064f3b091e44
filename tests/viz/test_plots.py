"""The book's figures: readable agreement curves, theta on the same axis everywhere."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from irtlib.viz import figures as plots
from irtlib.viz.figures import METHOD_STYLE, THETA_LABEL

KS = [1, 2, 5, 10, 20, 50, 100, 200]


def fake_results(methods=tuple(METHOD_STYLE), n_splits=4, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i, m in enumerate(methods):
        for s in range(n_splits):
            for k in KS:
                rows.append({"split": s, "method": m, "k": k,
                             "agreement": min(1.0, 0.3 + 0.1 * np.log(k) + 0.01 * i + 0.05 * rng.standard_normal())})
    return pd.DataFrame(rows)


def drawn(fig):
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def method_lines(ax):
    labels = {st.label for st in METHOD_STYLE.values()}
    return {line.get_label(): line for line in ax.get_lines() if line.get_label() in labels}


def test_every_method_has_its_own_colour_and_line():
    ax = drawn(plots.agreement_curves(fake_results())).axes[0]
    lines = method_lines(ax)
    assert len(lines) == 8
    colours = [mcolors.to_hex(line.get_color()) for line in lines.values()]
    assert len(set(colours)) == 8
    assert len({(c, line.get_linestyle()) for c, line in zip(colours, lines.values(), strict=False)}) == 8
    # distinguishable in greyscale too: every (line style, marker) pair is different
    assert len({(line.get_linestyle(), line.get_marker()) for line in lines.values()}) == 8
    widths = {label: line.get_linewidth() for label, line in lines.items()}
    assert widths["Fluid Benchmarking"] > max(w for label, w in widths.items() if label != "Fluid Benchmarking")


def test_only_fluid_and_random_are_shaded():
    ax = drawn(plots.agreement_curves(fake_results())).axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2
    band_colours = {mcolors.to_hex(c.get_facecolor()[0], keep_alpha=False) for c in bands}
    assert band_colours == {METHOD_STYLE["fluid"].colour.lower(), METHOD_STYLE["random"].colour.lower()}
    ax = drawn(plots.agreement_curves(fake_results(), band="none")).axes[0]
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_the_band_follows_the_protocol_the_results_record():
    """The authors' protocol shades +-1 SE over the splits with a defined rho; the text's +-1 SD."""
    res = fake_results(n_splits=9)
    res.loc[(res["method"] == "fluid") & (res["split"] == 0), "agreement"] = np.nan     # one undefined split
    res.attrs.update({"band": "se", "nan_policy": "omit"})

    def fluid_band(fig):
        ax = drawn(fig).axes[0]
        band = next(c for c in ax.collections if isinstance(c, PolyCollection)
                    and mcolors.to_hex(c.get_facecolor()[0], keep_alpha=False) == METHOD_STYLE["fluid"].colour.lower())
        y = band.get_paths()[0].vertices[:, 1]
        return y.max() - y.min(), band.get_label()

    fluid = res[res["method"] == "fluid"].dropna().groupby("k")["agreement"]
    at_200 = fluid.get_group(200)                                   # 8 defined splits
    width_se, label_se = fluid_band(plots.agreement_curves(res, methods=["fluid", "random"], threshold=None))
    assert "SE" in label_se
    sd_res = res.copy()
    sd_res.attrs.update({"band": "sd"})
    width_sd, label_sd = fluid_band(plots.agreement_curves(sd_res, methods=["fluid", "random"], threshold=None))
    assert "SD" in label_sd
    # the band's vertical extent spans every k; at the largest k the half widths are SE = SD / sqrt(8) and SD
    assert width_se < width_sd
    ax = drawn(plots.agreement_curves(res, methods=["fluid"], threshold=None)).axes[0]
    verts = next(c for c in ax.collections if isinstance(c, PolyCollection)).get_paths()[0].vertices
    top = verts[np.isclose(verts[:, 0], 200)][:, 1]
    np.testing.assert_allclose(top.max() - top.min(), 2 * at_200.std(ddof=1) / np.sqrt(at_200.size), rtol=1e-9)
    with pytest.raises(ValueError, match="band"):
        plots.agreement_curves(res, band="iqr")


def test_k_axis_reads_plain_numbers():
    for fig in (plots.agreement_curves(fake_results()),
                plots.agreement_grid({"A": fake_results(), "B": fake_results(seed=1)})):
        drawn(fig)
        for ax in (a for a in fig.axes if a.get_visible()):
            assert ax.get_xscale() == "log"
            lo, hi = ax.get_xlim()
            shown = [t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi]
            assert {"1", "10", "100"} <= set(shown)
            assert all("$" not in t and "^" not in t for t in shown)


def test_threshold_and_ceiling_lines_are_labelled():
    ax = drawn(plots.agreement_curves(fake_results())).axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(lab.startswith("0.9 agreement") for lab in labels)
    assert not any(lab.startswith("IRT ceiling") for lab in labels)

    ax = drawn(plots.agreement_curves(fake_results(), ceiling=0.97)).axes[0]
    ceiling = [line for line in ax.get_lines() if line.get_label().startswith("IRT ceiling")]
    assert len(ceiling) == 1 and np.allclose(ceiling[0].get_ydata(), 0.97)
    legend_texts = [t.get_text() for leg in ax.figure.legends for t in leg.get_texts()]
    assert any(t.startswith("IRT ceiling") for t in legend_texts)
    assert any(t.startswith("0.9 agreement") for t in legend_texts)

    fig = drawn(plots.agreement_grid({"A": fake_results(), "B": fake_results(seed=1)}, ceiling={"B": 0.95}))
    per_panel = [[line for line in ax.get_lines() if line.get_label().startswith("IRT ceiling")]
                 for ax in fig.axes[:2]]
    assert len(per_panel[0]) == 0 and len(per_panel[1]) == 1
    assert np.allclose(per_panel[1][0].get_ydata(), 0.95)


def test_legend_sits_outside_the_axes():
    for fig in (plots.agreement_curves(fake_results()),
                plots.agreement_grid({"A": fake_results(), "B": fake_results(seed=1), "C": fake_results(seed=2)})):
        drawn(fig)
        renderer = fig.canvas.get_renderer()
        assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
        legend_box = fig.legends[0].get_window_extent(renderer)
        for ax in (a for a in fig.axes if a.get_visible()):
            assert not legend_box.overlaps(ax.get_window_extent(renderer))


def panels():
    idx = [f"m{i}" for i in range(12)]
    theta = pd.Series(np.linspace(-2, 5, 12), index=idx)
    score = pd.Series(1 / (1 + np.exp(-theta.to_numpy() - 1)), index=idx)
    return {"bench": (theta, score)}


@pytest.mark.parametrize("make", [plots.theta_vs_score, plots.ceiling_separation])
def test_theta_is_on_the_x_axis_in_both_theta_figures(make):
    p = panels()
    ax = drawn(make(p)).axes[0]
    assert ax.get_xlabel() == THETA_LABEL == r"fitted ability $\hat\theta$"
    assert ax.get_ylabel() == "safety score"
    theta, score = p["bench"]
    xs = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    ys = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections])
    assert sorted(xs) == pytest.approx(sorted(theta)) and sorted(ys) == pytest.approx(sorted(score))


def test_figures_are_built_without_pyplot():
    figs = [plots.theta_vs_score(panels()), plots.ceiling_separation(panels()),
            plots.agreement_curves(fake_results()), plots.agreement_grid({"A": fake_results()}),
            plots.discrimination_spread({"A": np.array([0.5, 1.0, 2.0]), "B": np.array([1.0, 1.1, 0.9])}),
            plots.item_fit_scatter({"A": pd.DataFrame({"observed": [0.2, 0.8], "expected": [0.25, 0.75],
                                                       "residual": [-0.05, 0.05]})})]
    assert all(type(f) is Figure for f in figs)
    for f in figs:
        drawn(f)
    assert not hasattr(plots, "engine_comparison")
