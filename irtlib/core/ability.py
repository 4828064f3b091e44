"""MAP ability estimation with the paper's damped Newton-Raphson and bisection fallback.

Paper, section "Model: 2PL": ability by MAP with a Normal(0, 1) prior; damped Newton-Raphson
with each step capped at 1.0 in absolute value, at most 100 iterations; where that has not
converged, bisection on the score equation over [-8, 8], at most 200 iterations. The same
estimator serves the 3PL (an optional lower asymptote ``c``, the model-check chapter), with
the expected (Fisher) information in place of the observed one; for the 2PL the two coincide.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from irtlib._typing import ArrayLike
from irtlib.errors import InputError

from .kernels import score_and_information

__all__ = ["AbilityEstimate", "PARAMETER_LIMIT", "check_prior", "finite_number", "map_ability", "THETA_BOUNDS"]

#: The bracket of the paper's bisection fallback; every estimate is kept inside it.
THETA_BOUNDS = (-8.0, 8.0)


class AbilityEstimate(tuple):
    """``(theta, se)`` as a 2-tuple, with the details of the fit as attributes.

    Attributes
    ----------
    theta : ndarray, shape (n_models,)
        Posterior modes.
    se : ndarray, shape (n_models,)
        Posterior standard errors ``1 / sqrt(I(theta) + 1 / prior_sd**2)`` at the mode (observed
        = expected information for the 2PL); None when ``map_ability(standard_errors=False)``.
    at_bound : ndarray of bool, shape (n_models,)
        True where the estimate ended on -8 or +8: the unbounded mode lies outside the bracket
        (e.g. an all-safe pattern over thousands of items), so the value is a bound, not a mode;
        None when ``map_ability(standard_errors=False)``.
    used_bisection : ndarray of bool, shape (n_models,)
        True where Newton did not converge in ``max_newton`` iterations.
    """

    def __new__(cls, theta, se, at_bound, used_bisection):
        """An estimate that unpacks as ``(theta, se)`` and carries ``at_bound`` and ``used_bisection``."""
        obj = super().__new__(cls, (theta, se))
        obj.theta, obj.se = theta, se
        obj.at_bound, obj.used_bisection = at_bound, used_bisection
        return obj

    def __getnewargs__(self):  # pickling (joblib workers)
        return (self.theta, self.se, self.at_bound, self.used_bisection)


def _score_and_information(theta, x, observed, a, b, prior_mean, prior_var, c=None):
    """Gradient of the log posterior and the total (Fisher) information, per model."""
    score, info = score_and_information(x, theta[:, None], a, b, c)
    grad = np.where(observed, score, 0.0).sum(axis=1) - (theta - prior_mean) / prior_var
    return grad, np.where(observed, info, 0.0).sum(axis=1)


def _posterior_sums(x, observed, a, b, c, prior_mean, prior_var, row_sums):
    """``posterior(rows, theta)``: :func:`_score_and_information` of ``rows`` (an index array, or None for all).

    Each model's sums read only its own row; with ``row_sums`` (the 2PL) they come from that function,
    the prior's term added as :func:`_score_and_information` adds it.
    """
    if row_sums is not None and c is None:
        sums = row_sums(x, observed, a, b)

        def posterior(rows, theta):
            score, info = sums(rows, theta)
            return score - (theta - prior_mean) / prior_var, info

        posterior.solve = getattr(sums, "solve", None)
        return posterior

    def posterior(rows, theta):
        if rows is None:
            return _score_and_information(theta, x, observed, a, b, prior_mean, prior_var, c)
        aa = a if a.ndim == 1 or a.shape[0] == 1 else a[rows]
        bb = b if b.ndim == 1 or b.shape[0] == 1 else b[rows]
        cc = c if c is None or c.ndim == 1 or c.shape[0] == 1 else c[rows]
        return _score_and_information(theta, x[rows], observed[rows], aa, bb, prior_mean, prior_var, cc)

    return posterior


def finite_number(value: object, name: str) -> float:
    """``value`` as a float, or an :class:`~irtlib.errors.InputError` naming the argument (not a number, not finite)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise InputError(f"{name} must be finite, got {value!r}")
    return value


