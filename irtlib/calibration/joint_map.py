"""Calibrating the 2PL model: py-irt as the paper ran it, and a fast joint-MAP engine.

Paper, section "Model: 2PL" (appendix B): py-irt, stochastic variational inference, 1,000
epochs, Adam learning rate 0.1, priors ``a ~ LogNormal(0, 1)``, ``b ~ Normal(0, 1)`` and
``theta ~ Normal(0, 1)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import log_expit
from threadpoolctl import threadpool_limits

from irtlib._typing import ArrayLike
from irtlib.core.kernels import probability, z_derivatives
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError, InputTypeError, MissingDependencyError

from .newton import arrow_step

__all__ = ["Calibration", "fit_2pl", "fit_map", "ENGINES", "PYIRT_EXTRA", "load_pyirt_engine"]

#: Calibration engines of :func:`fit_2pl`: the paper's text ("pyirt"), the fast posterior mode ("map"),
#: and py-irt as the paper's released code runs it ("pyirt-authors").
ENGINES = ("pyirt", "map", "pyirt-authors")

#: What ``engine="pyirt-authors"`` fixes (SUMMARY.md, "What the authors' released code does",
#: Calibration): py-irt's hierarchical priors, py-irt's default learning-rate decay, best epoch.
AUTHORS_PYIRT = {"priors": "hierarchical", "lr_decay": 0.9999, "best": True}


@dataclass(frozen=True)
class Calibration:
    """A fitted 2PL model.

    Attributes
    ----------
    a, b : Series, indexed by item
        Discrimination and difficulty.
    theta : Series, indexed by model
        Abilities of the calibration models.
    engine : str
        ``"pyirt"``, ``"map"`` or ``"pyirt-authors"``.
    settings : dict
        Everything that was run (priors, epochs, learning rate, seed, ...).
    seconds : float
        Wall time of the fit.
    diagnostics : dict
        Engine-specific facts (iterations, convergence, final log posterior).
    c : Series, indexed by item, or None
        Lower asymptote of a 3PL fit (:func:`irtlib.calibration.models.fit_irt`); None for the 2PL
        (and the 1PL), so ``P = c + (1 - c) sigmoid(a (theta - b))`` reduces to the paper's model.
    """

    a: pd.Series
    b: pd.Series
    theta: pd.Series
    engine: str
    settings: dict = field(default_factory=dict)
    seconds: float = float("nan")
    diagnostics: dict = field(default_factory=dict)
    c: pd.Series | None = None

    def probabilities(self) -> pd.DataFrame:
        """Model-implied probability of a safe response, models x items (with ``c`` if set)."""
        c = None if self.c is None else self.c.reindex(self.a.index).to_numpy()
        p = probability(self.theta.to_numpy()[:, None], self.a.to_numpy(), self.b.to_numpy(), c)
        return pd.DataFrame(p, index=self.theta.index, columns=self.a.index)


# ---------------------------------------------------------------------------- MAP engine
class _State:
    """Parameters plus what the next step needs, computed once per accepted point."""

    def __init__(self, x, mask, theta, alpha, b, priors):
        (mt, st), (ma, sa), (mb, sb) = priors
        self.theta, self.alpha, self.b = theta, alpha, b
        self.a = np.exp(alpha)
        self.z = self.a * (theta[:, None] - b)
        log_p = log_expit(self.z)
        # x log p + (1 - x) log(1 - p) = log p - (1 - x) z, with one transcendental call
        ll = log_p - (1.0 - x) * self.z
        if mask is not None:
            ll *= mask
        self.log_posterior = ll.sum() - 0.5 * (((theta - mt) / st) ** 2).sum() \
            - 0.5 * (((alpha - ma) / sa) ** 2).sum() - 0.5 * (((b - mb) / sb) ** 2).sum()
        self.p = np.exp(log_p)


def _scoring_step(x, mask, s: _State, priors, *, newton: bool):
    """One joint Fisher-scoring (or Newton) direction for (theta, log a, b).

    The information matrix is block structured: diagonal in theta, 2 x 2 block-diagonal in
    the items, dense between the two. The item blocks are eliminated analytically and the
    remaining ``n_models x n_models`` Schur complement is solved densely
    (:func:`irtlib.calibration.newton.arrow_step`, shared with the 1PL/3PL engine), so a step costs
    a few passes over the matrix plus one small solve. With ``newton=True`` the observed information
    (the negative Hessian) replaces the expected one, for quadratic convergence near the mode.
    """
    (mt, st), (ma, sa), (mb, sb) = priors
    a, z = s.a, s.z
    r, w = z_derivatives(x, z)            # x - P and P (1 - P), per cell (the kernel's tail-safe forms)
    if mask is not None:
        r *= mask
        w *= mask
    r_sum = r.sum(axis=0)
    g_t = r @ a - (s.theta - mt) / st**2
    g_al = (r * z).sum(axis=0) - (s.alpha - ma) / sa**2
    g_b = -a * r_sum - (s.b - mb) / sb**2

    wz = w * z
    j_tt = w @ (a * a) + 1.0 / st**2
    j_aa = (wz * z).sum(axis=0) + 1.0 / sa**2
    j_bb = a * a * w.sum(axis=0) + 1.0 / sb**2
    j_ab = -a * wz.sum(axis=0)
    c_al = wz * a                     # information between theta_m and log a_j
    c_b = w * -(a * a)                # information between theta_m and b_j
    if newton:                        # second derivatives of z times the residuals
        j_aa = j_aa - (r * z).sum(axis=0)
        j_ab = j_ab + a * r_sum
        c_al = c_al - r * a
    det = j_aa * j_bb - j_ab**2
    if newton and ((det <= 0) | (j_aa <= 0)).any():
        return None
    d_aa, d_bb, d_ab = j_bb / det, j_aa / det, -j_ab / det
    step = arrow_step(np.diag(j_tt), g_t, [c_al, c_b], [g_al, g_b], [[d_aa, d_ab], [d_ab, d_bb]])
    if step is None:
        return None
    d_t, (d_al, d_b) = step
    return d_t, d_al, d_b


def fit_map(values: ArrayLike, *, prior_theta: tuple[float, float] = (0.0, 1.0),
            prior_log_a: tuple[float, float] = (0.0, 1.0), prior_b: tuple[float, float] = (0.0, 1.0),
            max_iter: int = 200, tol: float = 1e-6,
            max_step: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Joint posterior mode of the 2PL with the paper's priors (the fast engine).

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN missing (missing cells simply drop out of the likelihood).
    prior_theta, prior_log_a, prior_b : (float, float)
        Mean and SD of the Normal priors on theta, ``log a`` and b. ``log a ~ Normal(0, 1)`` is
        the paper's ``a ~ LogNormal(0, 1)``; the mode is taken in ``log a``, the scale on which
        py-irt's variational guide is Normal, so ``exp`` of it is comparable with py-irt's
        reported ``a`` (the guide's median).
    max_iter, tol : int, float
        Iterations stop when the largest parameter change is below ``tol``.
    max_step : float
        Each iteration's step is scaled so no parameter moves more than this, then halved until
        the log posterior increases (a monotone ascent).

    Returns
    -------
    theta : ndarray, shape (n_models,)
    a, b : ndarray, shape (n_items,)
    info : dict
        ``iterations``, ``converged``, ``log_posterior``.

    Notes
    -----
    Fisher scoring (expected information, always positive definite) far from the mode; once
    the full step is accepted, Newton steps (observed information) for quadratic convergence, with a
    fallback to scoring whenever the observed information is not positive definite or a Newton
    step fails to increase the log posterior. BLAS runs single-threaded: its products here are
    small (models x models), and on a shared 2-core machine threaded BLAS spinning against other
    work made a fit two to six times slower.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit_map(values, priors=(prior_theta, prior_log_a, prior_b), max_iter=max_iter, tol=tol,
                        max_step=max_step)


def _fit_map(values, *, priors, max_iter, tol, max_step):
    x = np.asarray(values, dtype=float)
    observed = ~np.isnan(x)
    x = np.where(observed, x, 0.0)
    mask = None if observed.all() else observed.astype(float)
    # Start from logits of the observed rates: close to the mode, so few iterations are needed.
    eps = 0.5
    n_obs_m, n_obs_i = observed.sum(axis=1), observed.sum(axis=0)
    theta = np.log((x.sum(axis=1) + eps) / (n_obs_m - x.sum(axis=1) + eps))
    theta = (theta - theta.mean()) / (theta.std() + 1e-12)
    b = -np.log((x.sum(axis=0) + eps) / (n_obs_i - x.sum(axis=0) + eps)) / 1.7
    state = _State(x, mask, theta, np.zeros(x.shape[1]), b, priors)
    converged, newton = False, False
    it = 0
    for _ in range(max_iter):
        it += 1
        accepted = None
        for use_newton in ((True, False) if newton else (False,)):
            step = _scoring_step(x, mask, state, priors, newton=use_newton)
            if step is None:
                continue
            biggest = max(np.abs(d).max() for d in step)
            scale = min(1.0, max_step / biggest) if biggest > 0 else 1.0
            for _ in range(40):
                cand = _State(x, mask, state.theta + scale * step[0], state.alpha + scale * step[1],
                              state.b + scale * step[2], priors)
                if cand.log_posterior >= state.log_posterior:
                    accepted = cand
                    break
                scale *= 0.5
            if accepted is not None:
                break
        if accepted is None:          # no ascent direction left: we are at the mode numerically
            converged = True
            break
        state = accepted
        newton = scale == 1.0         # full steps: the quadratic region, where Newton pays off
        if scale * biggest < tol:
            converged = True
            break
    return state.theta, state.a, state.b, {"iterations": it, "converged": converged,
                                           "log_posterior": float(state.log_posterior)}


# ---------------------------------------------------------------------------- front door
#: The pip extra that brings py-irt's engine (torch, pyro, py-irt).
PYIRT_EXTRA = "pip install 'irtlib[pyirt]'"


def load_pyirt_engine() -> Callable[..., Any]:
    """:func:`irtlib.calibration.pyirt.fit_pyirt`, or a :class:`~irtlib.errors.MissingDependencyError` naming the extra.

    Raised (an ImportError) when torch, pyro or py-irt is missing.
    """
    try:
        from .pyirt import fit_pyirt
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise MissingDependencyError(f'engine="pyirt" needs torch, pyro-ppl and py-irt, which are not installed '
                          f"({missing} is missing): install them with {PYIRT_EXTRA}, or use the default "
                          'engine="map"') from exc
    return fit_pyirt


def fit_2pl(matrix: ResponseMatrix, *, engine: str = "pyirt", seed: int = 0, epochs: int = 1000,
            lr: float = 0.1, lr_decay: float | None = None, max_iter: int = 200, tol: float = 1e-6,
            verbose: bool = False) -> Calibration:
    """Fit the 2PL model to a response matrix.

    Parameters
    ----------
    matrix : ResponseMatrix
        Binary responses, models x items (NaN cells are skipped).
    engine : {"pyirt", "map", "pyirt-authors"}
        ``"pyirt"`` (default) runs py-irt 0.7.1 exactly as the paper did (appendix B): a custom
        2PL class with the paper's priors, SVI with Adam, ``epochs`` epochs at learning rate
        ``lr``. ``"map"`` finds the joint posterior mode of the same model and priors by Fisher
        scoring (:func:`fit_map`): deterministic, and about two orders of magnitude faster,
        which is what the agreement protocol's per-split refits need. ``"pyirt-authors"`` runs
        py-irt as the paper's released code does (SUMMARY.md, "What the authors' released code
        does", Calibration): py-irt's hierarchical priors
        (:class:`~irtlib.calibration.pyirt.HierarchicalTwoParamLog`), learning-rate decay 0.9999 per
        epoch, and the parameters after the epoch with the lowest loss (py-irt's ``best_params``);
        on SimpleSafetyTests it reproduces the authors' own per-split fits to about 1e-5. For many
        training sets at once, :func:`irtlib.calibration.pyirt_batch.fit_2pl_splits` runs the same fit
        batched.
    seed : int
        Seeds py-irt's random streams (torch, pyro, numpy, random). The MAP engine is
        deterministic and ignores it.
    epochs, lr : int, float
        py-irt settings (the paper: 1,000 and 0.1).
    lr_decay : float, optional
        Per-epoch learning-rate multiplier for py-irt. py-irt's default is 0.9999; ``None`` means
        1.0 for ``"pyirt"``, because the paper reports plain Adam at 0.1 with no schedule, and
        0.9999 per epoch would silently lower the final rate by about 10% over 1,000 epochs; and
        0.9999 for ``"pyirt-authors"``, as the authors' code runs it.
    max_iter, tol : int, float
        MAP-engine stopping rule.
    verbose : bool
        Let py-irt print its progress.

    Returns
    -------
    Calibration

    Raises
    ------
    ImportError
        ``engine="pyirt"`` without torch, pyro-ppl and py-irt (``pip install 'irtlib[pyirt]'``).
    """
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"fit_2pl expects a ResponseMatrix, got {type(matrix).__name__}")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    start = time.perf_counter()
    priors = {"theta": "Normal(0, 1)", "a": "LogNormal(0, 1)", "b": "Normal(0, 1)"}
    if engine == "pyirt":
        fit_pyirt = load_pyirt_engine()
        lr_decay = 1.0 if lr_decay is None else lr_decay
        theta, a, b = fit_pyirt(matrix.values, seed=seed, epochs=epochs, lr=lr, lr_decay=lr_decay,
                                verbose=verbose)
        settings = {"seed": seed, "epochs": epochs, "lr": lr, "lr_decay": lr_decay,
                    "optimizer": "Adam", "inference": "SVI (mean-field)", "priors": priors}
        diagnostics = {}
    elif engine == "pyirt-authors":
        fit_pyirt = load_pyirt_engine()
        lr_decay = AUTHORS_PYIRT["lr_decay"] if lr_decay is None else lr_decay
        theta, a, b = fit_pyirt(matrix.values, seed=seed, epochs=epochs, lr=lr, lr_decay=lr_decay,
                                priors=AUTHORS_PYIRT["priors"], best=AUTHORS_PYIRT["best"], verbose=verbose)
        settings = {"seed": seed, "epochs": epochs, "lr": lr, "lr_decay": lr_decay,
                    "optimizer": "Adam", "inference": "SVI (mean-field)", "parameters": "best epoch",
                    "priors": {"theta": "Normal(mu_theta, 1/u_theta)", "a": "LogNormal(mu_a, 1/u_a)",
                               "b": "Normal(mu_b, 1/u_b)", "mu": "Normal(0, 1e6)", "u": "Gamma(1, 1)"}}
        diagnostics = {}
    else:
        theta, a, b, diagnostics = fit_map(matrix.values, max_iter=max_iter, tol=tol)
        settings = {"max_iter": max_iter, "tol": tol, "method": "joint MAP, Fisher scoring", "priors": priors}
    seconds = time.perf_counter() - start
    return Calibration(
        a=pd.Series(a, index=matrix.items, name="a"),
        b=pd.Series(b, index=matrix.items, name="b"),
        theta=pd.Series(theta, index=matrix.models, name="theta"),
        engine=engine, settings=settings, seconds=seconds, diagnostics=diagnostics,
    )
