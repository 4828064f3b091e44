"""The primer chapter's computations (book/00_primer).

Curves, a posterior on a grid, a traced adaptive test and its animation.

Everything here is the textbook form of what the rest of irtlib does fast:

- :func:`test_information` and :func:`standard_error` sum :func:`irtlib.fisher_information`
  over items (``I(theta) = sum_j a_j^2 P_j (1 - P_j)``, ``SE = 1 / sqrt(I)``);
- :func:`posterior_grid` evaluates prior, likelihood and posterior of ``theta`` on a grid for
  one response pattern, beside :func:`irtlib.map_ability`'s MAP estimate and standard error;
- :func:`adaptive_trace` is Algorithm 1 written one step at a time (the loop a student would
  write), recording for every step the item, its ``a`` and ``b``, the response, the
  information the item gave at the estimate it was chosen for, and the MAP estimate and its
  standard error after it. ``tests/book/test_primer.py`` checks that it gives the items and
  estimates of :func:`irtlib.run_adaptive`, the fast batched implementation;
- :func:`perfect_steps` tells which items the calibration models answered as a perfect step
  (everyone above a cut safe, everyone below unsafe), the items whose ``a`` only the prior bounds;
- :func:`leave_one_out_tests` gives every model of a matrix the same adaptive test against a bank
  calibrated without it, to check the standard error against the full-benchmark ability;
- :func:`trace_animation` draws the trace as a matplotlib animation (posterior narrowing,
  the chosen item's curve highlighted) and :func:`animation_html` renders it as self-contained
  HTML and JavaScript (``FuncAnimation.to_jshtml``) that plays in a static page.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy.special import log_expit

from irtlib._typing import ArrayLike
from irtlib.core.ability import map_ability
from irtlib.core.kernels import fisher_information
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

__all__ = ["THETA_GRID", "test_information", "standard_error", "posterior_grid",
           "adaptive_trace", "perfect_steps", "leave_one_out_tests", "trace_animation", "animation_html", "source"]

#: The grid of abilities on which the primer draws curves and posteriors.
THETA_GRID = np.linspace(-4.0, 4.0, 801)

def test_information(theta, a, b) -> np.ndarray:
    """Test information ``I(theta) = sum_j I_j(theta)`` at each ``theta`` (shape of ``theta``)."""
    theta = np.asarray(theta, dtype=float)
    return fisher_information(theta[..., None], np.asarray(a, float), np.asarray(b, float)).sum(axis=-1)


test_information.__test__ = False  # not a pytest test despite its name


def standard_error(theta, a, b, *, prior_sd: float | None = None) -> np.ndarray:
    """Standard error ``1 / sqrt(I(theta))`` of a test of items ``a``, ``b`` at each ``theta``.

    With ``prior_sd`` the prior's information ``1 / prior_sd**2`` is added, which is the
    posterior standard error :func:`irtlib.map_ability` reports at its estimate.
    """
    info = test_information(theta, a, b)
    if prior_sd is not None:
        info = info + 1.0 / prior_sd ** 2
    with np.errstate(divide="ignore"):
        return 1.0 / np.sqrt(info)


def posterior_grid(responses, a, b, *, grid=THETA_GRID, prior_mean: float = 0.0,
                   prior_sd: float = 1.0) -> tuple[pd.DataFrame, dict]:
    """Prior, likelihood and posterior of ``theta`` on ``grid`` for one response pattern.

    Returns
    -------
    curves : DataFrame
        Columns ``theta``, ``prior``, ``likelihood``, ``posterior``: the prior and posterior
        are densities (integrating to 1 over the grid); the likelihood is scaled to the same
        area so the three share an axis.
    summary : dict
        ``map`` and ``se`` from :func:`irtlib.map_ability` (the same prior), ``grid_mode`` (the
        posterior's argmax on the grid) and ``likelihood_increasing`` (True when the likelihood
        rises over the whole grid, as for an all-safe pattern: no finite maximum).
    """
    x = np.asarray(responses, dtype=float)
    a, b, grid = np.asarray(a, float), np.asarray(b, float), np.asarray(grid, float)
    z = a * (grid[:, None] - b)
    loglik = (x * log_expit(z) + (1 - x) * log_expit(-z)).sum(axis=1)
    logprior = -0.5 * ((grid - prior_mean) / prior_sd) ** 2
    step = grid[1] - grid[0]

    def density(log):
        d = np.exp(log - log.max())
        return d / (d.sum() * step)

    curves = pd.DataFrame({"theta": grid, "prior": density(logprior), "likelihood": density(loglik),
                           "posterior": density(loglik + logprior)})
    fit = map_ability(x, a, b, prior_mean=prior_mean, prior_sd=prior_sd)
    summary = {"map": float(fit.theta), "se": float(fit.se),
               "grid_mode": float(grid[np.argmax(curves["posterior"].to_numpy())]),
               "likelihood_increasing": bool(np.all(np.diff(loglik) > 0))}
    return curves, summary


def adaptive_trace(responses, a, b, *, budget: int, theta0: float = 0.0, prior_mean: float = 0.0,
                   prior_sd: float = 1.0) -> pd.DataFrame:
    """Algorithm 1 for one model, one step at a time, with everything a reader wants to see.

    Parameters
    ----------
    responses : array_like, shape (n_items,)
        The model's responses (1 safe, 0 unsafe, NaN: no response, never given).
    a, b : array_like, shape (n_items,)
        The calibrated bank.
    budget : int
        Number of items to give (``k``).

    Returns
    -------
    DataFrame
        One row per step: ``step`` (1-based), ``item`` (column index), ``a``, ``b``,
        ``response``, ``information`` (the item's Fisher information at the estimate it was
        chosen for, ``theta_before``), ``theta`` and ``se`` (MAP estimate and posterior standard
        error after the step).
    """
    x = np.asarray(responses, dtype=float)
    a, b = np.asarray(a, float), np.asarray(b, float)
    if x.ndim != 1 or a.shape != x.shape or b.shape != x.shape:
        raise InputError(f"responses, a and b must be 1-D of one length; got {x.shape}, {a.shape}, {b.shape}")
    available = ~np.isnan(x)
    budget = int(budget)
    if not 1 <= budget <= int(available.sum()):
        raise InputError(f"budget must be between 1 and the {int(available.sum())} answered items, got {budget}")
    theta, given, rows = float(theta0), [], []
    for step in range(1, budget + 1):
        info = fisher_information(theta, a, b)            # line 3: I_j(theta_hat) for every item
        info[~available] = -np.inf                        # used and unanswered items are out
        j = int(np.argmax(info))                          # line 4: the most informative (ties: lowest)
        available[j] = False
        given.append(j)                                   # line 5: give it, read the response
        fit = map_ability(x[given], a[given], b[given],   # line 6: MAP on every response so far
                          prior_mean=prior_mean, prior_sd=prior_sd)
        rows.append({"step": step, "item": j, "a": a[j], "b": b[j], "response": int(x[j]),
                     "theta_before": theta, "information": float(info[j]),
                     "theta": float(fit.theta), "se": float(fit.se)})
        theta = float(fit.theta)
    return pd.DataFrame(rows)


def perfect_steps(values: ArrayLike, theta: ArrayLike) -> np.ndarray:
    """Which items the models answered as a perfect step in ``theta`` (a Guttman pattern).

    An item is a perfect step when, with the models sorted by ability, its responses never go
    from safe back to unsafe: every model above some ability answered safely, every model below
    it unsafely. Its likelihood then keeps rising with ``a`` (the fitted curve wants to be a
    step), so only the prior on ``a`` keeps the estimate finite.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        Responses (1 safe, 0 unsafe, NaN: unanswered, ignored).
    theta : array_like, shape (n_models,)
        The models' abilities.

    Returns
    -------
    ndarray of bool, shape (n_items,)
        True for a perfect step with at least one safe and one unsafe response.
    """
    x = np.asarray(values, dtype=float)
    theta = np.asarray(theta, dtype=float)
    if x.ndim != 2 or theta.shape != (x.shape[0],):
        raise InputError(f"values must be (n_models, n_items) and theta (n_models,); got {x.shape}, {theta.shape}")
    x = x[np.argsort(theta, kind="stable")]
    seen = ~np.isnan(x)
    # a safe answer below an unsafe one breaks the step: compare each unsafe with the safes below it
    safe_below = np.maximum.accumulate(np.where(seen, x, 0.0), axis=0)
    broken = (seen & (x == 0) & (safe_below == 1)).any(axis=0)
    varied = (np.nanmax(np.where(seen, x, np.nan), axis=0) == 1) & (np.nanmin(np.where(seen, x, np.nan), axis=0) == 0)
    return ~broken & varied


def leave_one_out_tests(matrix: ResponseMatrix, *, budget: int) -> pd.DataFrame:
    """Every model's adaptive test against a bank calibrated without it, beside its full-benchmark ability.

    For each model m of ``matrix``: fit the 2PL (MAP engine) to the other models, run Algorithm 1
    (:func:`irtlib.run_adaptive`) for ``budget`` items on m's recorded responses, and estimate
    m's ability by MAP on the items given and on every item (the full-benchmark ability, same
    bank). If the test's standard error were right, ``z`` would be roughly standard normal and the
    full-benchmark ability outside the test's 95% interval for about 5% of the models.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
        Already filtered (the variance filter of the paper).
    budget : int
        Items per test.

    Returns
    -------
    DataFrame indexed by model
        ``full_theta``, ``full_se``, ``theta`` and ``se`` (after ``budget`` items), ``z`` =
        ``(theta - full_theta) / se``, ``patterns`` (distinct response patterns of the calibration
        models over the items given) and ``perfect_steps`` (how many of them are perfect steps).
    """
    from irtlib.calibration.joint_map import fit_2pl
    from irtlib.selection.adaptive import run_adaptive

    rows = []
    for i, model in enumerate(matrix.models):
        train = matrix.subset(models=[m for m in matrix.models if m != model])
        cal = fit_2pl(train, engine="map")
        a, b = cal.a.reindex(matrix.items).to_numpy(), cal.b.reindex(matrix.items).to_numpy()
        x = matrix.values[i]
        full = map_ability(x, a, b)
        given = run_adaptive(x, a, b, budget=int(budget)).items[0, :int(budget)]
        test = map_ability(x[given], a[given], b[given])
        shown = train.values[:, given]
        rows.append({"model": model, "full_theta": float(full.theta), "full_se": float(full.se),
                     "theta": float(test.theta), "se": float(test.se),
                     "patterns": int(np.unique(np.nan_to_num(shown, nan=-1), axis=1).shape[1]),
                     "perfect_steps": int(perfect_steps(shown, cal.theta.reindex(train.models).to_numpy()).sum())})
    out = pd.DataFrame(rows).set_index("model")
    out["z"] = (out["theta"] - out["full_theta"]) / out["se"]
    out.attrs["budget"] = int(budget)
    return out


def preview_steps(n_steps: int, *, count: int = 3) -> list[int]:
    """``count`` steps (0-based) of an ``n_steps``-step test, evenly spread from the first to the last.

    The frames a QUICK build's animation draws (every step when there are no more than ``count``): the
    first, the middle and the last by default (each frame is drawn and encoded, about 0.2 CPU s).
    """
    if n_steps < 1:
        return []
    return sorted({int(round(x)) for x in np.linspace(0, n_steps - 1, min(int(count), int(n_steps)))})


def trace_animation(trace: pd.DataFrame, responses, a, b, *, full_theta: float | None = None,
                    grid=THETA_GRID, prior_sd: float = 1.0, n_background: int = 12, seed: int = 0,
                    title: str = "", interval: int = 900, steps=None):
    """A matplotlib ``FuncAnimation`` of an adaptive test, one frame per step (or per step of ``steps``).

    Top: the information curves of a few bank items (grey) and of the item chosen at this step
    (highlighted), with the estimate it was chosen at. Bottom: the posterior of ``theta`` after
    the step (earlier posteriors faded), its MAP estimate, and ``full_theta`` (the model's
    full-benchmark ability) when given. ``steps`` (0-based, increasing; default every step) are
    the steps drawn, e.g. :func:`preview_steps` in a QUICK build; each frame still says which step
    of how many it shows. Made without pyplot.
    """
    import matplotlib as mpl
    from matplotlib.animation import FuncAnimation
    from matplotlib.figure import Figure

    x = np.asarray(responses, dtype=float)
    a, b, grid = np.asarray(a, float), np.asarray(b, float), np.asarray(grid, float)
    rng = np.random.default_rng(seed)
    background = rng.choice(np.flatnonzero(~np.isnan(x)), size=min(n_background, int((~np.isnan(x)).sum())),
                            replace=False)
    posts = [posterior_grid(x[trace["item"].to_numpy()[:t]], a[trace["item"].to_numpy()[:t]],
                            b[trace["item"].to_numpy()[:t]], grid=grid, prior_sd=prior_sd)[0]["posterior"].to_numpy()
             for t in range(1, len(trace) + 1)]
    prior = posterior_grid(np.array([]), np.array([]), np.array([]), grid=grid, prior_sd=prior_sd)[0]["prior"]
    info_max = float(max(fisher_information(grid[:, None], a[background], b[background]).max(),
                         fisher_information(grid[:, None], trace["a"].to_numpy(), trace["b"].to_numpy()).max()))

    fig = Figure(figsize=(7.0, 5.4), dpi=80, layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    # Every frame has the same axes, limits, tick labels and label sizes. The constrained layout refines
    # the previous positions at each draw and reaches a fixed point after a few frames (positions equal
    # bit for bit from one layout to the next); from then on the layout engine is switched off and the
    # later frames keep those positions, which the layout would give them again (each frame's savefig
    # then draws once, without the layout pass).
    laid_out, positions = [], []
    fig.canvas.mpl_connect("draw_event", lambda event: laid_out.append(True))

    # The artists every frame shares (the bank's curves, the prior, limits and labels) are drawn once; each
    # frame removes the previous frame's own artists and adds its own in the same order, so the axes' children
    # keep the order a cleared axes would give them (and so the pixels), without rebuilding ticks and labels.
    for j in background:
        top.plot(grid, fisher_information(grid, a[j], b[j]), color="#bbbbbb", lw=0.8)
    top.set_ylim(0, info_max * 1.15)
    top.set_ylabel(r"item information $I_j(\theta)$")
    bottom.plot(grid, prior, color="#999999", ls=":", lw=1.2, label="prior N(0, 1)")
    bottom.set_ylim(0, max(p.max() for p in posts) * 1.1)
    bottom.set_xlim(grid[0], grid[-1])
    bottom.set_xlabel(r"ability $\theta$")
    bottom.set_ylabel("posterior density")
    shown = []                      # this frame's own artists

    def draw(t):
        if laid_out and fig.get_layout_engine() is not None:
            now = [tuple(ax.get_position().bounds) for ax in (top, bottom)]
            if positions and positions[-1] == now:
                with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
                    fig.set_layout_engine(None)
            positions.append(now)
        row = trace.iloc[t]
        for artist in shown:
            artist.remove()
        shown.clear()
        shown.extend(top.plot(grid, fisher_information(grid, row["a"], row["b"]), color="#D55E00", lw=2.6,
                              label=f"chosen item {int(row['item'])} (a = {row['a']:.2f}, b = {row['b']:.2f})"))
        shown.append(top.axvline(row["theta_before"], color="#0072B2", ls="--", lw=1.2,
                                 label=rf"estimate it was chosen at, $\hat\theta$ = {row['theta_before']:.2f}"))
        top.legend(loc="upper left", fontsize=8, frameon=False)
        top.set_title(f"{title} step {t + 1} of {len(trace)}: response "
                      f"{'safe (1)' if row['response'] == 1 else 'unsafe (0)'}".strip(), fontsize=10)
        for s in range(t):
            shown.extend(bottom.plot(grid, posts[s], color="#0072B2", alpha=0.12, lw=1))
        shown.extend(bottom.plot(grid, posts[t], color="#0072B2", lw=2.2, label=rf"posterior after {t + 1} items"))
        shown.append(bottom.axvspan(row["theta"] - 1.96 * row["se"], row["theta"] + 1.96 * row["se"], color="#0072B2",
                                    alpha=0.12, label=rf"$\hat\theta$ = {row['theta']:.2f} $\pm$ 1.96 SE"))
        if full_theta is not None:
            shown.append(bottom.axvline(full_theta, color="#000000", lw=1.2,
                                        label=f"full-benchmark ability {full_theta:.2f}"))
        bottom.legend(loc="upper left", fontsize=8, frameon=False)
        return []

    frames = len(trace) if steps is None else [int(t) for t in steps]
    return FuncAnimation(fig, draw, frames=frames, interval=interval, blit=False)


#: matplotlib's player buttons draw Font Awesome icons from a CDN; the book reads offline, so
#: the stylesheet link is dropped and each icon becomes a plain character.
_ICONS = {"fa-minus": "\u2212", "fa-fast-backward": "\u2759\u25c0\u25c0", "fa-step-backward": "\u2759\u25c0",
          "fa-play fa-flip-horizontal": "\u25c0", "fa-pause": "\u2759\u2759", "fa-play": "\u25b6",
          "fa-step-forward": "\u25b6\u2759", "fa-fast-forward": "\u25b6\u25b6\u2759", "fa-plus": "+"}


def animation_html(animation, *, default_mode: str = "once") -> str:
    """The animation as self-contained HTML and JavaScript (frames embedded as PNG).

    It has matplotlib's player controls (``.anim-buttons``, the slider ``.anim-slider``) and
    needs no kernel, no server and no network.
    """
    html = animation.to_jshtml(default_mode=default_mode)
    animation._fig.clear()
    html = re.sub(r'<link rel="stylesheet"\s+href="https?://[^"]*font-awesome[^"]*">', "", html)
    for icon, text in _ICONS.items():
        html = html.replace(f'<i class="fa {icon}"></i>', f'<span aria-hidden="true">{text}</span>')
    if "fa fa-" in html or "maxcdn" in html:
        raise RuntimeError("matplotlib's animation template changed: an icon or the CDN link is left")
    return html


def source(obj) -> str:
    """``obj``'s source code, headed by its module and its file and first line in the package."""
    import inspect
    from pathlib import Path

    lines, first = inspect.getsourcelines(obj)
    path = Path(inspect.getsourcefile(obj)).resolve()
    parts = path.parts
    shown = "/".join(parts[parts.index("irtlib"):]) if "irtlib" in parts else path.name
    return f"# {obj.__module__}.{obj.__qualname__}  ({shown}, line {first})\n" + "".join(lines)
