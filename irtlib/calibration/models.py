"""The fast MAP engine for the Rasch (1PL), 2PL and 3PL models, and their comparison on held-out data.

The paper fits a 2PL and rejects the 1PL because "it forces equal discrimination, and safety
items vary a lot" (the paper's model section); it does not try a 3PL, although two of its
benchmarks are multiple choice, where a model that guesses is sometimes right (a lower asymptote).
This module fits all three with the same priors as the paper's 2PL and compares them on held-out
responses.

Models (``x = 1`` a safe response, ``z = a_j (theta_m - b_j)``):

- ``"1pl"``: ``P = sigmoid(a (theta_m - b_j))`` with one discrimination ``a`` shared by every item
  (the Rasch model with a free common slope). Its prior is the 2PL's evaluated at ``a_j = a`` for
  every item, ``n_items * (log a)^2 / 2``: the 1PL is the 2PL constrained to equal slopes, on the
  same posterior. (A single ``Normal(0, 1)`` on ``log a`` would not fix the scale: under joint MAP,
  shrinking every theta and b by a factor k and growing the one slope by k leaves the likelihood
  unchanged and raises the Normal priors of theta and b by far more than it costs the slope's,
  so the mode runs off to a slope of 15 or more.)
- ``"2pl"``: ``P = sigmoid(a_j (theta_m - b_j))`` (the paper's model); fitted by
  :func:`irtlib.calibration.joint_map.fit_map`, so ``fit_irt(m, model="2pl")`` equals ``fit_2pl(m, engine="map")``.
- ``"3pl"``: ``P = c_j + (1 - c_j) sigmoid(a_j (theta_m - b_j))`` with a lower asymptote ``c_j``
  and a ``Beta(5, 17)`` prior on it (mode 0.2, mean 0.23).

Priors otherwise as the paper's: ``theta ~ Normal(0, 1)``, ``log a ~ Normal(0, 1)``,
``b ~ Normal(0, 1)``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.special import expit, log_expit, logit

from irtlib._typing import ArrayLike
from irtlib.core.kernels import log_likelihood
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError, InputTypeError

from . import threepl_kernel
from .blas import thread_limits
from .joint_map import Calibration, fit_2pl, fit_map
from .newton import arrow_step

__all__ = ["MODELS", "P_FLOOR", "check_model", "fit_irt", "fit_irt_values", "n_parameters", "compare_models",
           "heldout_folds"]

#: The item response models :func:`fit_irt` knows.
MODELS = ("1pl", "2pl", "3pl")

_DEFAULT_PRIORS = {"theta": (0.0, 1.0), "log_a": (0.0, 1.0), "b": (0.0, 1.0), "c": (5.0, 17.0)}
#: Probabilities are kept inside ``[P_FLOOR, 1 - P_FLOOR]`` where a log or a ratio needs it.
P_FLOOR = 1e-12


def check_model(model: str) -> str:
    """``model`` if it is one of :data:`MODELS`, else an :class:`~irtlib.errors.InputError` naming it."""
    if model not in MODELS:
        raise InputError(f"unknown model {model!r}; choose one of {MODELS}")
    return model


def n_parameters(model: str, n_models: int, n_items: int) -> int:
    """Free parameters of a model: ``n_models`` abilities plus 1 + J (1PL), 2J (2PL) or 3J (3PL)."""
    per_item = {"1pl": 1, "2pl": 2, "3pl": 3}[check_model(model)]
    return int(n_models + per_item * n_items + (1 if model == "1pl" else 0))


# ---------------------------------------------------------------------------- generic engine
class _Point:
    """Parameters of a 1PL / 3PL fit and everything a scoring step needs at them.

    ``alpha`` is ``log a``: shape (1,) for the 1PL (shared), (n_items,) for the 3PL; ``gamma`` is
    ``logit c`` (3PL only, else None). ``s = sigmoid(z)`` is computed once and serves the
    probability (``P = c + (1 - c) s``, :func:`irtlib.core.kernels.probability`'s arithmetic) and
    the step's derivatives.
    """

    def __init__(self, x, mask, theta, alpha, b, gamma, priors, *, safe_cells=None):
        self.theta, self.alpha, self.b, self.gamma = theta, alpha, b, gamma
        self.a = np.exp(alpha)
        (mt, st), (ma, sa), (mb, sb), (pc, qc) = priors
        # the 1PL's shared slope carries the 2PL's prior of every item's slope (weight n_items):
        # the 1PL is the 2PL constrained to a_j = a, on the same posterior
        weight = x.shape[1] if alpha.size == 1 else 1.0
        lp = -0.5 * (((theta - mt) / st) ** 2).sum() - 0.5 * weight * (((alpha - ma) / sa) ** 2).sum() \
            - 0.5 * (((b - mb) / sb) ** 2).sum()
        if gamma is None:
            self.z = self.a * (theta[:, None] - b)
            self.s = expit(self.z)
            self.c = None
            ll = log_expit(self.z) - (1.0 - x) * self.z
            self.p = self.s
        else:
            self.c = expit(gamma)
            # z = a (theta - b), s = expit(z), P = clip(c + (1 - c) s): numpy's tables, from one C pass
            self.z, self.s, self.p = threepl_kernel.point_tables(theta, self.a, b, self.c, P_FLOOR, 1.0 - P_FLOOR)
            # x log P + (1 - x) log(1 - P), each cell's one term evaluated: the other is a zero times a
            # finite number (P is clipped), which adds nothing, so the values are the same
            # (``safe_cells``: the flat indices of x == 1 in C order, those of the boolean mask's selection,
            # computed once per fit: the same cells gathered and written in the same order)
            ll = np.log1p(-self.p)
            if safe_cells is None:
                safe = x == 1.0
                ll[safe] = np.log(self.p[safe])
            else:
                np.put(ll, safe_cells, np.log(np.take(self.p, safe_cells)))
            # Beta(pc, qc) density of c (the mode is taken on the c scale)
            lp += ((pc - 1.0) * log_expit(gamma) + (qc - 1.0) * log_expit(-gamma)).sum()
        if mask is not None:
            ll = ll * mask
        self.log_likelihood = float(ll.sum())
        self.log_posterior = self.log_likelihood + float(lp)


def _z_derivatives(x, pt: _Point):
    """:func:`irtlib.core.kernels.z_derivatives` of the 1PL at ``pt``, the same expressions, plus ``q = 1 - s``.

    ``s = sigmoid(z)`` is the point's, ``q = sigmoid(-z)`` is computed once. Every expression is the
    kernel's, operand for operand, so the arrays have its values and its memory layout (numpy reuses a
    temporary's buffer, and the layout decides the order of a later sum's terms). The 3PL's are
    :func:`irtlib.calibration.threepl_kernel.step_tables`' (the same expressions, in C where it loads).
    Returns ``(g_z, w_zz, q)``.
    """
    s, z = pt.s, pt.z
    q = expit(-z)   # x - P as x (1 - P) - (1 - x) P
    return x * q - (1.0 - x) * s, s * q, q


class _StepTables:
    """:func:`irtlib.calibration.threepl_kernel.step_tables` for one 3PL fit's ``x`` and ``mask``, from the kernel.

    The kernel takes C-ordered tables only, and a benchmark's matrix is often Fortran-ordered (its columns
    gathered by the variance filter): before, every step of such a fit took numpy's thirty passes. numpy's
    tables then are not all C-ordered (``g_z``'s expression reuses the buffer of the temporary ``x - 1.0``,
    of ``x``'s layout, when it is large), and a table's layout orders the sums and products it enters. So
    the first step computes numpy's tables as before, from ``x`` as it is, and notes their layouts; every
    later step takes the kernel's tables (the same values: elementwise arithmetic does not depend on the
    layout) from C-ordered copies of ``x`` and ``mask`` made once, each copied to Fortran order where
    numpy's was (the same values in the same layout). Without the kernel, with tables of another layout
    or a C-ordered ``x``: :func:`~irtlib.calibration.threepl_kernel.step_tables` as it is.
    """

    def __init__(self, x: np.ndarray, mask: np.ndarray | None):
        self.x, self.mask = x, mask
        self.fortran = None              # per table: numpy laid it out in Fortran order (from the first step)
        self.cells = None                # x and mask, C-ordered

    def __call__(self, z, s, p, a, c) -> tuple[np.ndarray, ...]:
        plain = threepl_kernel.c_tables(self.x, self.mask) or threepl_kernel.load() is None
        if plain or self.fortran is False or not threepl_kernel.c_tables(z, s, p):
            return threepl_kernel.step_tables(self.x, self.mask, z, s, p, a, c)
        if self.fortran is None:
            out = threepl_kernel.step_tables(self.x, self.mask, z, s, p, a, c)
            if all(t.flags.c_contiguous or t.flags.f_contiguous for t in out):
                self.fortran = [not t.flags.c_contiguous for t in out]
                self.cells = (np.ascontiguousarray(self.x),
                              None if self.mask is None else np.ascontiguousarray(self.mask))
            else:
                self.fortran = False     # a layout a copy could not give: numpy's passes every step
            return out
        out = threepl_kernel.step_tables(*self.cells, z, s, p, a, c)
        return tuple(np.asfortranarray(t) if f else t for t, f in zip(out, self.fortran, strict=True))


def _step(x, mask, pt: _Point, priors, *, tables=None):
    """One Fisher-scoring direction for (theta, [shared log a], item parameters).

    Expected information of a Bernoulli cell: ``dP dP^T / (P (1 - P))``. The abilities (and the
    1PL's shared slope) form the dense block; each item's parameters a small block (1 x 1 for
    the 1PL: b; 3 x 3 for the 3PL: log a, b, logit c); the item blocks are eliminated and the
    dense Schur complement is solved by Cholesky, as in :func:`irtlib.calibration.joint_map.fit_map`.
    """
    (mt, st), (ma, sa), (mb, sb), (pc, qc) = priors
    a, z, s, p = pt.a, pt.z, pt.s, pt.p
    shared = pt.c is None
    if shared:
        g_z, w_zz, q = _z_derivatives(x, pt)   # score and information in z (the kernel's)
        if mask is not None:
            g_z, w_zz = g_z * mask, w_zz * mask
    else:                                   # 3PL: dP/dgamma = c (1 - c)(1 - s)
        c = pt.c
        dc = c * (1.0 - c)                  # d c / d gamma, the logit transform's Jacobian
        # g_z, w_zz (the kernel's z derivatives), g_g = (x - P) c / P, w_zg = dc s q / P, w_gg = c dc q / P
        # (each masked), w_zz a, w_zz z and the products below: numpy's tables, from one C pass
        tables = _StepTables(x, mask) if tables is None else tables
        (g_z, w_zz, g_g, w_zg, w_gg, wa, wz, g_z_z, wz_z, w_zg_z, *cross3) = tables(z, s, p, a, c)
    n_models = x.shape[0]
    # d z / d(theta_m) = a_j, d z / d(log a_j) = z, d z / d b_j = -a_j
    g_theta = g_z @ a if not shared else a[0] * g_z.sum(axis=1)
    g_theta = g_theta - (pt.theta - mt) / st**2
    a_row = a if not shared else np.full(x.shape[1], a[0])
    if shared:
        wa = w_zz * a_row
    g_b = -a_row * g_z.sum(axis=0) - (pt.b - mb) / sb**2
    j_tt = wa @ a_row + 1.0 / st**2
    if shared:
        n_items = x.shape[1]
        g_al = np.array([(g_z * z).sum() - n_items * (pt.alpha[0] - ma) / sa**2])
        grads = [g_b]
        blocks = np.array([[a_row**2 * w_zz.sum(axis=0) + 1.0 / sb**2]])          # (1, 1, J)
        cross = [-(wa * a_row)]                                                    # theta x b: (M, J)
        wz = w_zz * z
        # dense block: abilities plus the shared slope
        dense = np.diag(np.append(j_tt, (wz * z).sum() + n_items / sa**2))
        t_al = (wz * a_row).sum(axis=1)
        dense[:n_models, n_models] = t_al
        dense[n_models, :n_models] = t_al
        cross = [np.vstack([cross[0], -(wz * a_row).sum(axis=0)[None, :]])]        # (M + 1, J)
        g_dense = np.append(g_theta, g_al)
    else:
        g_al = g_z_z.sum(axis=0) - (pt.alpha - ma) / sa**2
        g_ga = g_g.sum(axis=0) + (pc - 1.0) * (1.0 - c) - (qc - 1.0) * c
        grads = [g_al, g_b, g_ga]
        j_aa = wz_z.sum(axis=0) + 1.0 / sa**2
        j_bb = a * a * w_zz.sum(axis=0) + 1.0 / sb**2
        j_ab = -a * wz.sum(axis=0)
        j_gg = w_gg.sum(axis=0) + (pc + qc - 2.0) * dc
        j_ag = w_zg_z.sum(axis=0)
        j_bg = -a * w_zg.sum(axis=0)
        blocks = np.array([[j_aa, j_ab, j_ag], [j_ab, j_bb, j_bg], [j_ag, j_bg, j_gg]])   # (3, 3, J)
        cross = cross3                      # wz a, -wa a, w_zg a: (M, J) each
        dense = np.diag(j_tt)
        g_dense = g_theta
    try:
        binv = np.moveaxis(np.linalg.inv(np.moveaxis(blocks, -1, 0)), 0, -1)     # (k, k, J)
    except np.linalg.LinAlgError:
        return None
    step = arrow_step(dense, g_dense, cross, grads, binv)
    if step is None:
        return None
    d_dense, d_items = step
    if shared:
        return d_dense[:n_models], d_dense[n_models:], d_items[0], None
    return d_dense, d_items[0], d_items[1], d_items[2]


def _fit_generic(x, mask, *, model, priors, max_iter, tol, max_step, gain_tol, start):
    theta, a2, b, c0 = start                  # e.g. the 2PL's posterior mode: close to the others' modes
    if model == "1pl":
        alpha, gamma = np.array([np.log(a2).mean()]), None
    else:
        pc, qc = priors[3]
        c0 = np.full(x.shape[1], (pc - 1.0) / (pc + qc - 2.0)) if c0 is None else np.clip(c0, 1e-6, 1 - 1e-6)
        alpha, gamma = np.log(a2), logit(c0)
    safe_cells = np.flatnonzero(x == 1.0) if gamma is not None else None     # the 3PL's cells with log P
    pt = _Point(x, mask, theta, alpha, b, gamma, priors, safe_cells=safe_cells)
    tables = _StepTables(x, mask) if gamma is not None else None     # the 3PL's step tables
    converged, it, small = False, 0, 0
    for it in range(1, max_iter + 1):  # noqa: B007  (the count is returned after the loop)
        step = _step(x, mask, pt, priors, tables=tables)
        if step is None:
            break
        biggest = max(np.abs(d).max() for d in step if d is not None)
        scale = min(1.0, max_step / biggest) if biggest > 0 else 1.0
        accepted = None
        for _ in range(40):
            cand = _Point(x, mask, pt.theta + scale * step[0], pt.alpha + scale * step[1],
                          pt.b + scale * step[2], None if step[3] is None else pt.gamma + scale * step[3], priors,
                          safe_cells=safe_cells)
            if cand.log_posterior >= pt.log_posterior:
                accepted = cand
                break
            scale *= 0.5
        if accepted is None:
            converged = True
            break
        gain = accepted.log_posterior - pt.log_posterior
        pt = accepted
        small = small + 1 if gain < gain_tol else 0
        if scale * biggest < tol or small >= 2:
            converged = True
            break
    return pt, {"iterations": it, "converged": converged, "log_posterior": float(pt.log_posterior),
                "log_likelihood": float(pt.log_likelihood)}


def fit_irt_values(values: ArrayLike, *, model: str = "2pl", prior_theta: tuple[float, float] = (0.0, 1.0),
                   prior_log_a: tuple[float, float] = (0.0, 1.0), prior_b: tuple[float, float] = (0.0, 1.0),
                   prior_c: tuple[float, float] = (5.0, 17.0), max_iter: int = 500, tol: float = 1e-6,
                   gain_tol: float = 1e-6, max_step: float = 2.0, start: dict | None = None) -> dict:
    """Joint posterior mode of the 1PL, 2PL or 3PL on a plain array (the engine of :func:`fit_irt`).

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN missing (missing cells drop out of the likelihood).
    model : {"1pl", "2pl", "3pl"}
    prior_theta, prior_log_a, prior_b : (float, float)
        Mean and SD of the Normal priors (the paper's: all (0, 1)).
    prior_c : (float, float)
        Beta prior on the 3PL's lower asymptote ``c``.
    max_iter, tol, gain_tol : int, float, float
        Stop when no parameter moves more than ``tol``, or (1PL, 3PL) when two iterations in a
        row raise the log posterior by less than ``gain_tol`` per observed response (1e-6: half
        a log-likelihood unit over AIR-Bench's 467k responses, a thousand times below the
        differences between models that :func:`compare_models` reports).
    max_step : float
        The largest move of any parameter per iteration.
    start : dict, optional
        1PL / 3PL: start from these ``theta``, ``a``, ``b`` (and ``c``) instead of the 2PL's mode
        (e.g. a previous fit of the same data).

    Returns
    -------
    dict
        ``theta`` (n_models,), ``a``, ``b`` (n_items,), ``c`` (n_items,) or None, and ``info``
        (``iterations``, ``converged``, ``log_posterior``, ``log_likelihood``).

    Notes
    -----
    The 2PL goes to :func:`irtlib.calibration.joint_map.fit_map` unchanged (Fisher scoring then Newton). The
    1PL and 3PL use joint Fisher scoring with the same block elimination and a monotone
    step-halving ascent; the 3PL's posterior is not concave in general, so its mode is a local
    one. Both start from the 2PL's mode (the 1PL with the geometric mean of its slopes, the 3PL
    with ``c`` at its prior mode), which halves the iterations of a cold start.
    """
    check_model(model)
    x = np.asarray(values, dtype=float)
    if x.ndim != 2:
        raise InputError(f"values must be a 2-D models x items array, got shape {x.shape}")
    bad = ~(np.isnan(x) | (x == 0) | (x == 1))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(f"values must be 0, 1 or NaN; cell ({r}, {c}) has {float(x[r, c])!r}")
    if len(prior_c) != 2 or not (prior_c[0] > 1 and prior_c[1] > 1):
        raise InputError(f"prior_c must be two Beta parameters above 1 (a mode inside (0, 1)), got {prior_c}")
    if model == "2pl":
        theta, a, b, info = fit_map(x, prior_theta=prior_theta, prior_log_a=prior_log_a, prior_b=prior_b,
                                    max_iter=min(max_iter, 200), tol=tol, max_step=max_step)
        obs = ~np.isnan(x)
        ll = log_likelihood(np.where(obs, x, 0.0), theta[:, None], a, b)[obs].sum()
        info = dict(info, log_likelihood=float(ll))
        return {"theta": theta, "a": a, "b": b, "c": None, "info": info}
    if start is None:
        th0, a0, b0, _ = fit_map(x, prior_theta=prior_theta, prior_log_a=prior_log_a, prior_b=prior_b,
                                 max_step=max_step)
        start = (th0, a0, b0, None)
    else:
        start = (np.asarray(start["theta"], float), np.asarray(start["a"], float), np.asarray(start["b"], float),
                 None if start.get("c") is None else np.asarray(start["c"], float))
        if start[0].shape != x.shape[:1] or start[1].shape != x.shape[1:] or start[2].shape != x.shape[1:]:
            raise InputError(f"start: parameters do not match values of shape {x.shape}")
    observed = ~np.isnan(x)
    mask = None if observed.all() else observed.astype(float)
    x = np.where(observed, x, 0.0)
    priors = (tuple(prior_theta), tuple(prior_log_a), tuple(prior_b), tuple(prior_c))
    with thread_limits(1, user_api="blas"):
        pt, info = _fit_generic(x, mask, model=model, priors=priors, max_iter=max_iter, tol=tol,
                                gain_tol=gain_tol * observed.sum(), max_step=max_step, start=start)
    a = np.full(x.shape[1], pt.a[0]) if model == "1pl" else pt.a
    return {"theta": pt.theta, "a": a, "b": pt.b, "c": pt.c, "info": info}


def fit_irt(matrix: ResponseMatrix, *, model: str = "2pl", engine: str = "map",
            prior_c: tuple[float, float] = (5.0, 17.0), max_iter: int = 500, tol: float = 1e-6, seed: int = 0,
            epochs: int = 1000) -> Calibration:
    """Fit the 1PL, 2PL or 3PL to a response matrix.

    Parameters
    ----------
    matrix : ResponseMatrix
        Binary responses, models x items (NaN cells skipped).
    model : {"1pl", "2pl", "3pl"}
        See the module docstring. ``"2pl"`` with ``engine="map"`` returns exactly
        ``fit_2pl(matrix, engine="map")``.
    engine : {"map", "pyirt"}
        ``"pyirt"`` exists for the 2PL only (it is :func:`irtlib.fit_2pl`'s py-irt engine).
    prior_c : (float, float)
        Beta prior of the 3PL's lower asymptote.
    max_iter, tol : int, float
        Stopping rule of the MAP engine.
    seed, epochs : int
        py-irt only.

    Returns
    -------
    Calibration
        ``a`` (the shared slope repeated for the 1PL), ``b``, ``theta`` and, for the 3PL, ``c``;
        ``settings["model"]`` names the model; ``diagnostics`` adds ``log_likelihood``.

    Raises
    ------
    ValueError
        An unknown model or engine, or ``engine="pyirt"`` with a model other than the 2PL.
    """
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"fit_irt expects a ResponseMatrix, got {type(matrix).__name__}")
    check_model(model)
    if engine not in ("map", "pyirt"):
        raise InputError(f"unknown engine {engine!r}; choose 'map' or 'pyirt'")
    if engine == "pyirt" or model == "2pl":
        if engine == "pyirt" and model != "2pl":
            raise InputError(f"engine='pyirt' fits the 2PL only, not model={model!r}")
        cal = fit_2pl(matrix, engine=engine, seed=seed, epochs=epochs, max_iter=min(max_iter, 200), tol=tol)
        return Calibration(a=cal.a, b=cal.b, theta=cal.theta, engine=cal.engine,
                           settings=dict(cal.settings, model="2pl"), seconds=cal.seconds,
                           diagnostics=cal.diagnostics)
    start = time.perf_counter()
    fit = fit_irt_values(matrix.values, model=model, prior_c=prior_c, max_iter=max_iter, tol=tol)
    priors = {"theta": "Normal(0, 1)", "a": "LogNormal(0, 1)" + (" (one a shared by all items)" if model == "1pl"
                                                                 else ""), "b": "Normal(0, 1)"}
    if model == "3pl":
        priors["c"] = f"Beta{tuple(prior_c)}"
    settings = {"model": model, "max_iter": max_iter, "tol": tol, "method": "joint MAP, Fisher scoring",
                "priors": priors}
    return Calibration(
        a=pd.Series(fit["a"], index=matrix.items, name="a"),
        b=pd.Series(fit["b"], index=matrix.items, name="b"),
        theta=pd.Series(fit["theta"], index=matrix.models, name="theta"),
        c=None if fit["c"] is None else pd.Series(fit["c"], index=matrix.items, name="c"),
        engine="map", settings=settings, seconds=time.perf_counter() - start, diagnostics=fit["info"],
    )


# ---------------------------------------------------------------------------- comparison
def heldout_folds(observed: ArrayLike, *, folds: int, seed: int = 0) -> np.ndarray:
    """Assign every observed cell to one of ``folds`` folds at random (NaN cells get -1).

    Parameters
    ----------
    observed : ndarray of bool, shape (n_models, n_items)
    folds : int, at least 2
    seed : int

    Returns
    -------
    ndarray of int, shape (n_models, n_items)
        Balanced: fold sizes differ by at most one cell.
    """
    observed = np.asarray(observed, bool)
    if int(folds) < 2:
        raise InputError(f"folds must be at least 2, got {folds}")
    out = np.full(observed.shape, -1, dtype=int)
    cells = np.flatnonzero(observed)
    order = np.random.default_rng(np.random.SeedSequence(seed)).permutation(cells.size)
    out.flat[cells[order]] = np.arange(cells.size) % int(folds)
    return out


def _fit_sharing_2pl(x, which, model, two, *, prior_c, max_iter, tol):
    """:func:`fit_irt_values` of ``x``, its 2PL fit kept in ``two[which]`` and used as the 1PL / 3PL start.

    ``fit_irt_values`` starts the 1PL and 3PL from ``fit_map(x)`` with its default settings (200
    iterations, tolerance 1e-6), which is the 2PL's own fit whenever ``max_iter >= 200`` (the 2PL
    runs at most 200 iterations) and ``tol == 1e-6``: then the stored fit is that start, exactly.
    Otherwise nothing is shared. The shared 2PL fit is ``fit_irt_values``' call of
    :func:`~irtlib.calibration.joint_map.fit_map` itself (the same arguments, the same numbers), without the
    whole table's log-likelihood ``fit_irt_values`` adds to its ``info``: :func:`compare_models` reads
    ``theta``, ``a``, ``b`` and ``c`` only (``info`` is None).
    """
    if max_iter < 200 or tol != 1e-6:
        return fit_irt_values(x, model=model, prior_c=prior_c, max_iter=max_iter, tol=tol)
    if which not in two:
        theta, a, b, _ = fit_map(x, max_iter=min(max_iter, 200), tol=tol)
        two[which] = {"theta": theta, "a": a, "b": b, "c": None, "info": None}
    if model == "2pl":
        return two[which]
    return fit_irt_values(x, model=model, prior_c=prior_c, max_iter=max_iter, tol=tol, start=two[which])


def _cell_log_likelihood(x0: np.ndarray, rows: np.ndarray, cols: np.ndarray, fit: dict) -> np.ndarray:
    """:func:`irtlib.core.kernels.log_likelihood` of a fit at the cells ``(rows, cols)`` only, shape (n_cells,).

    The same values as the whole table's at those cells: every operation is elementwise (the item
    vectors' ``log c`` and ``log(1 - c)`` are taken over the gathered items, one value per item as before).
    """
    c = fit["c"]
    return log_likelihood(x0[rows, cols], fit["theta"][rows], fit["a"][cols], fit["b"][cols],
                          None if c is None else c[cols])


def compare_models(matrix: ResponseMatrix, *, models: Sequence[str] = ("1pl", "2pl", "3pl"), folds: int = 5,
                   seed: int = 0, prior_c: tuple[float, float] = (5.0, 17.0), max_iter: int = 500,
                   tol: float = 1e-6) -> pd.DataFrame:
    """The 1PL, 2PL and 3PL compared on held-out responses and by information criteria.

    Every observed cell is assigned to one of ``folds`` folds at random; for each fold the model is
    refitted with that fold's cells removed, and the held-out cells are scored with the refitted
    abilities and item parameters (every model and item keeps most of its responses, so both
    sides of a held-out cell are estimated). Each refit starts cold (from its own data's 2PL
    mode), never from the full-data fit: with a stopping tolerance, a start that has seen the
    held-out cells would leak them into the comparison.

    Parameters
    ----------
    matrix : ResponseMatrix
    models : sequence of {"1pl", "2pl", "3pl"}
    folds : int
        Number of folds (at least 2).
    seed : int
        Seeds the assignment of cells to folds (same call, same numbers).
    prior_c, max_iter, tol
        As in :func:`fit_irt`.

    Returns
    -------
    DataFrame, one row per model
        ``model``; ``heldout_loglik``: mean log-likelihood per held-out response (higher is better;
        ``log 0.5 = -0.693`` is a coin); ``heldout_se``: its standard error over cells;
        ``n_parameters``; ``loglik``: the log-likelihood of the full-data fit at its posterior mode;
        ``aic = -2 loglik + 2 k`` and ``bic = -2 loglik + k log n`` (``n`` observed cells) on the
        full fit; ``seconds``. ``attrs`` holds the settings.

    Notes
    -----
    AIC and BIC are computed at the MAP, not the maximum-likelihood point, and with abilities
    counted as parameters (joint estimation), so they are rough guides; the held-out
    log-likelihood is the comparison to trust (Akaike 1974; Schwarz 1978).
    """
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"compare_models expects a ResponseMatrix, got {type(matrix).__name__}")
    models = tuple(models)
    if not models:
        raise InputError("models must name at least one model")
    for m in models:
        if m not in MODELS:
            raise InputError(f"models: unknown model {m!r}; choose from {MODELS}")
    x = matrix.values
    observed = matrix.observed
    fold_of = heldout_folds(observed, folds=folds, seed=seed)
    n_obs = int(observed.sum())
    rows = []
    # The 1PL and 3PL start from the 2PL's mode of the same matrix (fit_irt_values); when the 2PL is
    # compared too, its fits of the full matrix and of each fold's training cells are those starts,
    # so each is computed once and handed on (the same call, the same numbers).
    two = {}
    x0 = np.where(observed, x, 0.0)
    tests = [fold_of == f for f in range(int(folds))]
    test_cells = [np.nonzero(test) for test in tests]        # each fold's cells, in C order (as test's selection)
    for model in models:
        start = time.perf_counter()
        full = _fit_sharing_2pl(x, "full", model, two, prior_c=prior_c, max_iter=max_iter, tol=tol)
        heldout = np.zeros(x.shape)
        for f in range(int(folds)):
            train = np.where(tests[f], np.nan, x)
            fit = _fit_sharing_2pl(train, f, model, two, prior_c=prior_c, max_iter=max_iter, tol=tol)
            heldout[test_cells[f]] = _cell_log_likelihood(x0, *test_cells[f], fit)
        ll = float(log_likelihood(x0, full["theta"][:, None], full["a"], full["b"], full["c"])[observed].sum())
        k = n_parameters(model, *x.shape)
        cells = heldout[observed]
        rows.append({"model": model, "heldout_loglik": float(cells.mean()),
                     "heldout_se": float(cells.std(ddof=1) / np.sqrt(cells.size)), "n_parameters": k,
                     "loglik": ll, "aic": -2.0 * ll + 2.0 * k, "bic": -2.0 * ll + k * np.log(n_obs),
                     "seconds": time.perf_counter() - start})
    out = pd.DataFrame(rows)
    out.attrs.update({"folds": int(folds), "seed": seed, "n_observations": n_obs, "source": matrix.source,
                      "prior_c": tuple(prior_c)})
    return out
