r"""py-irt's hierarchical 2PL fit, as the paper's released code runs it, for many training sets at once.

The authors' protocol refits the 2PL with py-irt on every split's training models (SUMMARY.md,
"What the authors' released code does", Calibration): py-irt's hierarchical priors

.. math::

    \mu_b, \mu_\theta, \mu_a \sim N(0, 10^6), \qquad u_b, u_\theta, u_a \sim \mathrm{Gamma}(1, 1),

    \theta_m \sim N(\mu_\theta, 1/u_\theta), \quad b_j \sim N(\mu_b, 1/u_b), \quad
    a_j \sim \mathrm{LogNormal}(\mu_a, 1/u_a),

a mean-field guide, ``Trace_ELBO`` with one sample, Adam at learning rate 0.1 decayed by 0.9999 per
epoch, 1,000 full-batch epochs, seed 0 for every split, and the parameters after the epoch with the
lowest loss. One such fit takes about 10 s here, so the 100 splits of a benchmark take about
17 minutes one after the other (their own pipeline: 24 min 35 s for SimpleSafetyTests).

:func:`fit_2pl_splits` writes the same model, guide, loss and optimiser directly in torch with a
leading split axis: parameters of shape ``(n_splits, n_models)`` and ``(n_splits, n_items)``, each
split's likelihood restricted to its own training rows, its own hyper-parameters, its own loss and
its own best epoch. The ELBO of the batch is a sum of independent per-split terms and Adam is
element-wise, so each split follows the optimisation a separate fit would. Each split also gets its
own random stream, seeded with ``seed`` and drawn in py-irt's order (the trainer's initial model and
guide calls, then one guide sample per epoch), so a split's random
draws are those of a separate py-irt fit with that seed; what remains is float rounding (sums taken
in another order), and a split's result does not depend on the other splits in the batch.

torch is imported when a fit runs, not with :mod:`irtlib`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from irtlib._typing import ArrayLike
from irtlib.errors import InputError, MissingDependencyError

__all__ = ["BatchFit", "fit_2pl_splits", "fit_hierarchical_batch"]

#: Hyper-prior constants (the same as :mod:`irtlib.calibration.pyirt`'s, kept here so that this module
#: does not need py-irt): every mu ~ Normal(0, 1e6), every u ~ Gamma(1, 1); guide of each mu
#: starts at loc 0, scale 10; every other factor at loc 0, scale 1.
HYPER_LOC_SD = 1.0e6
HYPER_GAMMA = (1.0, 1.0)
HYPER_GUIDE_INIT_SCALE = 10.0
GUIDE_INIT_SCALE = 1.0
_HALF_LOG_2PI = math.log(math.sqrt(2 * math.pi))


@dataclass(frozen=True)
class BatchFit:
    """The result of :func:`fit_hierarchical_batch`.

    Attributes
    ----------
    a, b : ndarray, shape (n_splits, n_items)
        Discrimination ``exp(loc)`` and difficulty ``loc`` of the guide, per split, after the reported
        epoch (the best one, or the last).
    theta : ndarray, shape (n_splits, n_rows)
        Guide means of the abilities (NaN in padded rows). The authors discard them.
    best_epoch : ndarray of int, shape (n_splits,)
        The epoch (0-based) whose parameters are reported, per split.
    loss : ndarray, shape (n_splits, epochs)
        Each split's single-sample negative ELBO at every epoch, evaluated before that epoch's step
        (py-irt's loss).
    """

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    best_epoch: np.ndarray
    loss: np.ndarray


def fit_2pl_splits(values: ArrayLike, train_rows: Sequence[ArrayLike], *, epochs: int = 1000, lr: float = 0.1,
                   lr_decay: float = 0.9999, seed: int = 0, best: bool = True,
                   threads: int | None = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    """Fit the authors' hierarchical 2PL to every split's training models in one batched fit.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        Responses: 1 safe, 0 unsafe, NaN missing (not an observation).
    train_rows : sequence of array_like of int
        One entry per split: the row indices of ``values`` that split is calibrated on, in the order
        py-irt should see them (the authors': file order). Splits may have different sizes.
    epochs, lr, lr_decay : int, float, float
        1,000 full-batch epochs, Adam learning rate 0.1, multiplied by ``lr_decay`` after every epoch
        (py-irt's default 0.9999, which the authors keep).
    seed : int
        Every split's random stream starts from this seed (the authors use 0 for every split).
    best : bool
        Report each split's parameters after its own epoch with the lowest loss (py-irt's
        ``best_params``, as the authors do); ``False`` reports the last epoch's.
    threads : int or None
        torch intra-op threads during the fit (restored afterwards); ``None`` leaves torch's setting.

    Returns
    -------
    list of (a, b)
        Per split, ``a`` and ``b`` of shape (n_items,) (float64), in the column order of ``values``.

    Raises
    ------
    InputError
        ``values`` not 2-D or not 0/1/NaN; a split with a row index out of range, a repeated row, or
        fewer than two rows; bad optimiser settings.
    MissingDependencyError
        torch is not installed (``pip install 'irtlib[pyirt]'``).

    See Also
    --------
    fit_hierarchical_batch : the same fit with abilities, best epochs and loss curves.
    irtlib.fit_2pl : ``engine="pyirt-authors"`` runs one such fit through py-irt itself.

    Notes
    -----
    SUMMARY.md, "What the authors' released code does" (Calibration). On SimpleSafetyTests, the
    batched fit of the authors' 100 splits takes about 20 s here, against about 17 minutes for 100
    separate py-irt fits (``benchmarks/bench_authors_calibration.py``).
    """
    fit = fit_hierarchical_batch(values, train_rows, epochs=epochs, lr=lr, lr_decay=lr_decay, seed=seed,
                                 best=best, threads=threads)
    return [(fit.a[s].copy(), fit.b[s].copy()) for s in range(fit.a.shape[0])]


def fit_hierarchical_batch(values: ArrayLike, train_rows: Sequence[ArrayLike], *, epochs: int = 1000,
                           lr: float = 0.1, lr_decay: float = 0.9999, seed: int = 0, best: bool = True,
                           threads: int | None = 1) -> BatchFit:
    """:func:`fit_2pl_splits` with everything the fit produced (abilities, best epochs, losses).

    Parameters
    ----------
    values, train_rows, epochs, lr, lr_decay, seed, best, threads
        As in :func:`fit_2pl_splits`.

    Returns
    -------
    BatchFit
        ``a``, ``b`` of shape (n_splits, n_items); ``theta`` of shape (n_splits, max training rows),
        row ``r`` of split ``s`` being model ``train_rows[s][r]``; ``best_epoch`` (n_splits,);
        ``loss`` (n_splits, epochs).
    """
    x, rows = _validate(values, train_rows)
    epochs, lr, lr_decay, seed = _check_settings(epochs, lr, lr_decay, seed)
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - the light install has no torch
        raise MissingDependencyError("the batched py-irt fit needs torch, which is not installed: "
                                     "install it with pip install 'irtlib[pyirt]'") from exc
    n_threads = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(int(threads))
        return _fit(torch, x, rows, epochs=epochs, lr=lr, lr_decay=lr_decay, seed=seed, best=best)
    finally:
        torch.set_num_threads(n_threads)


# ----------------------------------------------------------------------------- checks
def _validate(values, train_rows) -> tuple[np.ndarray, list[np.ndarray]]:
    x = np.asarray(values, dtype=float)
    if x.ndim != 2 or 0 in x.shape:
        raise InputError(f"values must be a non-empty 2-D array (n_models, n_items), got shape {x.shape}")
    observed = ~np.isnan(x)
    if not np.all((x[observed] == 0.0) | (x[observed] == 1.0)):
        bad = np.argwhere(observed & (x != 0.0) & (x != 1.0))[0]
        raise InputError(f"values must contain only 0, 1 or NaN; row {bad[0]}, column {bad[1]} holds "
                         f"{x[bad[0], bad[1]]!r}")
    if isinstance(train_rows, np.ndarray) and train_rows.ndim == 1 and train_rows.dtype != object:
        raise InputError("train_rows must be a sequence of index arrays, one per split (got one flat array)")
    if len(train_rows) == 0:
        raise InputError("train_rows is empty: give at least one split")
    rows = []
    for s, r in enumerate(train_rows):
        arr = np.asarray(r)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise InputError(f"train_rows[{s}] must be a 1-D array of integer row indices, got dtype "
                             f"{arr.dtype} and shape {arr.shape}")
        if arr.size < 2:
            raise InputError(f"train_rows[{s}] has {arr.size} row(s): a calibration needs at least two models")
        if arr.min() < 0 or arr.max() >= x.shape[0]:
            raise InputError(f"train_rows[{s}] holds row {int(arr.min() if arr.min() < 0 else arr.max())}, "
                             f"outside 0..{x.shape[0] - 1} (values has {x.shape[0]} rows)")
        if np.unique(arr).size != arr.size:
            raise InputError(f"train_rows[{s}] repeats a row: each training model counts once")
        rows.append(arr.astype(np.int64))
    return x, rows


def _check_settings(epochs, lr, lr_decay, seed):
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise InputError(f"epochs must be a positive integer, got {epochs!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise InputError(f"lr must be a positive number, got {lr!r}")
    if not (isinstance(lr_decay, (int, float)) and math.isfinite(lr_decay) and 0 < lr_decay <= 1):
        raise InputError(f"lr_decay must be in (0, 1], got {lr_decay!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(epochs), float(lr), float(lr_decay), int(seed)


# ----------------------------------------------------------------------------- the fit
class _Streams:
    """One torch generator per split, drawing in the order a py-irt fit of that split draws.

    A guide sample of py-irt's hierarchical 2PL draws, in order: for b, theta and a, a scalar
    Normal (mu) and a scalar Gamma (u); then Normal noise for theta (n rows), b and log a (n_items
    each). The prior sample the trainer draws once before training has the same layout, with
    Gamma(1, 1) for each u.
    """

    def __init__(self, torch, sizes: np.ndarray, n_items: int, seed: int):
        self.torch = torch
        sizes = [int(n) for n in sizes]
        self.gens = [torch.Generator().manual_seed(seed) for _ in sizes]
        n_splits, n_max = len(sizes), max(sizes)
        self.eps_mu = torch.zeros((n_splits, 3))
        self.eps_theta = torch.zeros((n_splits, n_max))
        self.eps_b = torch.zeros((n_splits, n_items))
        self.eps_a = torch.zeros((n_splits, n_items))
        self.gamma = torch.zeros((n_splits, 3))
        # Views into the buffers, made once: per split, the three one-element mu slots and the
        # theta (its own size), b and log-a rows.
        self._views = [([self.eps_mu[s, k:k + 1] for k in range(3)], self.eps_theta[s, :n], self.eps_b[s],
                        self.eps_a[s]) for s, n in enumerate(sizes)]

    def draw(self, alpha) -> None:
        """Fill the noise buffers; ``alpha`` (n_splits, 3) are the Gamma concentrations (no grad)."""
        std_gamma = self.torch._standard_gamma
        concentrations = alpha.reshape(-1).unbind()
        gammas = []
        for g, (mus, theta, b, a), conc in zip(self.gens, self._views, _chunks(concentrations, 3), strict=True):
            for mu, c in zip(mus, conc, strict=True):
                mu.normal_(generator=g)
                gammas.append(std_gamma(c, generator=g))
            theta.normal_(generator=g)
            b.normal_(generator=g)
            a.normal_(generator=g)
        self.gamma = self.torch.stack(gammas).reshape(alpha.shape)


def _chunks(seq, size):
    return [seq[i:i + size] for i in range(0, len(seq), size)]


def _normal_log_prob(torch, value, loc, scale):
    """``Normal(loc, scale).log_prob(value)``, the expression torch uses."""
    return -((value - loc) ** 2) / (2 * scale**2) - torch.log(scale) - _HALF_LOG_2PI


def _gamma_log_prob(torch, value, concentration, rate):
    """``Gamma(concentration, rate).log_prob(value)``, the expression torch uses."""
    return (torch.xlogy(concentration, rate) + torch.xlogy(concentration - 1, value) - rate * value
            - torch.lgamma(concentration))


def _log_likelihood_function(torch):
    """Per-split Bernoulli log-likelihood of the 2PL with its gradient written out (one torch Function).

    ``f(theta (S, n), b (S, m), a (S, m), sign (S, n, m), w (S, n, m) or None) -> (S,)``: the sum over
    cells of ``w log sigmoid(sign z)`` with ``z = a (theta - b)`` and ``sign = 2 x - 1``, which is
    ``Bernoulli(logits=z).log_prob(x)``. The gradient uses ``d/dz = sign sigmoid(-sign z) =
    -sign expm1(log sigmoid(sign z))`` and ``sum_m r_mj (theta_m - b_j) = (r^T theta)_j - b_j sum_m r_mj``,
    so that a step takes a few passes over the (S, n, m) cells instead of autograd's many.
    """

    class LogLik(torch.autograd.Function):
        @staticmethod
        def forward(ctx, theta, b, a, sign, w):
            # z = theta a - a b for every cell, as one batched outer product plus a row offset
            z = torch.baddbmm((-(a * b))[:, None, :], theta[:, :, None], a[:, None, :])
            ll = torch.nn.functional.logsigmoid(z.mul_(sign))
            ctx.save_for_backward(theta, b, a, sign, w, ll)
            return (ll if w is None else ll * w).sum((1, 2))

        @staticmethod
        def backward(ctx, grad):
            theta, b, a, sign, w, ll = ctx.saved_tensors
            r = torch.expm1(ll).mul_(sign).neg_()                  # d log p / d z, cell by cell
            if w is not None:
                r.mul_(w)
            g = grad[:, None]
            r_items = r.sum(1)                                     # (S, m)
            g_theta = torch.bmm(r, a[:, :, None])[:, :, 0] * g     # sum_j r_mj a_j
            g_a = (torch.bmm(r.transpose(1, 2), theta[:, :, None])[:, :, 0] - b * r_items) * g
            g_b = -(r_items * a) * g
            return g_theta, g_b, g_a, None, None

    return LogLik.apply


def _fit(torch, x_np, rows, *, epochs, lr, lr_decay, seed, best):
    n_splits, n_items = len(rows), x_np.shape[1]
    sizes = np.array([r.size for r in rows])
    n_max = int(sizes.max())
    f32 = torch.float32
    # Data, padded to the largest training set: x (S, n, m), cell weights w (1 observed, 0 not).
    index = np.zeros((n_splits, n_max), dtype=np.int64)
    row_ok = np.zeros((n_splits, n_max), dtype=bool)
    for s, r in enumerate(rows):
        index[s, :r.size] = r
        row_ok[s, :r.size] = True
    cells = x_np[index]
    weight_np = (~np.isnan(cells)) & row_ok[:, :, None]
    x = torch.from_numpy(np.where(weight_np, cells, 0.0)).to(f32)
    w = None if weight_np.all() else torch.from_numpy(weight_np).to(f32)   # None: every cell observed
    sign = x * 2 - 1                                                          # +1 safe, -1 unsafe
    row_w = torch.from_numpy(row_ok).to(f32)

    def param(shape, init):
        return torch.full(shape, math.log(init) if init != 0.0 else 0.0, dtype=f32).requires_grad_()

    # Unconstrained variational parameters (positive ones stored as logs, as pyro stores them).
    log10 = torch.log(torch.tensor(HYPER_GUIDE_INIT_SCALE, dtype=f32)).item()
    p = {
        "loc_mu": torch.zeros((n_splits, 3), dtype=f32).requires_grad_(),     # order: b, theta, a
        "scale_mu": torch.full((n_splits, 3), log10, dtype=f32).requires_grad_(),
        "alpha": param((n_splits, 3), 1.0), "beta": param((n_splits, 3), 1.0),
        "loc_theta": torch.zeros((n_splits, n_max), dtype=f32).requires_grad_(),
        "scale_theta": param((n_splits, n_max), GUIDE_INIT_SCALE),
        "loc_b": torch.zeros((n_splits, n_items), dtype=f32).requires_grad_(),
        "scale_b": param((n_splits, n_items), GUIDE_INIT_SCALE),
        "loc_a": torch.zeros((n_splits, n_items), dtype=f32).requires_grad_(),
        "scale_a": param((n_splits, n_items), GUIDE_INIT_SCALE),
    }
    log_likelihood = _log_likelihood_function(torch)
    optimizer = torch.optim.Adam(list(p.values()), lr=lr)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=lr_decay)
    streams = _Streams(torch, sizes, n_items, seed)

    # py-irt's trainer runs the model once (a prior sample) and the guide once (initial parameters)
    # before its first SVI step: two draws before the first step's.
    ones = torch.ones((n_splits, 3), dtype=f32)
    streams.draw(ones * HYPER_GAMMA[0])
    streams.draw(ones)

    hyper_sd = torch.tensor(HYPER_LOC_SD, dtype=f32)
    g_conc, g_rate = torch.tensor(HYPER_GAMMA[0], dtype=f32), torch.tensor(HYPER_GAMMA[1], dtype=f32)
    losses = np.empty((n_splits, epochs))
    best_loss = torch.full((n_splits,), math.inf, dtype=torch.float64)
    keep = {k: torch.zeros_like(p[k]).detach() for k in ("loc_theta", "loc_b", "loc_a")}
    best_epoch = np.zeros(n_splits, dtype=np.int64)
    for epoch in range(epochs):
        scale_mu, alpha, beta = p["scale_mu"].exp(), p["alpha"].exp(), p["beta"].exp()
        streams.draw(alpha.detach())
        # Reparameterised Gamma draw: value of the sample, gradient d sample / d alpha (implicit).
        g_raw = streams.gamma
        g_draw = g_raw + (alpha - alpha.detach()) * torch._standard_gamma_grad(alpha.detach(), g_raw)
        u = (g_draw / beta).clamp(min=torch.finfo(f32).tiny)
        mu = p["loc_mu"] + streams.eps_mu * scale_mu
        s_theta, s_b, s_a = p["scale_theta"].exp(), p["scale_b"].exp(), p["scale_a"].exp()
        theta = p["loc_theta"] + streams.eps_theta * s_theta
        b = p["loc_b"] + streams.eps_b * s_b
        log_a = p["loc_a"] + streams.eps_a * s_a

        # log p (hyper-priors, priors, likelihood) and log q (the guide at its own draws), site by
        # site, each a (S,) sum; the -log a Jacobian terms of the two LogNormals cancel.
        mu_b, mu_t, mu_a = mu[:, 0:1], mu[:, 1:2], mu[:, 2:3]
        sd_b, sd_t, sd_a = 1.0 / u[:, 0:1], 1.0 / u[:, 1:2], 1.0 / u[:, 2:3]
        log_lik = log_likelihood(theta, b, log_a.exp(), sign, w)
        log_p = (_normal_log_prob(torch, mu, torch.zeros(()), hyper_sd).sum(1),
                 _gamma_log_prob(torch, u, g_conc, g_rate).sum(1),
                 (_normal_log_prob(torch, theta, mu_t, sd_t) * row_w).sum(1),
                 _normal_log_prob(torch, b, mu_b, sd_b).sum(1),
                 _normal_log_prob(torch, log_a, mu_a, sd_a).sum(1),
                 log_lik)
        log_q = (_normal_log_prob(torch, mu, p["loc_mu"], scale_mu).sum(1),
                 _gamma_log_prob(torch, u, alpha, beta).sum(1),
                 (_normal_log_prob(torch, theta, p["loc_theta"], s_theta) * row_w).sum(1),
                 _normal_log_prob(torch, b, p["loc_b"], s_b).sum(1),
                 _normal_log_prob(torch, log_a, p["loc_a"], s_a).sum(1))
        loss = sum(log_q) - sum(log_p)                        # (S,): one independent term per split
        optimizer.zero_grad(set_to_none=False)
        loss.sum().backward()
        optimizer.step()
        scheduler.step()
        # The loss py-irt compares: site sums added in double precision (pyro adds Python floats).
        loss64 = sum(t.detach().double() for t in log_q) - sum(t.detach().double() for t in log_p)
        losses[:, epoch] = loss64.numpy()
        if best:   # py-irt keeps the parameters after the step whose (pre-step) loss is the lowest
            better = loss64 < best_loss
            if bool(better.any()):
                best_loss = torch.where(better, loss64, best_loss)
                best_epoch[better.numpy()] = epoch
                for k, kept in keep.items():
                    kept[better] = p[k].detach()[better]
    if not best:
        keep = {k: p[k].detach() for k in keep}
        best_epoch[:] = epochs - 1
    a = np.exp(keep["loc_a"].numpy().astype(np.float64))
    b_out = keep["loc_b"].numpy().astype(np.float64)
    theta_out = np.where(row_ok, keep["loc_theta"].numpy().astype(np.float64), np.nan)
    return BatchFit(a=a, b=b_out, theta=theta_out, best_epoch=best_epoch, loss=losses)