def check_prior(prior_mean: float, prior_sd: float,
                bounds: tuple[float, float]) -> tuple[float, float, tuple[float, float]]:
    """Validate the ability prior ``Normal(prior_mean, prior_sd)`` and the bracket of :func:`map_ability`.

    Also used by :class:`irtlib.bank.session.AdaptiveSession`, so that both state a bad prior alike.

    Returns
    -------
    tuple
        ``(prior_mean, prior_sd, (lo, hi))`` as floats.

    Raises
    ------
    InputError
        A non-finite mean, a non-positive or non-finite sd, or a bracket that is not two finite
        numbers ``lo < hi``; the message names the argument.
    """
    prior_mean = finite_number(prior_mean, "prior_mean")
    prior_sd = finite_number(prior_sd, "prior_sd")
    if prior_sd <= 0:
        raise InputError(f"prior_sd must be positive, got {prior_sd!r}")
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise InputError(f"bounds must be a pair (lower, upper), got {bounds!r}") from None
    lo, hi = finite_number(lo, "bounds[0]"), finite_number(hi, "bounds[1]")
    if not lo < hi:
        raise InputError(f"bounds must be increasing (lower < upper), got {bounds!r}")
    return prior_mean, prior_sd, (lo, hi)


#: Largest item parameter (|a| or |b|) :func:`map_ability` accepts: a^2 overflows near 1.3e154, and far
#: below that the likelihood is a step function whose information is meaningless.
PARAMETER_LIMIT = 1e6


def map_ability(responses: ArrayLike, a: ArrayLike, b: ArrayLike, *, c: ArrayLike | None = None,
                prior_mean: float = 0.0, prior_sd: float = 1.0,
                theta0: ArrayLike = 0.0, max_newton: int = 100, max_step: float = 1.0, tol: float = 1e-8,
                max_bisection: int = 200, bounds: tuple[float, float] = THETA_BOUNDS,
                row_sums: Callable | None = None, standard_errors: bool = True) -> AbilityEstimate:
    """Posterior-mode abilities of many models at once.

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items) or (n_items,)
        1 safe, 0 unsafe, NaN for items not administered to that model.
    a, b : array_like, shape (n_items,) or (n_models, n_items)
        Item discriminations and difficulties, broadcast against ``responses`` (a per-model
        layout lets an adaptive test pass only the items each model has seen).
    c : array_like, shape of ``a``, optional
        Lower asymptotes of 3PL items, in ``[0, 1)``; None (the paper) is the 2PL. With ``c`` the
        step uses the expected information (Fisher scoring; the observed one can be negative),
        and since the 3PL posterior need not be unimodal the estimate is the mode Newton reaches
        from ``theta0`` (or the root bisection finds).
    prior_mean, prior_sd : float
        The Normal prior on theta (the paper: 0 and 1).
    theta0 : float or array_like, shape (n_models,)
        Newton's starting point (the paper starts at 0).
    max_newton, max_step, tol : int, float, float
        At most ``max_newton`` Newton steps, each clipped to ``[-max_step, max_step]``; a model
        has converged when its last step was smaller than ``tol`` in absolute value.
    max_bisection : int
        Iterations of the bisection fallback on the score equation over ``bounds`` (at most: it
        stops at the first one that leaves every bracket as it was, since every later one would too).
    bounds : (float, float)
        Every iterate is clipped to this bracket (the paper's [-8, 8]).
    row_sums : callable, optional
        Another computation of every model's summed score and information (the 2PL only; ignored
        with ``c``): ``row_sums(x, observed, a, b)`` (``x`` with 0 where not observed) returns
        ``sums(rows, theta)``, the sums of ``rows`` (an index array, or None for all) at ``theta``,
        which must equal this function's own, bit for bit
        (:func:`irtlib.selection.ability_kernel.row_sums`: one C pass). None: numpy. A ``sums`` with a
        ``solve`` attribute runs the Newton steps and the bisection of every row itself
        (``solve(theta, prior_mean=, prior_var=, max_newton=, max_step=, tol=, max_bisection=, lo=, hi=)``
        -> estimates and Newton's convergence per row), which must equal this function's loop, bit for bit.
    standard_errors : bool
        Compute ``se`` and ``at_bound`` (one more pass of the sums at the estimates). False: they are
        None and the estimates the same; for callers that only read ``theta`` (the protocol's scores).

    Returns
    -------
    AbilityEstimate
        Unpacks as ``theta, se`` (arrays of shape ``(n_models,)``, or scalars for 1-D input);
        ``.at_bound`` flags estimates that ended on a bound and ``.used_bisection`` those that
        needed the fallback.

    Raises
    ------
    ValueError
        Responses other than 0, 1 or NaN, mismatched shapes, non-finite parameters or ones beyond
        :data:`PARAMETER_LIMIT` in absolute value, a
        non-positive or non-finite ``prior_sd``, a non-finite ``prior_mean``, or ``bounds`` that
        are not an increasing pair of finite numbers; the message names the argument.

    Notes
    -----
    The log posterior is strictly concave in theta, so its score equation has one root and
    bisection on the sign of the score always brackets it. When the root lies outside
    ``bounds`` the estimate is the nearer bound and ``at_bound`` is set. With no observed
    response the estimate is the prior mean.
    """
    x = np.asarray(responses, dtype=float)
    one_model = x.ndim == 1
    x = np.atleast_2d(x)
    if x.ndim != 2:
        raise InputError(f"responses must be 1-D or 2-D, got shape {np.shape(responses)}")
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    for name, arr in (("a", a), ("b", b)):
        if arr.shape[-1:] != x.shape[-1:] or (arr.ndim == 2 and arr.shape[0] not in (1, x.shape[0])) or arr.ndim > 2:
            raise InputError(
                f"{name} has shape {arr.shape} but responses have shape {x.shape}: "
                f"expected ({x.shape[1]},) or ({x.shape[0]}, {x.shape[1]})"
            )
        if not np.isfinite(arr).all():
            raise InputError(f"{name} contains non-finite values")
        if np.abs(arr).max(initial=0.0) > PARAMETER_LIMIT:
            flat = np.abs(arr).ravel()
            raise InputError(f"{name} contains {float(arr.ravel()[np.argmax(flat)]):.3g} (position "
                             f"{int(np.argmax(flat))}): item parameters beyond +/-{PARAMETER_LIMIT:g} overflow the "
                             "information (the standard error would come out as 0)")
    if c is not None:
        c = np.asarray(c, dtype=float)
        if c.shape != a.shape:
            raise InputError(f"c has shape {c.shape} but a has shape {a.shape}: give one asymptote per item")
        if not (np.isfinite(c).all() and (c >= 0).all() and (c < 1).all()):
            bad = c[~(np.isfinite(c) & (c >= 0) & (c < 1))].ravel()[0]
            raise InputError(f"c (the lower asymptotes) must lie in [0, 1); found {float(bad)!r}")
    if np.any((x != 0) & (x != 1) & ~np.isnan(x)):
        bad = x[(x != 0) & (x != 1) & ~np.isnan(x)][0]
        raise InputError(f"responses must be 0, 1 or NaN; found {float(bad)!r}")
    observed = ~np.isnan(x)
    x = np.where(observed, x, 0.0)
    prior_mean, prior_sd, (lo, hi) = check_prior(prior_mean, prior_sd, bounds)
    prior_var = prior_sd ** 2

    theta = np.clip(np.broadcast_to(np.asarray(theta0, dtype=float), x.shape[:1]).copy(), lo, hi)
    posterior = _posterior_sums(x, observed, a, b, c, prior_mean, prior_var, row_sums)
    solve = getattr(posterior, "solve", None)
    if solve is not None:         # every row's steps in one call (the row sums' own loop): the same values
        theta, converged = solve(theta, prior_mean=prior_mean, prior_var=prior_var, max_newton=max_newton,
                                 max_step=max_step, tol=tol, max_bisection=max_bisection, lo=lo, hi=hi)
        used_bisection = ~converged
    else:
        converged = np.zeros(x.shape[0], dtype=bool)
        active = np.arange(x.shape[0])
        for _ in range(max_newton):
            grad, info = posterior(active, theta[active])
            step = np.clip(grad / (info + 1.0 / prior_var), -max_step, max_step)
            new = np.clip(theta[active] + step, lo, hi)
            moved = np.abs(new - theta[active])
            theta[active] = new
            done = moved < tol
            converged[active[done]] = True
            active = active[~done]
            if active.size == 0:
                break

        used_bisection = ~converged
        if used_bisection.any():
            idx = np.flatnonzero(used_bisection)
            left = np.full(idx.size, lo)
            right = np.full(idx.size, hi)
            for _ in range(max_bisection):
                mid = 0.5 * (left + right)
                g, _ = posterior(idx, mid)
                new_left = np.where(g > 0, mid, left)
                new_right = np.where(g > 0, right, mid)
                if np.array_equal(new_left, left) and np.array_equal(new_right, right):
                    break        # a step that changed nothing changes nothing after it: the bracket is final
                left, right = new_left, new_right
            theta[idx] = 0.5 * (left + right)
            g_lo, _ = posterior(idx, np.full(idx.size, lo))
            g_hi, _ = posterior(idx, np.full(idx.size, hi))
            theta[idx] = np.where(g_hi > 0, hi, np.where(g_lo < 0, lo, theta[idx]))

    if not standard_errors:
        if one_model:
            return AbilityEstimate(theta[0], None, None, bool(used_bisection[0]))
        return AbilityEstimate(theta, None, None, used_bisection)
    grad, info = posterior(None, theta)
    se = 1.0 / np.sqrt(info + 1.0 / prior_var)
    at_bound = ((theta >= hi) & (grad > 0)) | ((theta <= lo) & (grad < 0))
    if one_model:
        return AbilityEstimate(theta[0], se[0], bool(at_bound[0]), bool(used_bisection[0]))
    return AbilityEstimate(theta, se, at_bound, used_bisection)
