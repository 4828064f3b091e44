"""Figures of the book (and of ``irtlib report``): one function per figure, each returning a
matplotlib ``Figure`` so a chapter can glue it. Figures are made without pyplot, so they are
never shown twice in a notebook and never depend on a display (a notebook that glues them runs
``%matplotlib inline`` first, so that IPython knows how to render a figure as PNG).

Paper, section "Figures": Figure 2 (theta against safety score), Figure 3 (distribution of a
with its CV), Figure 4 and appendix F (agreement against budget k, shading = 1 SD over splits).
"""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure
import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from .diagnostics import CEILING, coefficient_of_variation

__all__ = [
    "METHOD_STYLE", "theta_vs_score", "engine_comparison", "item_fit_scatter", "ceiling_separation",
    "discrimination_spread", "agreement_curves", "agreement_grid",
]

#: Label, colour and line style of every selection method (shared by all agreement figures).
METHOD_STYLE = {
    "fluid": ("Fluid Benchmarking", "#d62728", "-"),
    "random": ("Random", "#7f7f7f", "-"),
    "random-irt": ("Random IRT", "#7f7f7f", "--"),
    "total-fisher": ("Total Fisher", "#1f77b4", "-"),
    "marginal-fisher": ("Marginal Fisher", "#2ca02c", "-"),
    "marginal-fisher-bq": ("Marginal Fisher (b-quartiles)", "#2ca02c", ":"),
    "anchor-points": ("Anchor Points", "#9467bd", "-"),
    "disco": ("DISCO", "#ff7f0e", "-"),
}


def _grid(n: int, *, ncols: int = 3, size=(3.6, 3.0)):
    ncols = min(ncols, n)
    nrows = int(np.ceil(n / ncols))
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def theta_vs_score(panels: Mapping[str, tuple[pd.Series, pd.Series]], *, ncols: int = 3):
    """Figure 2: fitted ability against safety score, one point per model, one panel per benchmark.

    Parameters
    ----------
    panels : mapping of title -> (theta, safety_score)
        Two Series indexed by model (aligned by label).
    """
    fig, axes = _grid(len(panels), ncols=ncols)
    for ax, (title, (theta, score)) in zip(axes, panels.items()):
        score = score.reindex(theta.index)
        rho = spearmanr(theta, score)[0]
        ax.scatter(score, theta, s=14, alpha=0.8, color="#1f77b4", edgecolor="none")
        ax.set_title(f"{title}\nSpearman $\\rho$ = {rho:.3f}", fontsize=10)
        ax.set_xlabel("safety score")
        ax.set_ylabel(r"$\hat\theta$")
    fig.tight_layout()
    return fig


