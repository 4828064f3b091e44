"""The previous form of the GRM's expected log-likelihood and gradients, to show the current one gives the same bits.

:func:`expected_loglik` is ``irtlib.extended.grm._expected_loglik`` as it was before its sums over the
models (or nodes) and over the thresholds were written as reductions of a transposed copy and as two
additions (``_sum_middle``, ``_sum_last``) and before ``theta - b`` was computed once for ``z`` and the
gradient of ``log a``. Same signature, so a test or benchmark swaps it in with ``monkeypatch``.
"""

from __future__ import annotations

import numpy as np

from irtlib.extended.grm import _cat_tables


def expected_loglik(alpha, c, b, nodes, counts, *, want_theta=False, z=None, lp=None, ds=None, hot=None):
    """``irtlib.extended.grm._expected_loglik`` as it was (numpy's sums over axes 1 and 2).

    ``hot`` (the current form's precomputed ``counts > 0`` of 0/1 counts) is accepted and not used: the
    ratio ``r_k / P_k`` is computed from the counts, as it was.
    """
    a = np.exp(alpha)
    if z is None:
        z = a[:, None, None] * (nodes[None, :, None] - b[:, None, :])
        lp, ds = _cat_tables(z)
    elif ds is None:
        ds = _cat_tables(z)[1]
    ll = float((counts * lp).sum())
    with np.errstate(over="ignore"):
        ratio = np.where(counts > 0, counts * np.exp(-lp), 0.0)
    g_z = ds * (ratio[..., 1:] - ratio[..., :-1])
    g_alpha = a * (g_z * (nodes[None, :, None] - b[:, None, :])).sum(axis=(1, 2))
    g_b = -a[:, None] * g_z.sum(axis=1)
    tail = np.cumsum(g_b[:, ::-1], axis=1)[:, ::-1]
    g_c = np.concatenate([tail[:, :1], tail[:, 1:] * np.exp(c[:, 1:])], axis=1)
    g_theta = (a[:, None] * g_z.sum(axis=2)).sum(axis=0) if want_theta else None
    return ll, g_alpha, g_c, g_b, g_theta, lp
