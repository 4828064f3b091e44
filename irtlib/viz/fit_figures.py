"""Figures of the model-fit chapter: one function per figure, each returning a matplotlib ``Figure``.

Built without pyplot, as :mod:`irtlib.viz.figures` does, so a chapter can glue them and they are never
shown twice.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

__all__ = ["sx2_pvalues", "q3_heatmap", "scree", "heldout_comparison", "agreement_pair"]


def _grid(n: int, *, ncols: int = 3, size=(3.6, 3.0)):
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def sx2_pvalues(fits: Mapping[str, pd.DataFrame], *, ncols: int = 3, bins: int = 20) -> Figure:
    """Histogram of item-fit p-values per benchmark: flat under a fitting model, piled at 0 otherwise.

    Parameters
    ----------
    fits : mapping of title -> DataFrame
        Output of :func:`irtlib.fit.checks.item_fit` (``p_value``, ``flagged``).
    """
    fig, axes = _grid(len(fits), ncols=ncols)
    for ax, (title, df) in zip(axes, fits.items(), strict=False):
        p = df["p_value"].dropna().to_numpy()
        ax.hist(p, bins=bins, range=(0, 1), color="#1f77b4", alpha=0.8)
        ax.axhline(p.size / bins, color="k", lw=0.8, ls=":")
        ax.set_title(f"{title}\n{df['flagged'].mean():.0%} of {len(df)} items flagged", fontsize=10)
        ax.set_xlabel("S-X2 p-value")
        ax.set_ylabel("items")
    fig.tight_layout()
    return fig


def q3_heatmap(q3_frame: pd.DataFrame, groups: pd.Series, *, title: str | None = None, vmax: float = 0.6) -> Figure:
    """Yen's Q3 among the items of a few groups, group boundaries marked.

    Parameters
    ----------
    q3_frame : DataFrame, shape (n, n)
        From :func:`irtlib.fit.checks.q3` (items ordered by group).
    groups : Series indexed by item
        Group label of each item.
    """
    fig = Figure(figsize=(5.6, 4.8))
    ax = fig.subplots()
    q = q3_frame.to_numpy().copy()
    np.fill_diagonal(q, np.nan)
    im = ax.imshow(q, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
    g = groups.reindex(q3_frame.index).to_numpy()
    edges = np.flatnonzero(g[1:] != g[:-1]) + 0.5
    for e in edges:
        ax.axhline(e, color="k", lw=0.6)
        ax.axvline(e, color="k", lw=0.6)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"{len(q)} items, {len(set(g))} groups")
    if title:
        ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label="Q3")
    fig.tight_layout()
    return fig


def scree(dims: Mapping[str, pd.DataFrame], *, ncols: int = 3) -> Figure:
    """Residual eigenvalues against parallel analysis, one panel per benchmark.

    Parameters
    ----------
    dims : mapping of title -> DataFrame
        Output of :func:`irtlib.fit.checks.dimensionality`.
    """
    fig, axes = _grid(len(dims), ncols=ncols)
    for ax, (title, df) in zip(axes, dims.items(), strict=False):
        ax.plot(df.index, df["eigenvalue"], "o-", color="#d62728", label="data", ms=4)
        ax.plot(df.index, df["parallel"], "s--", color="#7f7f7f", label=f"parallel ({df.attrs['quantile']:.0%})",
                ms=3)
        ax.set_title(f"{title}\nfirst / second = {df.attrs['ratio_1_2']:.2f}", fontsize=10)
        ax.set_xlabel("rank")
        ax.set_ylabel("residual eigenvalue")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def heldout_comparison(tables: Mapping[str, pd.DataFrame], *, reference: str = "2pl") -> Figure:
    """Held-out log-likelihood per response of each model, relative to the 2PL, per benchmark.

    Parameters
    ----------
    tables : mapping of title -> DataFrame
        Output of :func:`irtlib.compare_models`.
    """
    names = list(tables)
    fig = Figure(figsize=(7.5, 0.55 * len(names) + 1.4))
    ax = fig.subplots()
    colours = {"1pl": "#1f77b4", "2pl": "#7f7f7f", "3pl": "#ff7f0e", "3pl-top": "#9467bd"}
    names_ = {"1pl": "1PL", "2pl": "2PL", "3pl": "3PL (lower asymptote)", "3pl-top": "3PL (upper asymptote)"}
    for i, name in enumerate(names):
        t = tables[name].set_index("model")
        ref = t.loc[reference, "heldout_loglik"]
        for model, row in t.iterrows():
            ax.plot(row["heldout_loglik"] - ref, i, "o", color=colours.get(model, "k"), label=names_.get(model, model))
    ax.axvline(0, color="k", lw=0.8, ls=":")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=9)
    ax.set_xlabel(f"held-out log-likelihood per response minus the {reference.upper()}'s")
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    ax.legend(seen.values(), seen.keys(), fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def agreement_pair(curves: Mapping[str, pd.DataFrame], *, title: str | None = None,
                   ylim: tuple[float, float] = (0.0, 1.0), styles: Mapping[str, tuple] | None = None) -> Figure:
    """Mean agreement against k for a few labelled curves, each shaded by the band it was summarised with.

    Parameters
    ----------
    curves : mapping of label -> DataFrame
        Output of :func:`irtlib.agreement_curves` restricted to one method (``k``, ``mean``, and
        ``band_lo``/``band_hi``, the band its ``band`` argument chose; without them, 1 SD: ``sd``).
    styles : mapping of label -> (colour, line style), optional
        Default: a fixed palette in order.
    """
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.subplots()
    palette = ["#d62728", "#1f77b4", "#7f7f7f", "#2ca02c", "#9467bd", "#ff7f0e"]
    line_styles = ["-", "--", "-", ":", "-.", "-"]
    chosen = [(styles or {}).get(label, (c, ls)) for label, c, ls in zip(curves, palette, line_styles, strict=False)]
    for (label, df), (colour, style) in zip(curves.items(), chosen, strict=True):
        df = df.sort_values("k")
        ax.plot(df["k"], df["mean"], style, color=colour, label=label, lw=1.6)
        lo, hi = ((df["band_lo"], df["band_hi"]) if {"band_lo", "band_hi"} <= set(df.columns)
                  else (df["mean"] - df["sd"], df["mean"] + df["sd"]))
        ax.fill_between(df["k"], lo, hi, color=colour, alpha=0.12)
    ax.set_xscale("log")
    ax.axhline(0.9, color="k", lw=0.7, ls=":")
    ax.set_ylim(*ylim)
    ax.set_xlabel("items per model $k$")
    ax.set_ylabel(r"agreement (Spearman $\rho$)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