def engine_comparison(pairs: Mapping[str, tuple[pd.Series, pd.Series]], *, xlabel="py-irt", ylabel="MAP engine",
                      ncols: int = 3):
    """One panel per parameter (or benchmark): the fast engine's estimates against py-irt's.

    Parameters
    ----------
    pairs : mapping of title -> (x, y)
        Series aligned by label.
    """
    fig, axes = _grid(len(pairs), ncols=ncols)
    for ax, (title, (x, y)) in zip(axes, pairs.items()):
        y = y.reindex(x.index)
        ax.scatter(x, y, s=6, alpha=0.5, edgecolor="none")
        lo, hi = np.nanmin([x.min(), y.min()]), np.nanmax([x.max(), y.max()])
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8, ls=":")
        ax.set_title(f"{title}  (Spearman {spearmanr(x, y)[0]:.3f})", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    fig.tight_layout()
    return fig


def item_fit_scatter(fits: Mapping[str, pd.DataFrame], *, ncols: int = 3):
    """Observed against model-implied item safe rates (appendix E), one panel per benchmark.

    Parameters
    ----------
    fits : mapping of title -> DataFrame
        Output of :func:`irtlib.item_rates` (columns ``observed`` and ``expected``).
    """
    fig, axes = _grid(len(fits), ncols=ncols)
    for ax, (title, df) in zip(axes, fits.items()):
        rmse = float(np.sqrt(np.mean(df["residual"] ** 2)))
        ax.scatter(df["expected"], df["observed"], s=4, alpha=0.4, edgecolor="none")
        ax.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
        ax.set_title(f"{title}\nitem RMSE = {rmse:.3f}", fontsize=10)
        ax.set_xlabel("model-implied safe rate")
        ax.set_ylabel("observed safe rate")
    fig.tight_layout()
    return fig


def ceiling_separation(panels: Mapping[str, tuple[pd.Series, pd.Series]], *, ceiling: float = CEILING,
                       ncols: int = 3):
    """Models above the ceiling spread out in theta: safety score against theta, ceiling marked.

    Parameters
    ----------
    panels : mapping of title -> (theta, safety_score)
    """
    fig, axes = _grid(len(panels), ncols=ncols)
    for ax, (title, (theta, score)) in zip(axes, panels.items()):
        score = score.reindex(theta.index)
        above = score > ceiling
        ax.scatter(theta[~above], score[~above], s=14, color="#7f7f7f", label=f"$\\leq$ {ceiling}")
        ax.scatter(theta[above], score[above], s=14, color="#d62728", label=f"> {ceiling} ({int(above.sum())})")
        ax.axhline(ceiling, color="k", lw=0.8, ls=":")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(r"$\hat\theta$")
        ax.set_ylabel("safety score")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def discrimination_spread(a_by_benchmark: Mapping[str, np.ndarray]):
    """Figure 3: distribution of the discrimination a per benchmark, labelled with its CV.

    Parameters
    ----------
    a_by_benchmark : mapping of title -> array of a
        Drawn in the given order (sort by CV first to reproduce the paper's layout).
    """
    names = list(a_by_benchmark)
    fig = Figure(figsize=(8, 0.75 * len(names) + 1.2))
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
    fig.tight_layout()
    return fig


def _curves(ax, summary: pd.DataFrame, methods, *, band: str):
    for method in methods:
        rows = summary[summary["method"] == method].sort_values("k")
        if rows.empty:
            continue
        label, colour, style = METHOD_STYLE.get(method, (method, None, "-"))
        ax.plot(rows["k"], rows["mean"], style, color=colour, label=label, lw=1.6)
        if band == "sd":
            ax.fill_between(rows["k"], rows["mean"] - rows["sd"], rows["mean"] + rows["sd"], color=colour, alpha=0.12)
    ax.set_xscale("log")
    ax.axhline(0.9, color="k", lw=0.7, ls=":")
    ax.set_xlabel("items per model $k$")
    ax.set_ylabel(r"agreement (Spearman $\rho$)")


def _summarise(results: pd.DataFrame) -> pd.DataFrame:
    from .agreement import agreement_curves as curves   # mean and SD over splits, NaN counted as 0

    return curves(results.drop(columns="benchmark", errors="ignore"))


def agreement_curves(results: pd.DataFrame, *, methods=None, title: str | None = None, band: str = "sd",
                     ylim=(0.0, 1.0)):
    """Figure 4: mean agreement against budget k for every method, shaded by 1 SD over splits.

    Parameters
    ----------
    results : DataFrame
        Output of :func:`irtlib.run_protocol` (columns ``split``, ``method``, ``k``, ``agreement``).
    methods : sequence of str, optional
        Which methods to draw, in legend order; default all present.
    band : {"sd", "none"}
    """
    methods = list(METHOD_STYLE) if methods is None else list(methods)
    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.subplots()
    _curves(ax, _summarise(results), [m for m in methods if m in set(results["method"])], band=band)
    ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, ncol=2, loc="lower right")
    fig.tight_layout()
    return fig


def agreement_grid(results_by_benchmark: Mapping[str, pd.DataFrame], *, methods=None, ncols: int = 2,
                   band: str = "sd", ylim=(0.0, 1.0)):
    """Appendix F: the agreement curves of every benchmark, one panel each, one shared legend."""
    methods = list(METHOD_STYLE) if methods is None else list(methods)
    fig, axes = _grid(len(results_by_benchmark), ncols=ncols, size=(5.2, 3.6))
    for ax, (title, results) in zip(axes, results_by_benchmark.items()):
        _curves(ax, _summarise(results), [m for m in methods if m in set(results["method"])], band=band)
        ax.set_ylim(*ylim)
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels() if len(results_by_benchmark) else ([], [])
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig
