"""Standard errors of the 2PL item parameters: the curvature of the posterior, or a bootstrap over models.

The one place the formula is written. Paper, section "Model: 2PL" (appendix B): the posterior of
``(theta_m, log a_j, b_j)`` under ``theta ~ Normal(0, 1)``, ``log a ~ Normal(0, 1)``, ``b ~ Normal(0, 1)``
(the priors of :func:`irtlib.calibration.joint_map.fit_map`). With ``z = a (theta - b)``,
``g = x - P`` and ``w = P (1 - P)`` per observed cell, the observed information (the negative
Hessian of the log posterior) has the entries

==================  ==========================  ===============================
pair                per cell                    plus prior
==================  ==========================  ===============================
theta_m, theta_m    ``a^2 w``                   ``1 / sd_theta^2``
log a_j, log a_j    ``w z^2 - g z``             ``1 / sd_log_a^2``
b_j, b_j            ``a^2 w``                   ``1 / sd_b^2``
log a_j, b_j        ``-a w z + a g``
theta_m, log a_j    ``a (w z - g)``
theta_m, b_j        ``-a^2 w``
==================  ==========================  ===============================

(the expected information drops the ``g`` terms). It is diagonal in the abilities and 2 x 2
block-diagonal in the items, dense between them, so the item blocks of its inverse come from the
``n_models x n_models`` Schur complement ``S = J_tt - C J_ii^-1 C^T`` in one Cholesky
factorisation: ``Cov(item j) = D_j + D_j C_j^T S^-1 C_j D_j`` with ``D_j`` the inverse of the
item's own 2 x 2 block. The abilities' uncertainty is therefore propagated into the items' (the
SEs are those of the joint posterior, not of items given known abilities). ``se(a) = a se(log a)``
(the delta method), since the posterior is close to Normal in ``log a``, not in ``a``.

For a fit that is not the mode of that posterior (py-irt's hierarchical priors, ``engine="pyirt-authors"``)
the curvature at its parameters is only an approximation (and where it is not positive definite the
expected information stands in): the option ``method="bootstrap"`` refits the engine on models drawn
with replacement and reports the SD of each parameter over the refits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.linalg.blas import dsyrk, dtrmm
from scipy.linalg.lapack import dtrtri

from irtlib._typing import ArrayLike
from irtlib.core.kernels import bernoulli_variance, logit_z, sigmoid
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

from .blas import single_threaded_blas
from .cells import available_cores
from .joint_map import Calibration

__all__ = ["SE_METHODS", "PAPER_PRIORS", "Priors", "item_standard_errors", "calibration_standard_errors",
           "bootstrap_refits"]

#: ``method`` of :func:`item_standard_errors`.
SE_METHODS = ("observed", "expected", "bootstrap")
#: ``((mean, sd), (mean, sd), (mean, sd))`` of the Normal priors on theta, log a and b.
Priors = tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
#: The paper's priors (appendix B).
PAPER_PRIORS: Priors = ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0))
#: Items per block of the passes over the matrix (memory: a few ``n_models x ITEM_BLOCK`` arrays).
ITEM_BLOCK = 2048
#: The first pass keeps each block's ``C D`` (16 bytes a cell) for the second when all of them take at most
#: this many bytes, instead of computing them again (about half the second pass's cost).
KEEP_BYTES = 512 << 20


def _blocks(n: int) -> Iterator[slice]:
    for start in range(0, n, ITEM_BLOCK):
        yield slice(start, min(n, start + ITEM_BLOCK))


#: Rows of a block whose per-cell terms are formed at a time (a few ``CELL_ROWS x ITEM_BLOCK`` work arrays that
#: stay in a core's cache, instead of a dozen ``n_models x ITEM_BLOCK`` temporaries).
CELL_ROWS = 64


def _cell_terms_plain(x: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray, observed: bool):
    """:func:`_cell_terms` written as whole-block numpy expressions: the reference its row chunks must equal."""
    seen = ~np.isnan(x)
    z = logit_z(theta[:, None], a, b)
    p = sigmoid(z)
    w = np.where(seen, bernoulli_variance(p), 0.0)
    g = np.where(seen, np.nan_to_num(x) - p, 0.0) if observed else np.zeros_like(w)
    return (a * (w * z - g), -(a * a) * w, (w * z * z - g * z).sum(axis=0), (-a * w * z + a * g).sum(axis=0),
            (a * a) * w.sum(axis=0), (w * a**2).sum(axis=1), np.where(seen, p, 0.0).sum(axis=0))


def _cell_terms(x: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray, observed: bool):
    """Per-cell cross information of (log a_j, b_j) with theta_m, and the 2 x 2 and the abilities' sums.

    Returns ``c_al, c_b`` (n_models, n_block), ``j_aa, j_ab, j_bb`` (n_block,) without the priors,
    ``j_tt`` (n_models,), the block's share of the abilities' information ``sum_j a_j^2 w``, and
    ``p_sum`` (n_block,), each item's sum of ``P`` over the models that saw it (the expected safe count of
    :func:`irtlib.fit.summaries.item_rates`, the same sum bit for bit, so it need not form every ``P`` again). The
    numbers of :func:`_cell_terms_plain`, bit for bit: the same operations on each cell, formed
    :data:`CELL_ROWS` rows at a time in work arrays; each column sum carries on from the rows before
    (the running sum is added to the chunk's first row, then the chunk is summed down its rows, which is
    numpy's order for a column sum), each row sum is over the whole row as before.
    """
    n, k = x.shape
    c_al, c_b, j_tt = np.empty((n, k)), np.empty((n, k)), np.empty(n)
    j_aa, j_ab, w_sum, p_sum = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
    a2 = a * a
    neg_a, neg_a2 = -a, -a2
    rows = min(CELL_ROWS, n)
    work = np.empty((6, rows, k))
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        z, p, w, g, t, u = work[:, :r1 - r0]
        xs = x[r0:r1]
        seen = ~np.isnan(xs)
        all_seen = bool(seen.all())
        logit_z(theta[r0:r1, None], a, b, out=z)
        sigmoid(z, out=p)
        if not all_seen:
            p[~seen] = 0.0                    # w and g are 0 there below whatever p is
        np.copyto(t, p)                       # summed on a copy: the sum writes into the chunk's first row
        _sum_down(t, p_sum, first=r0 == 0)
        bernoulli_variance(p, out=w)
        if not observed:
            g.fill(0.0)
        elif all_seen:
            np.subtract(xs, p, out=g)
        else:
            np.subtract(np.nan_to_num(xs), p, out=g)
        if not all_seen:
            w[~seen] = 0.0
            g[~seen] = 0.0
        wz = np.multiply(w, z, out=p)                          # p is not needed again
        np.multiply(a, np.subtract(wz, g, out=c_al[r0:r1]), out=c_al[r0:r1])
        np.multiply(neg_a2, w, out=c_b[r0:r1])
        np.add.reduce(np.multiply(w, a2, out=t), axis=1, out=j_tt[r0:r1])
        np.subtract(np.multiply(wz, z, out=t), np.multiply(g, z, out=u), out=t)           # w z z - g z
        _sum_down(t, j_aa, first=r0 == 0)
        np.add(np.multiply(np.multiply(neg_a, w, out=t), z, out=t), np.multiply(a, g, out=u), out=t)
        _sum_down(t, j_ab, first=r0 == 0)                                                # -a w z + a g
        _sum_down(w, w_sum, first=r0 == 0)
    return c_al, c_b, j_aa, j_ab, a2 * w_sum, j_tt, p_sum


def _sum_down(chunk: np.ndarray, total: np.ndarray, *, first: bool) -> None:
    """``total`` becomes the column sums of the rows so far (``total`` then ``chunk``'s rows, added in order)."""
    if not first:
        np.add(total, chunk[0], out=chunk[0])
    np.add.reduce(chunk, axis=0, out=total)


def _times_inverse(c_al: np.ndarray, c_b: np.ndarray, d: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``C D`` of a block: ``(c_al d_aa + c_b d_ab, c_al d_ab + c_b d_bb)``, :data:`CELL_ROWS` rows at a time.

    The same two products and sum per cell as the whole-block expressions (the same numbers), in cache.
    """
    m_al, m_b = np.empty_like(c_al), np.empty_like(c_b)
    rows = max(1, min(CELL_ROWS, len(c_al)))
    work = np.empty((rows, c_al.shape[1]))
    for r0 in range(0, len(c_al), rows):
        r = slice(r0, r0 + rows)
        t = work[:len(c_al[r])]
        np.add(np.multiply(c_al[r], d[0], out=m_al[r]), np.multiply(c_b[r], d[1], out=t), out=m_al[r])
        np.add(np.multiply(c_al[r], d[1], out=m_b[r]), np.multiply(c_b[r], d[2], out=t), out=m_b[r])
    return m_al, m_b


def _symmetric_product(c_al: np.ndarray, c_b: np.ndarray, d: tuple) -> np.ndarray:
    """``C D C^T`` of a block (n_models x n_models, upper triangle only) by one symmetric rank-k update.

    Each item's ``D_j`` (positive definite) is ``L_j L_j^T`` (its 2 x 2 Cholesky factor), so
    ``C D C^T = F F^T`` with ``F = C L``, ``(n_models, 2 n_block)``: BLAS ``syrk`` forms the upper
    triangle of it in half the flops of the two general products ``C_al M_al^T + C_b M_b^T``.
    """
    l_aa = np.sqrt(d[0])
    l_ba = d[1] / l_aa
    l_bb = np.sqrt(np.maximum(d[2] - l_ba * l_ba, 0.0))      # the Schur complement 1 / j_aa of D_j, > 0
    k = c_al.shape[1]
    f = np.empty((2 * k, len(c_al)), order="F")              # F^T in Fortran order: syrk's A^T A, no copy
    np.add(np.multiply(c_al, l_aa, out=f[:k].T), np.multiply(c_b, l_ba), out=f[:k].T)
    np.multiply(c_b, l_bb, out=f[k:].T)
    return dsyrk(1.0, f, trans=1, lower=0)


def _inverse_quadratic_forms(w_inv: np.ndarray, m_al: np.ndarray, m_b: np.ndarray):
    """``diag(M_al^T S^-1 M_al)``, ``diag(M_b^T S^-1 M_b)``, ``diag(M_al^T S^-1 M_b)`` for ``S^-1 = W W^T``.

    ``W = R^-1`` (upper triangular, Fortran order) for the Cholesky factor ``S = R^T R``. One triangular
    product ``Y = W^T [M_al, M_b]`` (BLAS ``trmm``: half the flops of the product with ``S^-1``), then
    the column dots of ``Y``: ``m^T S^-1 m' = (W^T m)^T (W^T m')``.
    """
    k = m_al.shape[1]
    y = np.empty((len(m_al), 2 * k), order="F")
    y[:, :k], y[:, k:] = m_al, m_b
    y = dtrmm(1.0, w_inv, y, lower=0, trans_a=1, overwrite_b=1)
    y_al, y_b = y[:, :k], y[:, k:]
    return np.einsum("ij,ij->j", y_al, y_al), np.einsum("ij,ij->j", y_b, y_b), np.einsum("ij,ij->j", y_al, y_b)


def _scale_constraints(theta: np.ndarray) -> np.ndarray:
    """``L`` (2, n_models): the linearised mean and SD of the abilities, the two directions the scale fixes."""
    n = len(theta)
    centred = theta - theta.mean()
    sd = np.sqrt((centred**2).mean())
    return np.stack([np.full(n, 1.0 / n), centred / (n * sd if sd > 0 else 1.0)])


def _in_order(fn: Callable[[slice], Any], blocks: list[slice], *, n_threads: int,
              progress: Callable[[], None] | None = None) -> Iterator[Any]:
    """``fn(cols)`` of every item block, yielded in block order, computed ``n_threads`` blocks at a time.

    numpy and (one-threaded) BLAS release the GIL, so the blocks' arithmetic runs on several cores;
    the caller combines the results in block order, so the numbers do not depend on ``n_threads``.
    At most ``n_threads`` results are held at once (each can be an ``n_models x n_models`` product).
    """
    if n_threads <= 1 or len(blocks) <= 1:
        for cols in blocks:
            yield fn(cols)
            if progress is not None:
                progress()
        return
    with ThreadPoolExecutor(n_threads) as pool:
        for start in range(0, len(blocks), n_threads):
            for found in pool.map(fn, blocks[start:start + n_threads]):
                yield found
                if progress is not None:
                    progress()


def _posterior_covariance(x: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray, *,
                          priors, observed: bool, given_scale: bool, extra_tt: np.ndarray | float = 0.0,
                          n_threads: int = 1, progress: Callable[[int, int], None] | None = None):
    """``(var log a, var b, cov(log a, b), var theta, p_sums)`` from the inverse of the information, or None if not PD.

    ``p_sums`` (n_items,): each item's sum of ``P`` over the models that saw it (:func:`_cell_terms`).

    With ``given_scale`` the covariance is the one conditional on the abilities' mean and SD (the
    linear constraints ``L theta`` of :func:`_scale_constraints`):
    ``Sigma - Sigma L^T (L Sigma_tt L^T)^-1 L Sigma``, where the items' covariance with the abilities
    is ``-D C^T S^-1``. ``extra_tt`` (n_models,) is information about the abilities from items held
    fixed (fixed-parameter calibration). Two passes over the items in blocks of :data:`ITEM_BLOCK`
    (the Schur complement, then each block's variances), each block's work on one of ``n_threads``
    threads; ``progress(done, total)`` after each block of either pass (``total`` = twice the blocks).
    """
    (_, st), (_, sa), (_, sb) = priors
    n_models, n_items = x.shape
    blocks = list(_blocks(n_items))
    done = iter(range(1, 2 * len(blocks) + 1))
    keep = 16 * n_models * n_items <= KEEP_BYTES
    tick = None if progress is None else (lambda: progress(next(done), 2 * len(blocks)))

    def item_inverse(j_aa, j_ab, j_bb):             # D_j = inverse of the item's block, None if not PD
        j_aa, j_bb = j_aa + 1.0 / sa**2, j_bb + 1.0 / sb**2
        det = j_aa * j_bb - j_ab**2
        if not ((j_aa > 0) & (det > 0)).all():
            return None
        return j_bb / det, -j_ab / det, j_aa / det

    def schur_part(cols):                           # this block's share of C D C^T and of the abilities' information
        c_al, c_b, j_aa, j_ab, j_bb, j_tt, p_sum = _cell_terms(x[:, cols], theta, a[cols], b[cols], observed)
        d = item_inverse(j_aa, j_ab, j_bb)
        if d is None:
            return None
        return (j_tt, _symmetric_product(c_al, c_b, d), (d, _times_inverse(c_al, c_b, d) if keep else None),
                p_sum)

    schur = np.zeros((n_models, n_models))
    j_tt = np.full(n_models, 1.0 / st**2) + extra_tt
    inv, p_sums = [], np.empty(n_items)
    for i, found in enumerate(_in_order(schur_part, blocks, n_threads=n_threads, progress=tick)):
        if found is None:
            return None
        cols = blocks[i]
        j_tt += found[0]
        schur -= found[1]
        inv.append(found[2])
        p_sums[cols] = found[3]
    schur[np.diag_indices(n_models)] += j_tt
    schur = np.triu(schur) + np.triu(schur, 1).T      # the products fill the upper triangle only
    try:                                              # S = R^T R
        factor = cho_factor(schur, lower=False, overwrite_a=True)
    except LinAlgError:
        return None
    # W = R^-1 (upper triangular): S^-1 = W W^T, so m^T S^-1 m' = (W^T m)^T (W^T m')
    w_inv = np.asfortranarray(np.triu(dtrtri(factor[0], lower=0)[0]))
    lt = _scale_constraints(theta).T if given_scale else np.zeros((n_models, 0))
    u = cho_solve(factor, lt)                                  # S^-1 L^T, (n_models, 2)
    k_inv = np.linalg.pinv(lt.T @ u) if given_scale else np.zeros((0, 0))
    d_of = {cols.start: d for cols, d in zip(blocks, inv, strict=True)}
    del inv

    def variances(cols):                            # this block's var log a, var b, cov
        d, kept = d_of.pop(cols.start)              # (the kept C D of the block is dropped once used)
        if kept is None:
            c_al, c_b, *_ = _cell_terms(x[:, cols], theta, a[cols], b[cols], observed)
            kept = _times_inverse(c_al, c_b, d)
        m_al, m_b = kept
        v_al, v_b = m_al.T @ u, m_b.T @ u                       # items' covariance with L theta (sign squared away)
        q_aa, q_bb, q_ab = _inverse_quadratic_forms(w_inv, m_al, m_b)
        return (d[0] + q_aa - ((v_al @ k_inv) * v_al).sum(axis=1),
                d[2] + q_bb - ((v_b @ k_inv) * v_b).sum(axis=1),
                d[1] + q_ab - ((v_al @ k_inv) * v_b).sum(axis=1))

    var_al, var_b, cov = (np.empty(n_items) for _ in range(3))
    for cols, found in zip(blocks, _in_order(variances, blocks, n_threads=n_threads, progress=tick), strict=True):
        var_al[cols], var_b[cols], cov[cols] = found
    var_theta = np.einsum("ij,ij->i", w_inv, w_inv) - ((u @ k_inv) * u).sum(axis=1)     # diag(W W^T)
    return var_al, var_b, cov, var_theta, p_sums


def _refit(values: np.ndarray, engine: str, seed: int, epochs: int, start: dict | None):
    """``(theta, a, b)`` of one bootstrap refit with ``engine``."""
    if engine == "map":
        from .joint_map import fit_map

        theta, a, b, _ = fit_map(values, start=start, n_threads=1)
        return theta, a, b
    from .joint_map import AUTHORS_PYIRT, load_pyirt_engine

    fit_pyirt = load_pyirt_engine()
    extra = AUTHORS_PYIRT if engine == "pyirt-authors" else {"lr_decay": 1.0}
    theta, a, b = fit_pyirt(values, seed=seed, epochs=epochs, **extra)
    return np.asarray(theta, float), np.asarray(a, float), np.asarray(b, float)


def bootstrap_refits(values: ArrayLike, *, engine: str = "map", n_boot: int = 100, seed: int = 0,
                     epochs: int = 1000, start: dict | None = None, align: ArrayLike | None = None,
                     progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Refit the 2PL on ``n_boot`` resamples of the models (rows drawn with replacement).

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN missing.
    engine : {"map", "pyirt", "pyirt-authors"}
        The engine of every refit (:func:`irtlib.calibration.joint_map.fit_2pl`).
    n_boot, seed : int
        Number of resamples; seeds the draws (and py-irt's streams, ``seed + r`` for refit ``r``).
    epochs : int
        py-irt epochs.
    start : dict, optional
        MAP engine: ``theta`` (n_models,), ``a``, ``b`` of the full fit; each refit starts there
        (the resampled models' abilities), so it needs few Newton steps.
    align : ndarray, shape (n_models,), optional
        The full fit's abilities: each refit is put on their scale (the linear map that gives the drawn
        models' refitted abilities the mean and SD of theirs in ``align``), so the spread is that of the
        items given the scale.
    progress : callable(done, total), optional
        Called after each refit with the refits done and ``n_boot``.

    Returns
    -------
    a, b : ndarray, shape (n_boot, n_items)
    """
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, x.shape[0], size=(n_boot, x.shape[0]))
    a_out, b_out = np.empty((n_boot, x.shape[1])), np.empty((n_boot, x.shape[1]))
    for r, pick in enumerate(rows):
        begin = None if start is None else {"theta": np.asarray(start["theta"], float)[pick],
                                            "a": start["a"], "b": start["b"]}
        theta_r, a_out[r], b_out[r] = _refit(x[pick], engine, seed + r, epochs, begin)
        if align is not None:
            ref = np.asarray(align, float)[pick]
            slope = ref.std() / theta_r.std()
            shift = ref.mean() - slope * theta_r.mean()
            a_out[r], b_out[r] = a_out[r] / slope, slope * b_out[r] + shift
        if progress is not None:
            progress(r + 1, n_boot)
    return a_out, b_out


def _as_arrays(responses, a, b, theta):
    """The response values and the parameters as float arrays in the matrix's order, checked."""
    if isinstance(responses, ResponseMatrix):
        x, source = responses.values, responses.source
        a = a.reindex(responses.items) if isinstance(a, pd.Series) else a
        b = b.reindex(responses.items) if isinstance(b, pd.Series) else b
        theta = theta.reindex(responses.models) if isinstance(theta, pd.Series) else theta
        items = pd.Index(responses.items)
    else:
        x, source, items = np.asarray(responses, dtype=float), "responses", None
    a, b, theta = (np.asarray(v, dtype=float) for v in (a, b, theta))
    if x.ndim != 2 or a.shape != x.shape[1:] or b.shape != x.shape[1:] or theta.shape != x.shape[:1]:
        raise InputError(f"{source}: parameters of shapes a {a.shape}, b {b.shape}, theta {theta.shape} do not "
                         f"match the responses' {x.shape} (models x items)")
    if not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(theta).all()):
        raise InputError(f"{source}: some item or model of the responses has no finite parameter "
                         "(parameters from another matrix?)")
    if (a <= 0).any():
        raise InputError(f"{source}: discrimination a must be positive")
    return x, a, b, theta, items


def item_standard_errors(responses: ResponseMatrix | ArrayLike, a: ArrayLike, b: ArrayLike, theta: ArrayLike, *,
                         method: str = "observed", given_scale: bool = True, priors: Priors = PAPER_PRIORS,
                         engine: str = "map", n_boot: int = 100, seed: int = 0, epochs: int = 1000,
                         fixed: ArrayLike | None = None, n_threads: int | None = None,
                         progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Standard errors of each item's ``a`` and ``b`` (and of the abilities) for a fitted 2PL.

    Parameters
    ----------
    responses : ResponseMatrix or ndarray, shape (n_models, n_items)
        The responses the parameters were fitted to (1 safe, 0 unsafe, NaN missing).
    a, b : array_like or Series, shape (n_items,)
        The fitted discriminations and difficulties (Series are aligned to the matrix's items).
    theta : array_like or Series, shape (n_models,)
        The fitted abilities of the same models.
    method : {"observed", "expected", "bootstrap"}
        ``"observed"`` (default): the inverse of the observed information of the posterior at the given
        parameters (the module docstring); right for the MAP engine and py-irt with the paper's priors.
        ``"expected"``: the same with the expected (Fisher) information. ``"bootstrap"``: the SD over
        ``n_boot`` refits of ``engine`` on the models drawn with replacement (for
        ``engine="pyirt-authors"``, whose hierarchical priors make the curvature the wrong measure).
        When the observed information is not positive definite at the given parameters (they are not a
        mode of the posterior), the expected one is used and ``attrs["information"]`` says so.
    given_scale : bool
        True (default): the errors given the scale, i.e. conditional on the mean and SD of the
        calibration models' abilities (the location and unit of the bank's scale), the errors that
        matter when items are compared on one scale, and for anything the scale does not change
        (probabilities, the CV of ``a``). False: the joint posterior's, which also carry the
        uncertainty of the scale itself; with the paper's priors that is large, because the priors on
        ``theta`` and ``log a`` pin the unit only weakly (it moves every ``b`` in proportion to ``b``).
        The bootstrap's refits are put on the fit's scale the same way (mean and SD of the drawn models'
        abilities equal to the fit's) when True.
    priors : ((float, float), (float, float), (float, float))
        Means and SDs of the Normal priors on theta, log a and b (the paper's by default).
    engine, n_boot, seed, epochs
        The bootstrap's engine, resamples, seed and py-irt epochs.
    fixed : ndarray of bool, shape (n_items,), optional
        Items whose parameters were held fixed (fixed-parameter calibration,
        :func:`irtlib.calibration.fixed.fit_fixed`): they inform the abilities but have no error of
        their own here (NaN); the scale is theirs, so ``given_scale`` does not apply. Observed or
        expected information only.
    n_threads : int, optional
        Observed or expected information: threads that share the blocks of items (default: every core
        this process may use). The result does not depend on it.
    progress : callable(done, total), optional
        Called as the work advances: after each block of :data:`ITEM_BLOCK` items of the information's
        two passes over the matrix (``total`` = twice the blocks), or after each bootstrap refit.

    Returns
    -------
    DataFrame, indexed by item (the matrix's items, or 0..n_items-1 for an array)
        ``se_a``, ``se_b`` and ``cov_ab`` (the covariance of ``a`` and ``b``). ``attrs`` holds
        ``method``, ``information`` and ``se_theta`` (ndarray, shape (n_models,); observed/expected only); with
        the observed or expected information and no ``fixed`` items also ``expected_sums`` (ndarray, shape
        (n_items,)): each item's sum of ``P(theta_m, a_j, b_j)`` over the models that saw it, the sums of
        :func:`irtlib.fit.summaries.item_rates` bit for bit (made by the same pass over the cells).

    Raises
    ------
    InputError
        Shapes that do not match, non-finite parameters, an unknown method.
    """
    if method not in SE_METHODS:
        raise InputError(f"unknown standard-error method {method!r}; choose one of {SE_METHODS}")
    x, a, b, theta, items = _as_arrays(responses, a, b, theta)
    attrs: dict = {"method": method}
    if method == "bootstrap":
        if fixed is not None:
            raise InputError("fixed items: use method='observed' or 'expected' (the bootstrap refits everything)")
        start = {"theta": theta, "a": a, "b": b} if engine == "map" else None
        a_r, b_r = bootstrap_refits(x, engine=engine, n_boot=n_boot, seed=seed, epochs=epochs, start=start,
                                    align=theta if given_scale else None, progress=progress)
        se_a, se_b = a_r.std(axis=0, ddof=1), b_r.std(axis=0, ddof=1)
        cov_ab = ((a_r - a_r.mean(0)) * (b_r - b_r.mean(0))).sum(axis=0) / (n_boot - 1)
        attrs.update(given_scale=given_scale,
                     information=f"bootstrap over models ({n_boot} refits, {engine} engine, seed {seed})")
    else:
        free, extra_tt = np.ones(x.shape[1], dtype=bool), 0.0
        if fixed is not None:
            free = ~np.asarray(fixed, dtype=bool)
            p = sigmoid(logit_z(theta[:, None], a[~free], b[~free]))
            extra_tt = np.where(np.isnan(x[:, ~free]), 0.0, bernoulli_variance(p) * a[~free] ** 2).sum(axis=1)
            given_scale = False
        attrs.update(information=method, given_scale=given_scale)
        args = (x, theta, a, b) if free.all() else (x[:, free], theta, a[free], b[free])     # no copy if none fixed
        threads = available_cores() if n_threads is None else max(1, int(n_threads))
        with single_threaded_blas():     # one BLAS thread a block: the blocks share the cores (libraries found once)
            found = _posterior_covariance(*args, priors=priors, observed=method == "observed",
                                          given_scale=given_scale, extra_tt=extra_tt, n_threads=threads,
                                          progress=progress)
            if found is None and method == "observed":
                found = _posterior_covariance(*args, priors=priors, observed=False, given_scale=given_scale,
                                              extra_tt=extra_tt, n_threads=threads, progress=progress)
                attrs["information"] = ("expected (the observed information is not positive definite at these "
                                        "parameters: not a posterior mode)")
        if found is None:
            raise InputError("the information of the posterior is singular at these parameters")
        var_al, var_b, cov, var_theta, p_sums = found
        se_a, se_b, cov_ab = (np.full(x.shape[1], np.nan) for _ in range(3))
        se_a[free], se_b[free], cov_ab[free] = a[free] * np.sqrt(var_al), np.sqrt(var_b), a[free] * cov
        attrs["se_theta"] = np.sqrt(var_theta)
        if free.all():
            attrs["expected_sums"] = p_sums
    out = pd.DataFrame({"se_a": se_a, "se_b": se_b, "cov_ab": cov_ab},
                       index=items if items is not None else pd.RangeIndex(x.shape[1]))
    out.attrs.update(attrs)
    return out


def calibration_standard_errors(cal: Calibration, matrix: ResponseMatrix, *, method: str | None = None,
                                **options: Any) -> pd.DataFrame:
    """:func:`item_standard_errors` of a :class:`~irtlib.calibration.joint_map.Calibration` fitted to ``matrix``.

    ``method`` defaults to ``"observed"`` for every engine; the bootstrap refits with the fit's engine (its seed
    and epochs).
    """
    method = method or "observed"
    if method == "bootstrap":
        options.setdefault("engine", cal.engine)
        options.setdefault("seed", int(cal.settings.get("seed", 0)))
        options.setdefault("epochs", int(cal.settings.get("epochs", 1000)))
    return item_standard_errors(matrix, cal.a, cal.b, cal.theta, method=method, **options)
