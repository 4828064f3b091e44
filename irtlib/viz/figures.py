"""Figures of the book (and of ``irtlib report``), one function per figure.

Each returns a matplotlib ``Figure`` so a chapter can glue it. Figures are made without pyplot, so they are
never shown twice in a notebook and never depend on a display (a notebook that glues them runs
``%matplotlib inline`` first, so that IPython knows how to render a figure as PNG).

Paper, section "Figures": Figure 2 (theta against safety score), Figure 3 (distribution of a
with its CV), Figure 4 and appendix F (agreement against budget k; shading = 1 SD over splits, drawn
for Fluid and Random only). The fitted ability theta is on the x axis wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from irtlib.core.stats import spearman
from irtlib.errors import InputError
from irtlib.fit.summaries import CEILING, coefficient_of_variation
from irtlib.selection.methods import METHOD_IDS, REGISTRY

__all__ = [
    "METHOD_STYLE", "MethodStyle", "THETA_LABEL", "theta_vs_score", "item_fit_scatter", "ceiling_separation",
    "discrimination_spread", "agreement_curves", "agreement_grid",
]

#: Axis label of the fitted ability, identical in every figure that shows it (always on the x axis).
THETA_LABEL = r"fitted ability $\hat\theta$"
SCORE_LABEL = "safety score"


class MethodStyle(NamedTuple):
    """How one selection method is drawn in every agreement figure."""

    label: str
    colour: str
    linestyle: str
    marker: str
    linewidth: float = 1.4
    band: bool = False          # draw the spread over splits (only for Fluid and Random: more is unreadable)


#: Style of every selection method (shared by all agreement figures; labels from
#: :mod:`irtlib.selection.methods`). Colours are the Okabe-Ito
#: colour-blind-safe palette (its grey in place of its yellow, which is unreadable on white);
#: every method also has its own (line style, marker) pair, so the curves stay apart in greyscale.
METHOD_STYLE = {method: MethodStyle(REGISTRY[method].name, *style) for method, style in {
    "fluid": ("#D55E00", "-", "o", 2.8, True),
    "random": ("#000000", "--", "", 1.6, True),
    "random-irt": ("#999999", ":", "x"),
    "total-fisher": ("#0072B2", "-.", "s"),
    "marginal-fisher": ("#009E73", "-", "^"),
    "marginal-fisher-bq": ("#56B4E9", "--", "v"),
    "anchor-points": ("#CC79A7", ":", "D"),
    "disco": ("#E69F00", "-.", "P"),
}.items()}
assert tuple(METHOD_STYLE) == METHOD_IDS, "every method of the registry needs a style"


def _grid(n: int, *, ncols: int = 3, size=(3.6, 3.0)):
    ncols = max(1, min(ncols, n))
    nrows = max(1, int(np.ceil(n / ncols)))
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def theta_vs_score(panels: Mapping[str, tuple[pd.Series, pd.Series]], *, ncols: int = 3) -> Figure:
    """Figure 2: safety score against fitted ability, one point per model, one panel per benchmark.

    The fitted ability is on the x axis, as in :func:`ceiling_separation`.

    Parameters
    ----------
    panels : mapping of title -> (theta, safety_score)
        Two Series indexed by model (aligned by label).
    """
    fig, axes = _grid(len(panels), ncols=ncols)
    for ax, (title, (theta, score)) in zip(axes, panels.items(), strict=False):
        score = score.reindex(theta.index)
        rho = spearman(theta.to_numpy(dtype=float), score.to_numpy(dtype=float))
        ax.scatter(theta, score, s=14, alpha=0.8, color="#0072B2", edgecolor="none")
        ax.set_title(f"{title}\nSpearman $\\rho$ = {rho:.3f}", fontsize=10)
        ax.set_xlabel(THETA_LABEL)
        ax.set_ylabel(SCORE_LABEL)
    return fig


def item_fit_scatter(fits: Mapping[str, pd.DataFrame], *, ncols: int = 3) -> Figure:
    """Observed against model-implied item safe rates (appendix E), one panel per benchmark.

    Parameters
    ----------
    fits : mapping of title -> DataFrame
        Output of :func:`irtlib.item_rates` (columns ``observed``, ``expected`` and ``residual``).
    """
    fig, axes = _grid(len(fits), ncols=ncols)
    for ax, (title, df) in zip(axes, fits.items(), strict=False):
        rmse = float(np.sqrt(np.mean(df["residual"] ** 2)))
        ax.scatter(df["expected"], df["observed"], s=4, alpha=0.4, edgecolor="none")
        ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
        ax.set_title(f"{title}\nitem RMSE = {rmse:.3f}", fontsize=10)
        ax.set_xlabel("model-implied safe rate")
        ax.set_ylabel("observed safe rate")
    return fig


def ceiling_separation(panels: Mapping[str, tuple[pd.Series, pd.Series]], *, ceiling: float = CEILING,
                       ncols: int = 3) -> Figure:
    """Models above the ceiling spread out in theta: safety score against fitted ability, ceiling marked.

    The fitted ability is on the x axis, as in :func:`theta_vs_score`.

    Parameters
    ----------
    panels : mapping of title -> (theta, safety_score)
    """
    fig, axes = _grid(len(panels), ncols=ncols)
    for ax, (title, (theta, score)) in zip(axes, panels.items(), strict=False):
        score = score.reindex(theta.index)
        above = score > ceiling
        ax.scatter(theta[~above], score[~above], s=14, color="#999999", marker="o", label=f"$\\leq$ {ceiling}")
        ax.scatter(theta[above], score[above], s=16, color="#D55E00", marker="^",
                   label=f"> {ceiling} ({int(above.sum())})")
        ax.axhline(ceiling, color="k", lw=0.8, ls=":")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(THETA_LABEL)
        ax.set_ylabel(SCORE_LABEL)
        ax.legend(fontsize=8, loc="lower right")     # scores rise with theta: the lower right is empty
    return fig


def discrimination_spread(a_by_benchmark: Mapping[str, np.ndarray]) -> Figure:
    """Figure 3: distribution of the discrimination a per benchmark, labelled with its CV.

    Parameters
    ----------
    a_by_benchmark : mapping of title -> array of a
        Drawn in the given order (sort by CV first to reproduce the paper's layout).
    """
    names = list(a_by_benchmark)
    fig = Figure(figsize=(8, 0.75 * len(names) + 1.2), layout="constrained")
    ax = fig.subplots()
    data = [np.log10(np.asarray(a_by_benchmark[n], dtype=float)) for n in names]
    parts = ax.violinplot(data, orientation="horizontal", showmedians=True, widths=0.8)
    for body in parts["bodies"]:
        body.set_alpha(0.6)
    ax.set_yticks(range(1, len(names) + 1))
    ax.set_yticklabels([f"{n}\nCV = {coefficient_of_variation(a_by_benchmark[n]):.2f}" for n in names], fontsize=9)
    ticks = np.array([0.1, 0.3, 1, 3, 10])
    ax.set_xticks(np.log10(ticks))
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.set_xlabel("discrimination $a$ (log scale)")
    return fig


def _plain_log_axis(axis):
    """A log-scaled axis labelled 1, 10, 100, 1000 (plain numbers, not powers of ten)."""
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _curves(ax, summary: pd.DataFrame, methods, *, band: str, threshold: float | None, ceiling: float | None):
    for method in methods:
        rows = summary[summary["method"] == method].sort_values("k")
        if rows.empty:
            continue
        st = METHOD_STYLE.get(method, MethodStyle(method, "#333333", "-", ""))
        ax.plot(rows["k"], rows["mean"], color=st.colour, linestyle=st.linestyle, marker=st.marker or None,
                markersize=4, lw=st.linewidth, label=st.label, zorder=3 if method == "fluid" else 2)
        if band in ("sd", "se") and st.band:
            width = rows["sd"] if band == "sd" else rows["se"]
            what = "1 SD over splits" if band == "sd" else "1 SE of the mean over splits"
            ax.fill_between(rows["k"], rows["mean"] - width, rows["mean"] + width, color=st.colour,
                            alpha=0.15, lw=0, label=f"{st.label} $\\pm$ {what}")
    if threshold is not None:
        ax.axhline(threshold, color="k", lw=0.8, ls=(0, (1, 2)), label=f"{threshold:g} agreement target")
    if ceiling is not None:
        # one legend entry for every panel's ceiling; each panel prints its own value at the line's end
        ax.axhline(ceiling, color="#6a3d9a", lw=1.0, ls=(0, (6, 2, 1, 2)), label="IRT ceiling (its value at the right)")
        ax.annotate(f"{ceiling:.2f}", xy=(1.0, ceiling), xycoords=("axes fraction", "data"), xytext=(2, 0),
                    textcoords="offset points", va="center", ha="left", fontsize=7, color="#6a3d9a")
    ax.set_xscale("log")
    _plain_log_axis(ax.xaxis)
    ax.set_xlabel("items per model $k$ (log scale)")
    ax.set_ylabel(r"agreement (Spearman $\rho$)")


def _summarise(results: pd.DataFrame) -> pd.DataFrame:
    # mean, SD and SE over splits, undefined rho as the results' protocol says (``attrs``; default 0)
    from irtlib.protocol.agreement import agreement_curves as curves

    return curves(results.drop(columns="benchmark", errors="ignore"))


def _band(results: pd.DataFrame, band: str | None) -> str:
    """The band to shade: the one given, else the results' protocol's (``attrs["band"]``), else "sd"."""
    band = results.attrs.get("band", "sd") if band is None else band
    if band not in ("sd", "se", "none"):
        raise InputError(f"band must be 'sd', 'se' or 'none', got {band!r}")
    return band


def _legend_below(fig, axes, *, ncol: int = 4):
    """One legend for the figure, below the axes so it never covers a curve."""
    handles, labels, seen = [], [], set()
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in seen:
                seen.add(lab)
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8, frameon=False)


def agreement_curves(results: pd.DataFrame, *, methods: Sequence[str] | None = None, title: str | None = None,
                     band: str | None = None, ylim: tuple[float, float] | None = (0.0, 1.0),
                     ceiling: float | None = None, threshold: float | None = 0.9) -> Figure:
    """Figure 4: mean agreement against budget k for every method; Fluid and Random shaded (1 SD or 1 SE).

    Parameters
    ----------
    results : DataFrame
        Output of :func:`irtlib.run_protocol` (columns ``split``, ``method``, ``k``, ``agreement``).
    methods : sequence of str, optional
        Which methods to draw, in legend order; default all present.
    band : {"sd", "se", "none"}, optional
        Shade 1 SD over splits (the paper's text) or 1 standard error of the mean over the splits
        with a defined rho (the authors' code) around Fluid and Random (the other methods are
        never shaded). Default: the rule the results' protocol records (``attrs["band"]``), else "sd".
        Undefined agreements follow the results' protocol too (``attrs["nan_policy"]``).
    ceiling : float, optional
        Drawn as a labelled horizontal line "IRT ceiling".
    threshold : float or None
        The agreement target, drawn as a labelled line (default 0.9; ``None`` to leave it out).
    """
    methods = list(METHOD_STYLE) if methods is None else list(methods)
    fig = Figure(figsize=(7.5, 5.2), layout="constrained")
    ax = fig.subplots()
    _curves(ax, _summarise(results), [m for m in methods if m in set(results["method"])],
            band=_band(results, band), threshold=threshold, ceiling=ceiling)
    ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    _legend_below(fig, [ax], ncol=3)
    return fig


def agreement_grid(results_by_benchmark: Mapping[str, pd.DataFrame], *, methods: Sequence[str] | None = None,
                   ncols: int = 2, band: str | None = None, ylim: tuple[float, float] | None = (0.0, 1.0),
                   ceiling: float | Mapping[str, float] | None = None, threshold: float | None = 0.9) -> Figure:
    """Appendix F: the agreement curves of every benchmark, one panel each, one shared legend below.

    Parameters
    ----------
    band : {"sd", "se", "none"}, optional
        As in :func:`agreement_curves` (default: each panel's results' protocol's rule).
    ceiling : float or mapping of title -> float, optional
        An "IRT ceiling" line in every panel (a float) or in the panels named (a mapping).
    threshold : float or None
        The agreement target line (default 0.9).
    """
    methods = list(METHOD_STYLE) if methods is None else list(methods)
    fig, axes = _grid(len(results_by_benchmark), ncols=ncols, size=(5.2, 3.6))
    for ax, (title, results) in zip(axes, results_by_benchmark.items(), strict=False):
        line = ceiling.get(title) if isinstance(ceiling, Mapping) else ceiling
        _curves(ax, _summarise(results), [m for m in methods if m in set(results["method"])],
                band=_band(results, band), threshold=threshold, ceiling=line)
        ax.set_ylim(*ylim)
        ax.set_title(title, fontsize=10)
    _legend_below(fig, axes[:len(results_by_benchmark)], ncol=4)
    return fig
