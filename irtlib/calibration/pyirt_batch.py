r"""py-irt's hierarchical 2PL fit, as the paper's released code runs it, for many training sets at once.

The paper calibrates a 2PL (the paper, Section "Model: 2PL"); the authors' released code refits it
with py-irt on every split's training models: py-irt's hierarchical priors

.. math::

    \mu_b, \mu_\theta, \mu_a \sim N(0, 10^6), \qquad u_b, u_\theta, u_a \sim \mathrm{Gamma}(1, 1),

    \theta_m \sim N(\mu_\theta, 1/u_\theta), \quad b_j \sim N(\mu_b, 1/u_b), \quad
    a_j \sim \mathrm{LogNormal}(\mu_a, 1/u_a),

a mean-field guide, ``Trace_ELBO`` with one sample, Adam at learning rate 0.1 decayed by 0.9999 per
epoch, 1,000 full-batch epochs, seed 0 for every split, and the parameters after the epoch with the
lowest loss, all in float32. One such fit takes about 10 s on an idle machine here, so the 100 splits
of a benchmark take about 17 minutes one after the other (their own pipeline: 24 min 35 s for
SimpleSafetyTests).

:func:`fit_2pl_splits` writes the same model, guide, loss and optimiser directly in torch with a
leading split axis: parameters of shape ``(n_splits, n_models)`` and ``(n_splits, n_items)``, each
split's likelihood restricted to its own training rows, its own hyper-parameters, its own loss and
its own best epoch. The ELBO of the batch is a sum of independent per-split terms and Adam is
element-wise, so each split follows the optimisation a separate fit would. Each split also gets its
own random stream, seeded with ``seed`` and drawn in py-irt's order (the trainer's initial model and
guide calls, then one guide sample per epoch), so a split's random draws are those of a separate
py-irt fit with that seed; what remains is float rounding (sums taken in another order).

Where the time goes, per epoch: the likelihood's (n_splits, n_models, n_items) cells, one
exponential and one division per cell in a single pass that gives the loss and its gradient
together, in C (:mod:`irtlib.calibration.fused_kernel`, compiled at first use; :class:`_Likelihood`,
about ten torch passes, where no compiler builds it); each split's own generator, 9 small draws per
split and epoch (the Gamma draws are rejection-sampled, so a split's stream position depends on its
own state and cannot be drawn for all splits at once), made for every split in one C call that draws
torch's numbers bit for bit (:mod:`irtlib.calibration.stream_kernel`, checked against torch when it
loads; otherwise a Python loop of torch calls, about a fifth of the fit's time); the guide's sample
and the priors' and guides' terms, one C pass over the (n_splits, n_models + 2 n_items) columns
each; a few dozen (n_splits, 3) operations for the hyper-parameters (their gradient written out
rather than taken by autograd), numpy's float32 arithmetic with torch's own transcendental functions
(:class:`_HyperTerms`: torch's numbers without its dispatch cost per operation); and Adam on one
flat parameter tensor, in one C pass that gives torch's numbers bit for bit
(:mod:`irtlib.calibration.adam_kernel`, checked against torch when it loads; otherwise torch's seven
operations). ``workers=2`` fits half of the cells in a second process.

``priors="paper"`` fits the text's fixed-prior 2PL instead (``theta``, ``b`` and ``log a`` each
``N(0, 1)``; :class:`irtlib.calibration.pyirt.PaperTwoParamLog`): the same guide, loss and optimiser
without the hyper-parameter sites, the guide drawing theta, b and log a alone; with a constant
learning rate and the last epoch's parameters it is ``fit_2pl(engine="pyirt")``'s py-irt fit to float
rounding (about 2e-7 on small matrices), tens of times faster.

A split's result does not depend on the other splits of its batch, bit for bit (the C kernels take
each split through the same code in its own loop; with the torch likelihood, in batches of two
splits or more, every per-cell operand holds each split's cells at a 64-float boundary, so the
elementwise kernels and the matrix products run the same code on a split's cells wherever it sits),
so splitting the batch between processes or caching each split
(:mod:`irtlib.calibration.split_cache`) changes no number.

torch is imported when a fit runs, not with :mod:`irtlib`.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from irtlib._typing import ArrayLike
from irtlib.errors import InputError, MissingDependencyError

__all__ = ["BatchFit", "fit_2pl_splits", "fit_hierarchical_batch", "check_splits"]

#: Hyper-prior constants (the same as :mod:`irtlib.calibration.pyirt`'s, kept here so that this module
#: does not need py-irt): every mu ~ Normal(0, 1e6), every u ~ Gamma(1, 1); guide of each mu
#: starts at loc 0, scale 10; every other factor at loc 0, scale 1.
HYPER_LOC_SD = 1.0e6
HYPER_GAMMA = (1.0, 1.0)
HYPER_GUIDE_INIT_SCALE = 10.0
GUIDE_INIT_SCALE = 1.0
#: The models :func:`fit_2pl_splits` fits: py-irt's hierarchical priors (the authors'), or the text's fixed ones.
PRIORS = ("hierarchical", "paper")
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
                   threads: int | None = 1, workers: int = 1,
                   priors: str = "hierarchical") -> list[tuple[np.ndarray, np.ndarray]]:
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
    seed : int or sequence of int
        Every split's random stream starts from this seed (the authors use 0 for every split); a
        sequence gives each split its own (one per split: the paper's protocol seeds each split's
        calibration apart), so that splits of different seeds share one batched fit.
    best : bool
        Report each split's parameters after its own epoch with the lowest loss (py-irt's
        ``best_params``, as the authors do); ``False`` reports the last epoch's.
    threads : int or None
        torch intra-op threads during the fit (restored afterwards); ``None`` leaves torch's setting.
    workers : int
        Processes to fit in: the splits are cut into ``workers`` contiguous groups of about equal
        numbers of training cells, the first fitted here, the others in worker processes started
        once per Python process (``spawn``: a script calling this must guard its top level with
        ``if __name__ == "__main__":``). The numbers do not depend on it (a split's fit does not
        depend on the rest of its batch). 2 uses both cores of a 2-core machine.
    priors : {"hierarchical", "paper"}
        ``"hierarchical"``: py-irt's hierarchical priors, as the authors fit them. ``"paper"``: the
        text's fixed priors ``theta ~ N(0, 1)``, ``b ~ N(0, 1)``, ``a ~ LogNormal(0, 1)`` (the
        paper, Section "Model: 2PL"; appendix B), the model of
        :class:`irtlib.calibration.pyirt.PaperTwoParamLog` with its guide (every factor at loc 0,
        scale 1) and py-irt's order of draws (theta, b, log a): with ``lr_decay=1.0, best=False``
        the fit ``fit_2pl(engine="pyirt")`` runs through py-irt, to float rounding.

    Returns
    -------
    list of (a, b)
        Per split, ``a`` and ``b`` of shape (n_items,) (float64), in the column order of ``values``.

    Raises
    ------
    InputError
        ``values`` not 2-D or not 0/1/NaN; a split with a row index out of range, a repeated row, or
        fewer than two rows; bad optimiser settings or ``workers``.
    MissingDependencyError
        torch is not installed (``pip install 'irtlib[pyirt]'``).

    See Also
    --------
    fit_hierarchical_batch : the same fit with abilities, best epochs and loss curves.
    irtlib.calibration.split_cache.fit_2pl_splits_cached : the same, each split cached on disk.
    irtlib.fit_2pl : ``engine="pyirt-authors"`` runs one such fit through py-irt itself.

    Notes
    -----
    The model of the paper, Section "Model: 2PL", fitted as the authors' released code fits it.
    Measured on the shared 2-core machine (``benchmarks/bench_authors_calibration.py``, see
    ``benchmarks/RESULTS.md``): with the fused kernel, the 370 splits of the four released benchmarks
    (1,000 epochs) cost about 50 to 65 CPU seconds, 1.6 to 1.7 times less than the torch likelihood
    in the same process; ``workers=2`` shares them between both cores.
    """
    fit = fit_hierarchical_batch(values, train_rows, epochs=epochs, lr=lr, lr_decay=lr_decay, seed=seed,
                                 best=best, threads=threads, workers=workers, priors=priors)
    return [(fit.a[s].copy(), fit.b[s].copy()) for s in range(fit.a.shape[0])]


def fit_hierarchical_batch(values: ArrayLike, train_rows: Sequence[ArrayLike], *, epochs: int = 1000,
                           lr: float = 0.1, lr_decay: float = 0.9999, seed: int = 0, best: bool = True,
                           threads: int | None = 1, workers: int = 1, priors: str = "hierarchical") -> BatchFit:
    """:func:`fit_2pl_splits` with everything the fit produced (abilities, best epochs, losses).

    Parameters
    ----------
    values, train_rows, epochs, lr, lr_decay, seed, best, threads, workers, priors
        As in :func:`fit_2pl_splits`.

    Returns
    -------
    BatchFit
        ``a``, ``b`` of shape (n_splits, n_items); ``theta`` of shape (n_splits, max training rows),
        row ``r`` of split ``s`` being model ``train_rows[s][r]``; ``best_epoch`` (n_splits,);
        ``loss`` (n_splits, epochs).
    """
    x, rows = _validate(values, train_rows)
    epochs, lr, lr_decay, seed = _check_settings(epochs, lr, lr_decay, seed, len(rows))
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - the light install has no torch
        raise MissingDependencyError("the batched py-irt fit needs torch, which is not installed: "
                                     "install it with pip install 'irtlib[pyirt]'") from exc
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    if priors not in PRIORS:
        raise InputError(f"priors must be one of {PRIORS}, got {priors!r}")
    settings = {"epochs": epochs, "lr": lr, "lr_decay": lr_decay, "seed": seed, "best": best,
                "hierarchical": priors == "hierarchical"}
    return _fit_parts(torch, x, rows, workers, threads, settings)


_POOL: list = []     # the worker processes of _fit_parts: [executor, size] once started


def _worker_pool(size: int):
    """The process pool of :func:`_fit_parts` with at least ``size`` workers.

    Spawned, not forked: a fork of a process that has run torch's thread pools can hang.
    """
    if _POOL and _POOL[1] >= size:
        return _POOL[0]
    import atexit
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if _POOL:
        _POOL[0].shutdown()
    _POOL[:] = [ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn")), size]
    atexit.register(_POOL[0].shutdown)          # before the interpreter tears the module down
    return _POOL[0]


def _worker_fit(x, rows, threads, settings) -> BatchFit:
    """:func:`_fit_with_threads` in a worker process."""
    import torch

    return _fit_with_threads(torch, x, rows, threads, settings)


def _fit_with_threads(torch, x, rows, threads, settings) -> BatchFit:
    """:func:`_fit` with torch's intra-op threads of the calling thread set (and restored)."""
    n_threads = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(int(threads))   # per calling thread (OpenMP), so set in each worker
        return _fit(torch, x, rows, **settings)
    finally:
        torch.set_num_threads(n_threads)


def _balanced_parts(sizes, workers) -> list[np.ndarray]:
    """The split indices cut into at most ``workers`` non-empty contiguous groups of about equal cells.

    A split's cost is its number of training rows (times the items, the same for all): each cut
    falls where the running total of rows comes closest to its share.
    """
    total = np.concatenate(([0], np.cumsum(sizes)))        # total[i]: rows of the splits before i
    cuts = []
    for share in total[-1] * np.arange(1, workers) / workers:
        after = int(np.searchsorted(total, share))          # the first cut with at least the share before it
        cuts.append(after if after == 0 or total[after] - share <= share - total[after - 1] else after - 1)
    return [p for p in np.split(np.arange(len(sizes)), cuts) if p.size]


def _fit_parts(torch, x, rows, workers, threads, settings) -> BatchFit:
    """Fit the splits in ``workers`` contiguous groups, each in its own process, and join the results.

    The first group is fitted in this process, the others in worker processes (started once, then
    reused by later calls). Exact: a split's fit does not depend on the other splits of its batch.
    """
    parts = _balanced_parts([r.size for r in rows], workers)
    if len(parts) == 1:
        return _fit_with_threads(torch, x, rows, threads, settings)
    pool = _worker_pool(len(parts) - 1)
    def part_settings(part):
        return {**settings, "seed": settings["seed"][part]}

    futures = [pool.submit(_worker_fit, x, [rows[i] for i in part], threads, part_settings(part))
               for part in parts[1:]]
    fits = [_fit_with_threads(torch, x, [rows[i] for i in parts[0]], threads, part_settings(parts[0]))]
    fits += [f.result() for f in futures]
    width = max(f.theta.shape[1] for f in fits)
    theta = np.concatenate([np.pad(f.theta, ((0, 0), (0, width - f.theta.shape[1])), constant_values=np.nan)
                            for f in fits])
    return BatchFit(a=np.concatenate([f.a for f in fits]), b=np.concatenate([f.b for f in fits]), theta=theta,
                    best_epoch=np.concatenate([f.best_epoch for f in fits]),
                    loss=np.concatenate([f.loss for f in fits]))


# ----------------------------------------------------------------------------- checks
def check_splits(values: ArrayLike, train_rows: Sequence[ArrayLike], *, epochs: int = 1000, lr: float = 0.1,
                 lr_decay: float = 0.9999, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """The checks of :func:`fit_2pl_splits` on its data and settings, without fitting.

    Returns
    -------
    values : ndarray, shape (n_models, n_items)
        As float64.
    train_rows : list of ndarray of int64

    Raises
    ------
    InputError
        As :func:`fit_2pl_splits`.
    """
    x, rows = _validate(values, train_rows)
    _check_settings(epochs, lr, lr_decay, seed, len(rows))
    return x, rows


def _validate(values, train_rows) -> tuple[np.ndarray, list[np.ndarray]]:
    x = np.asarray(values, dtype=float)
    if x.ndim != 2 or 0 in x.shape:
        raise InputError(f"values must be a non-empty 2-D array (n_models, n_items), got shape {x.shape}")
    allowed = (x == 0.0) | (x == 1.0)
    allowed |= np.isnan(x)
    if not allowed.all():
        bad = np.argwhere(~allowed)[0]
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


def _check_settings(epochs, lr, lr_decay, seed, n_splits):
    """The settings checked; ``seed`` as one int64 per split, shape (n_splits,)."""
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise InputError(f"epochs must be a positive integer, got {epochs!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise InputError(f"lr must be a positive number, got {lr!r}")
    if not (isinstance(lr_decay, (int, float)) and math.isfinite(lr_decay) and 0 < lr_decay <= 1):
        raise InputError(f"lr_decay must be in (0, 1], got {lr_decay!r}")
    seeds = [seed] * n_splits if isinstance(seed, (int, np.integer, bool)) else list(seed)
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < 2**63:
            raise InputError(f"seed must be a non-negative integer or one per split, got {seed!r}")
    if len(seeds) != n_splits:
        raise InputError(f"seed gives {len(seeds)} seeds for {n_splits} splits: give one integer, or one per split")
    return int(epochs), float(lr), float(lr_decay), np.array(seeds, dtype=np.int64)


# ----------------------------------------------------------------------------- the fit
#: Cells (splits x rows x items) the likelihood handles per pass, at most (but at least one split),
#: in chunks of equal numbers of splits: the four float32 buffers (8 MiB) stay mostly in cache
#: while the per-chunk dispatch stays small (measured on the shared 2-core machine: 2 ** 18 to
#: 2 ** 19 cells about 10% faster per cell than 2 ** 20 for the large benchmarks; 2 ** 17 and below
#: slower).
CHUNK_CELLS = 1 << 19
#: The likelihood's loss multiplies the factors of 2 ** _HALVINGS cells before one log.
_HALVINGS = 5


class _Streams:
    """One torch generator per split, drawing in the order a py-irt fit of that split draws.

    A guide sample of py-irt's hierarchical 2PL draws, in order: for b, theta and a, a scalar
    Normal (mu) and a scalar Gamma (u); then Normal noise for theta (n rows), b and log a (n_items
    each). The prior sample the trainer draws once before training has the same layout, with
    Gamma(1, 1) for each u. With ``hyper=False`` (the text's fixed priors) each draw is the theta,
    b and log a noise alone. The noise lands in ``eps_mu`` (n_splits, 3: b, theta, a) and ``eps``
    (n_splits, n_max + 2 n_items: theta, b, log a), the Gamma draws in ``gamma`` (n_splits, 3).
    """

    def __init__(self, torch, sizes: np.ndarray, n_items: int, seed, *, hyper: bool = True):
        self.torch, self.hyper = torch, bool(hyper)
        n_max = int(max(sizes))
        self.eps_mu = torch.zeros((len(sizes), 3))
        self.eps = torch.zeros((len(sizes), n_max + 2 * n_items))
        self.gamma = torch.zeros((len(sizes), 3))
        # Per split, made once: its generator, its three one-element mu slots, and its theta (its own
        # size), b and log-a rows.
        # and the views of its three Gamma concentrations (copied in by each draw).
        self._alpha = torch.zeros((len(sizes), 3))
        seeds = np.broadcast_to(np.asarray(seed, dtype=np.int64), (len(sizes),))         # one per split
        self._plan = [(torch.Generator().manual_seed(int(seeds[s])), *(self.eps_mu[s, k:k + 1] for k in range(3)),
                       *(self._alpha[s, k:k + 1] for k in range(3)),
                       self.eps[s, :n], self.eps[s, n_max:n_max + n_items], self.eps[s, n_max + n_items:])
                      for s, n in enumerate(int(n) for n in sizes)]

    def draw(self, alpha) -> None:
        """Fill the noise buffers; ``alpha`` (n_splits, 3) are the Gamma concentrations (no grad).

        Without ``hyper`` (the fixed priors' guide draws theta, b and log a alone) ``alpha`` is unused.
        """
        if not self.hyper:
            for g, *_, theta, b, a in self._plan:
                theta.normal_(generator=g)
                b.normal_(generator=g)
                a.normal_(generator=g)
            return
        std_gamma = self.torch._standard_gamma
        self._alpha.copy_(alpha)
        gammas = []
        add = gammas.append
        for g, mu_b, mu_t, mu_a, alpha_b, alpha_t, alpha_a, theta, b, a in self._plan:
            mu_b.normal_(generator=g)
            add(std_gamma(alpha_b, generator=g))
            mu_t.normal_(generator=g)
            add(std_gamma(alpha_t, generator=g))
            mu_a.normal_(generator=g)
            add(std_gamma(alpha_a, generator=g))
            theta.normal_(generator=g)
            b.normal_(generator=g)
            a.normal_(generator=g)
        self.gamma = self.torch.cat(gammas).reshape(alpha.shape)


def _normal_log_prob(torch, value, loc, scale):
    """``Normal(loc, scale).log_prob(value)``, the expression torch uses."""
    return -((value - loc) ** 2) / (2 * scale**2) - torch.log(scale) - _HALF_LOG_2PI


def _gamma_log_prob(torch, value, concentration, rate):
    """``Gamma(concentration, rate).log_prob(value)``, the expression torch uses."""
    return (torch.xlogy(concentration, rate) + torch.xlogy(concentration - 1, value) - rate * value
            - torch.lgamma(concentration))


class _Likelihood:
    """Per-split Bernoulli log-likelihood of the 2PL and its gradient, a few splits at a time.

    ``lik(theta (S, n), b (S, m), a (S, m)) -> (S,)``: per split, the sum over its observed cells of
    ``log sigmoid(sign z)`` with ``z = a (theta - b)`` and ``sign = 2 x - 1``, which is
    ``Bernoulli(logits=z).log_prob(x)``; differentiable in theta, b and a (a torch autograd Function).

    The fit calls :meth:`value_and_gradient` (no autograd); the autograd Function serves the tests.
    It computes the value and the gradient together, chunk by chunk while the chunk's cells are in
    cache, with one transcendental per cell: ``-s = -sign z`` (a broadcast ``addcmul`` and a
    multiplication), ``q = sigmoid(-s)``, ``r = d/dz = sign q`` (to full relative precision where
    ``q`` is tiny, as ``log_sigmoid_backward`` gave it), and the value as
    ``log sigmoid(s) = min(s, 0) + log max(q, 1 - q)``, whose second factor, in [1/2, 1], is
    multiplied over groups of up to 32 cells before one log (:meth:`_log_of_products`; no
    underflow, and float32 rounding like the old log1p per cell). Two batched products give
    ``sum_j r_mj a_j`` (theta) and ``sum_m r_mj (theta_m, 1)`` (a and b, as
    ``sum_m r_mj (theta_m - b_j) = (r^T theta)_j - b_j sum_m r_mj``). Nothing of size
    (S, n, m) is kept beyond one chunk's scratch buffers.

    Parameters
    ----------
    torch : module
    sign : Tensor, shape (S, n, m)
        +1 safe, -1 unsafe (any value where ``weight`` is 0).
    weight : Tensor of shape (S, n, m), or None
        1 for an observed cell, 0 otherwise; None when every cell is observed (no multiplication).
    chunk_cells : int
        Cells per chunk, at most (at least one split per chunk; chunks of equal numbers of splits).
    """

    def __init__(self, torch, sign, weight=None, chunk_cells: int = CHUNK_CELLS):
        self.torch = torch
        n_splits, n, m = sign.shape
        n_chunks = -(-n_splits * n * m // max(chunk_cells, n * m))
        self.chunk = -(-n_splits // n_chunks)
        # Every (S, n, m) operand in padded storage (each split's cells start on a 64-float
        # boundary): the elementwise kernels then run the same vector and scalar code over a split's
        # cells wherever it sits in the batch, and the products read operands aligned alike.
        self.sign, self.neg_sign = _aligned_copy(torch, sign), _aligned_copy(torch, -sign)
        self.weight = None if weight is None else _aligned_copy(torch, weight)
        self._s, self._q, self._r = (_aligned_empty(torch, (self.chunk, n, m), sign.dtype) for _ in range(3))
        self._products = self._logs = None
        self._apply = _log_likelihood_function(torch)

    def __call__(self, theta, b, a):
        return self._apply(theta, b, a, self)

    def guide_sample(self, problem, loc, log_scale, eps):
        """:func:`_guide_sample_torch` (the torch likelihood's companion passes over the columns)."""
        return _guide_sample_torch(self.torch, problem, loc, log_scale, eps)

    def prior_terms(self, problem, *args):
        """:func:`_prior_terms_torch`."""
        return _prior_terms_torch(self.torch, problem, *args)

    def _log_of_products(self, factors):
        """Per row of ``factors`` (k, cells), each in [1/2, 1] (overwritten), the sum of their logs.

        Halving the row 5 times leaves products of at most 32 factors (at least 2 ** -32), whose
        logs are taken in padded storage (ones beyond the row) so that each row runs the same code.
        """
        length = factors.shape[1]
        for _ in range(_HALVINGS):
            half = length // 2
            factors[:, :half].mul_(factors[:, length - half:length])
            length -= half
        k = factors.shape[0]
        width = -(-length // 64) * 64
        if self._products is None or self._products.shape[1] != width:
            self._products = self.torch.ones((self.chunk, width), dtype=factors.dtype)
            self._logs = self.torch.empty_like(self._products)
        self._products[:k, :length] = factors[:, :length]
        return self.torch.log(self._products[:k], out=self._logs[:k]).sum(1)

    def value_and_gradient(self, theta, b, a):
        """The (S,) log-likelihoods and their gradients in theta, b, a (tensors without grad).

        Per cell, with ``s = sign z`` and ``q = sigmoid(-s)``: ``d/dz = sign q`` and
        ``log sigmoid(s) = min(s, 0) + log max(q, 1 - q)``; the second factor lies in [1/2, 1], so
        the factors of up to 32 cells are multiplied before one log (no underflow), instead of a
        log1p per cell.
        """
        torch = self.torch
        n_splits, n = theta.shape
        m = a.shape[1]
        value = theta.new_empty(n_splits)
        g_theta = torch.empty_like(theta)
        moments = theta.new_empty((n_splits, 2, m))                          # r^T theta, sum_m r
        theta_one = _aligned_copy(torch, torch.stack((theta, torch.ones_like(theta)), 1))   # (S, 2, n)
        a_row = _aligned_copy(torch, a[:, None, :])
        offset = (-(a * b))[:, None, :]                                    # z = theta a - a b
        theta_col = theta[:, :, None]
        for lo in range(0, n_splits, self.chunk):
            hi = min(lo + self.chunk, n_splits)
            s, q, r = (buf[:hi - lo] for buf in (self._s, self._q, self._r))
            t = torch.addcmul(offset[lo:hi], theta_col[lo:hi], a_row[lo:hi], out=s).mul_(self.neg_sign[lo:hi])
            torch.sigmoid(t, out=q)                                        # sigmoid(-s), t = -s
            torch.mul(q, self.sign[lo:hi], out=r)                          # d log p / d z = sign sigmoid(-s)
            weight = None if self.weight is None else self.weight[lo:hi]
            # the loss: sum min(s, 0) = -sum max(t, 0), then max(q, 1 - q) multiplied in groups, one log each
            t.clamp_(min=0.0)
            if weight is not None:
                t.mul_(weight)
                r.mul_(weight)
            torch.sum(t, (1, 2), out=value[lo:hi]).neg_()
            torch.maximum(q, torch.sub(1.0, q, out=t), out=q)
            if weight is not None:       # a factor 1 (log 0) for a cell that is not an observation
                q.sub_(1.0).mul_(weight).add_(1.0)
            value[lo:hi] += self._log_of_products(q.reshape(hi - lo, n * m))
            torch.bmm(theta_one[lo:hi], r, out=moments[lo:hi])
            torch.bmm(a_row[lo:hi], r.transpose(1, 2), out=g_theta[lo:hi, None, :])
        g_a = moments[:, 0] - b * moments[:, 1]
        g_b = -(moments[:, 1] * a)
        return value, g_theta, g_b, g_a


class _FusedLikelihood:
    """:class:`_Likelihood`'s :meth:`value_and_gradient` in one pass over the cells, in C.

    The compiled ``loglik_2pl`` of :mod:`irtlib.calibration.fused_kernel`, the same formulas (one
    exponential and one division per cell, the loss's factors multiplied before one log, taken in
    double precision), each split on its own rows and in its own order. Float32 like the torch
    likelihood (the authors ran float32), its sums in another order; the loss of each split summed
    in float64 and then rounded to float32.

    Parameters
    ----------
    torch : module
    lib : ctypes library
        :func:`irtlib.calibration.fused_kernel.load`'s.
    sign : Tensor, shape (S, n, m)
        +1 safe, -1 unsafe (any value where ``weight`` is 0).
    weight : Tensor of shape (S, n, m), or None
        1 for an observed cell, 0 otherwise (padded rows included); None when every cell is observed.
    sizes : ndarray of int, shape (S,)
        Each split's training rows (its first rows).
    problem : _Problem, optional
        Its :meth:`_Problem.fused_cells` instead of ``sign`` and ``weight`` (then None).
    reuse : bool
        Write every call's outputs into the same buffers (made at the first call): a fit's epoch uses
        them before the next call. False (the default) gives new tensors each call.
    """

    LANES = 8     # the kernel's vector width: each row of cells padded to a multiple of it

    def __init__(self, torch, lib, sign, weight, sizes, *, reuse: bool = False, problem=None):
        self.torch, self.lib, self.reuse = torch, lib, bool(reuse)
        n_splits, n, m = sign.shape if problem is None else problem.shape
        self.width = -(-m // self.LANES) * self.LANES
        if problem is None:
            cells = sign if weight is None else sign * weight
            self.sign = torch.zeros((n_splits, n, self.width), dtype=torch.float32)
            self.sign[:, :, :m] = cells
        else:            # the same numbers, made from the matrix (:meth:`_Problem.fused_cells`)
            self.sign = problem.fused_cells(self.width)
        self.rows = np.ascontiguousarray(sizes, dtype=np.int64)
        self.work = np.empty(4 * self.width, dtype=np.float32)
        # The arrays' addresses, read once (numpy's ``.ctypes`` costs microseconds a read).
        self._rows_ptr, self._work_ptr = self.rows.ctypes.data, self.work.ctypes.data
        self._sign_ptr = self.sign.data_ptr()
        self._buffers: dict = {}

    def _out(self, name, shape, make):
        """A new output of ``make()``, or with ``reuse`` the one kept under ``name`` (made at the first call)."""
        if not self.reuse:
            return make()
        kept = self._buffers.get(name)
        if kept is None or kept[0] != shape:
            kept = self._buffers[name] = (shape, make())
        return kept[1]

    def value_and_gradient(self, theta, b, a):
        """The (S,) log-likelihoods and their gradients in theta (S, n), b and a (S, m), float32."""
        torch = self.torch
        n_splits, n = theta.shape
        m = a.shape[1]
        for t in (theta, b, a):
            if t.dtype != torch.float32 or t.stride(1) != 1:
                raise ValueError("the fused likelihood takes float32 tensors with contiguous rows")
        shape = (n_splits, n, m)

        def outputs():
            value = np.empty(n_splits, dtype=np.float64)
            value32 = np.empty(n_splits, dtype=np.float32)
            grads = tuple(torch.empty((n_splits, k), dtype=torch.float32) for k in (n, m, m))
            return (value, value.ctypes.data, torch.from_numpy(value32), value32, grads,
                    tuple(g.data_ptr() for g in grads))

        value, value_ptr, value_t, value32, grads, grad_ptrs = self._out("likelihood", shape, outputs)
        self.lib.loglik_2pl(n_splits, n, m, self.width, self._rows_ptr, self._sign_ptr,
                            theta.data_ptr(), theta.stride(0), b.data_ptr(), b.stride(0), a.data_ptr(),
                            a.stride(0), value_ptr, *grad_ptrs, self._work_ptr)
        np.copyto(value32, value, casting="same_kind")                    # rounded to float32
        return (value_t, *grads)

    def guide_sample(self, problem, loc, log_scale, eps):
        """:func:`_guide_sample_torch` in C (``guide_sample``): value, step (S, n + 2 m) and a (S, m)."""
        torch = self.torch
        n_splits, n, m = problem.shape
        step, value, a = self._out("guide", problem.shape, lambda: (
            *(torch.empty((n_splits, n + 2 * m), dtype=torch.float32) for _ in range(2)),
            torch.empty((n_splits, m), dtype=torch.float32)))
        self.lib.guide_sample(n_splits, n, m, loc.data_ptr(), log_scale.data_ptr(), loc.stride(0), eps.data_ptr(),
                              step.data_ptr(), value.data_ptr(), a.data_ptr())
        return value, step, a

    def prior_terms(self, problem, value, step, eps, log_scale, mu, u, g_lik, a, g_loc, g_log_scale):
        """:func:`_prior_terms_torch` in C (``prior_terms``, sums in double): the sums (S, 4, 3)."""
        torch = self.torch
        n_splits, n, m = problem.shape
        sums = self._out("sums", problem.shape, lambda: torch.empty((n_splits, 4, 3), dtype=torch.float32))
        mu, u = mu.contiguous(), u.contiguous()
        self.lib.prior_terms(n_splits, n, m, self._rows_ptr, value.data_ptr(), step.data_ptr(),
                             eps.data_ptr(), log_scale.data_ptr(), log_scale.stride(0), mu.data_ptr(), u.data_ptr(),
                             *(g.data_ptr() for g in g_lik), a.data_ptr(), g_loc.data_ptr(), g_log_scale.data_ptr(),
                             sums.data_ptr())
        return sums


def _aligned_empty(torch, shape, dtype):
    """An empty (S, r, c) tensor whose every matrix ``[s]`` starts on a 64-float (256-byte) boundary.

    MKL's matrix products may round differently for differently aligned operands, and torch's
    elementwise kernels run vector code over blocks of up to 32 floats and scalar code over a row's
    tail; with every split's matrix aligned alike (and a multiple of 64 floats apart), neither
    depends on a split's place in the batch. The padding is zero.
    """
    n_splits, rows, cols = shape
    step = -(-rows * cols // 64) * 64
    return torch.zeros((n_splits, step), dtype=dtype).as_strided(shape, (step, cols, 1))


def _aligned_copy(torch, t):
    """``t`` (S, r, c) copied into :func:`_aligned_empty` storage."""
    return _aligned_empty(torch, t.shape, t.dtype).copy_(t)


def _log_likelihood_function(torch):
    """The autograd Function of :class:`_Likelihood` (forward computes the gradient too)."""

    class LogLik(torch.autograd.Function):
        @staticmethod
        def forward(ctx, theta, b, a, lik):
            value, *grads = lik.value_and_gradient(theta, b, a)
            ctx.save_for_backward(*grads)
            return value

        @staticmethod
        def backward(ctx, grad):
            g = grad[:, None]
            return (*(t * g for t in ctx.saved_tensors), None)

    return LogLik.apply


class _Problem:
    """The padded training cells of every split and the layout of the parameters.

    ``shape`` is (S, n, m): splits, their most training rows, items. ``row_ok`` (S, n) bool marks each
    split's own rows. The torch likelihood's ``sign`` (S, n, m) float32, ``weight`` (S, n, m) or None
    (every cell observed) and ``row_w`` (S, n) float32 or None (no padded row) are made when first asked
    for; the fused kernel takes :meth:`fused_cells` instead. The variational parameters live in one
    flat float32 tensor (one Adam state): per split 12 hyper-parameters (loc of mu for b, theta, a;
    log scale of mu; log alpha and log beta of u; under the fixed priors they stay at their start,
    their gradient 0) and two blocks of ``n + 2 m`` (loc and log scale of
    theta, b, log a, in that order).

    ``hyper_prior`` holds 0-d float32 tensors (mu's loc and scale, u's concentration and rate),
    ``site_counts`` (S, 3) float32 the columns of each site (b, theta, a: m, the split's rows, m);
    ``hierarchical`` False: the text's fixed N(0, 1) priors.
    """

    def __init__(self, torch, x_np, rows, row_ok, sizes, hyper_prior, site_counts, hierarchical=True):
        self.torch, self.x, self.rows, self.row_ok, self.sizes = torch, x_np, rows, row_ok, sizes
        self.hyper_prior, self.site_counts, self.hierarchical = hyper_prior, site_counts, hierarchical
        self.shape = (len(rows), row_ok.shape[1], x_np.shape[1])
        self._cells = None

    @classmethod
    def build(cls, torch, x_np, rows, *, hierarchical: bool = True):
        n_splits, n_max = len(rows), max(r.size for r in rows)
        row_ok = np.zeros((n_splits, n_max), dtype=bool)
        for s, r in enumerate(rows):
            row_ok[s, :r.size] = True
        hyper_prior = tuple(torch.tensor(v, dtype=torch.float32) for v in (0.0, HYPER_LOC_SD, *HYPER_GAMMA))
        sizes = np.array([r.size for r in rows])
        site_counts = torch.tensor(np.stack([np.full(n_splits, x_np.shape[1]), sizes, np.full(n_splits, x_np.shape[1])],
                                            1), dtype=torch.float32)
        return cls(torch, x_np, rows, row_ok, sizes, hyper_prior, site_counts, hierarchical)

    def _torch_cells(self):
        """``sign`` and ``weight`` of the torch likelihood (made once): from (S, n, m) float64 cells."""
        if self._cells is None:
            torch = self.torch
            n_splits, n_max, _ = self.shape
            index = np.zeros((n_splits, n_max), dtype=np.int64)
            for s, r in enumerate(self.rows):
                index[s, :r.size] = r
            cells = self.x[index]
            observed = ~np.isnan(cells) & self.row_ok[:, :, None]
            sign = torch.from_numpy(np.where(observed & (cells == 1.0), 1.0, -1.0)).to(torch.float32)
            weight = None if observed.all() else torch.from_numpy(observed).to(torch.float32)
            self._cells = (sign, weight)
        return self._cells

    @property
    def sign(self):
        return self._torch_cells()[0]

    @property
    def weight(self):
        return self._torch_cells()[1]

    @property
    def row_w(self):
        return None if self.row_ok.all() else self.torch.from_numpy(self.row_ok).to(self.torch.float32)

    def fused_cells(self, width: int):
        """The fused kernel's cells (S, n, ``width``) float32: ``sign weight`` of the torch likelihood's cells.

        +1 an observed safe cell, -1 an observed unsafe one, -0.0 a cell not observed (a missing response or
        a padded row: ``-1 x 0``) where some cell is not, +0.0 in the columns beyond ``m``: the numbers
        ``_FusedLikelihood`` makes from ``sign`` and ``weight``, written from each split's rows of the
        matrix in float32 without the (S, n, m) float64 temporaries.
        """
        n_splits, n_max, m = self.shape
        missing = np.isnan(self.x)
        used = np.unique(np.concatenate(self.rows))
        every = bool(self.row_ok.all()) and not missing[used].any()
        codes = np.where(self.x == 1.0, np.float32(1.0), np.float32(-1.0)).astype(np.float32)
        if not every:
            codes[missing] = -0.0
        out = np.zeros((n_splits, n_max, width), dtype=np.float32)
        for s, r in enumerate(self.rows):
            out[s, :r.size, :m] = codes[r]
            if not every:
                out[s, r.size:, :m] = -0.0
        return self.torch.from_numpy(out)

    def fixed_prior(self, torch):
        """The fixed priors' ``mu`` (0) and ``u`` (1) of every site, each (S, 3) float32 (made once)."""
        if not hasattr(self, "_fixed"):
            self._fixed = (torch.zeros((self.shape[0], 3)), torch.ones((self.shape[0], 3)))
        return self._fixed

    def initial_parameters(self, torch):
        """The flat parameter tensor at py-irt's initial values (every loc 0, scales 10 for mu, else 1)."""
        n_splits, n, m = self.shape
        hyper = torch.zeros((n_splits, 12), dtype=torch.float32)
        hyper[:, 3:6] = torch.log(torch.tensor(HYPER_GUIDE_INIT_SCALE, dtype=torch.float32))
        blocks = torch.zeros((2, n_splits, n + 2 * m), dtype=torch.float32)
        blocks[1] = math.log(GUIDE_INIT_SCALE)
        return torch.cat((hyper.reshape(-1), blocks.reshape(-1)))

    def hyper_terms(self, torch, flat, grad):
        """The fit's :class:`_HyperTerms` on ``flat`` and ``grad`` (made at the first call, then kept)."""
        terms = getattr(self, "_terms", None)
        if terms is None or terms.flat is not flat or terms.grad is not grad:
            terms = self._terms = _HyperTerms(torch, self, flat, grad)
        return terms

    def views(self, flat):
        """``hyper`` (S, 12), ``loc`` and ``log_scale`` (S, n + 2 m) of the flat parameters."""
        n_splits, n, m = self.shape
        width = n + 2 * m
        hyper = flat[:12 * n_splits].view(n_splits, 12)
        blocks = flat[12 * n_splits:].view(2, n_splits, width)
        return hyper, blocks[0], blocks[1]


def _likelihood_and_site_sums(problem, lik, loc, log_scale, eps, mu, u, g_loc, g_log_scale):
    """The guide's sample, the likelihood with its gradient, and the per-site sums of one epoch.

    The part every negative-ELBO form shares (hierarchical or fixed priors, numpy or torch terms; paper,
    section "Calibration"): ``value = loc + eps scale`` from ``lik.guide_sample``, the 2PL log-likelihood and
    its gradient in theta, b and a, and ``lik.prior_terms``' sums (S, 4, 3), which also fill ``g_loc`` and
    ``g_log_scale``. Returns ``(lik_value, sums)``.
    """
    n, m = problem.shape[1:]
    value, step, a = lik.guide_sample(problem, loc, log_scale, eps)      # value: theta | b | log a
    lik_value, g_theta, g_b, g_a = lik.value_and_gradient(value[:, :n], value[:, n:n + m], a)
    return lik_value, lik.prior_terms(problem, value, step, eps, log_scale, mu, u, (g_theta, g_b, g_a), a, g_loc,
                                      g_log_scale)


def _negative_elbo(torch, problem, lik, streams, flat, grad):
    """One single-sample negative ELBO per split, as py-irt's Trace_ELBO computes it, and its gradient.

    Draws the epoch's guide sample (the streams), writes the gradient of the batch's summed
    negative ELBO in the flat parameters into ``grad`` (the reparameterised gradient pyro's
    autograd takes, written out), and returns ``(log_q, log_p)``: the guide's and the model's log
    densities site by site, each a (S,) float32 array (sites: mu, u, theta, b, log a; the model adds
    the likelihood). The ``-log a`` Jacobian terms of the two LogNormals cancel.

    With ``v = loc + eps scale`` each guide density is ``-eps^2 / 2 - log scale - log sqrt(2 pi)``,
    whose total derivative is 0 in loc and -1 in log scale; each prior density
    ``log N(v; mu, 1/u)`` gives ``d/dv = -(v - mu) u^2``, ``d/dmu = (v - mu) u^2`` and
    ``d/du = 1/u - (v - mu)^2 u``; the Gamma draws' gradient in alpha is torch's implicit one
    (``_standard_gamma_grad``), as for the rsample pyro uses.

    The hyper-parameters' few dozen (S, 3) operations are :class:`_HyperTerms`'s numpy float32 ones, each
    the IEEE operation torch makes in the same order, with torch's own functions for ``exp``, ``log``,
    ``xlogy``, ``lgamma``, ``digamma`` and ``_standard_gamma_grad`` (:func:`_negative_elbo_torch` is the same
    in torch operations, bit for bit).
    """
    if not problem.hierarchical:
        return _negative_elbo_fixed(torch, problem, lik, streams, flat, grad)
    terms = problem.hyper_terms(torch, flat, grad)
    _, loc, log_scale = terms.views
    _, g_loc, g_log_scale = terms.grad_views
    mu, u = terms.sample(streams)
    eps = streams.eps
    lik_value, sums = _likelihood_and_site_sums(problem, lik, loc, log_scale, eps, mu, u, g_loc, g_log_scale)
    return terms.finish(streams, sums.numpy(), lik_value.numpy())


class _HyperTerms:
    """The hierarchical model's hyper-parameter terms of :func:`_negative_elbo`, in numpy float32.

    Made once per fit (:meth:`_Problem.hyper_terms`) on the flat parameters and their gradient. Each
    epoch, :meth:`sample` gives ``mu`` and ``u`` (S, 3: sites b, theta, a) from the guide's draws, and
    :meth:`finish` the hyper-parameters' gradient (written into the flat gradient) and the sites' log
    densities. Every operation is :func:`_negative_elbo_torch`'s, in its order and in float32: numpy's
    ``+ - * /`` and comparisons are the IEEE operations torch makes (a Python float taken as float32,
    as torch takes it), the sums over the three sites ``(x0 + x1) + x2`` as torch's ``sum(1)``; the
    transcendental functions are torch's own (position-independent: the same bits for an element
    wherever it sits), called on tensors sharing memory with the numpy arrays. About forty numpy
    calls and ten torch calls an epoch instead of about ninety torch operations (each about 3 to 5
    microseconds of dispatch, which every fit of 1,000 epochs pays whatever its size).
    """

    ORDER = [1, 0, 2]     # the prior sums' sites (theta, b, log a) in the hyper-parameters' order (b, theta, a)

    def __init__(self, torch, problem, flat, grad):
        self.torch, self.flat, self.grad = torch, flat, grad
        self.views, self.grad_views = problem.views(flat), problem.views(grad)
        self.hyper, self.g_hyper = self.views[0].numpy(), self.grad_views[0].numpy()
        n_splits = problem.shape[0]
        self.positive = torch.empty((n_splits, 9), dtype=torch.float32)
        self._exp_in = self.views[0][:, 3:12]
        positive = self.positive.numpy()
        self.scale_mu, self.alpha, self.beta = positive[:, 0:3], positive[:, 3:6], positive[:, 6:9]
        self.alpha_t, self.beta_t, self.scale_mu_t = self.positive[:, 3:6], self.positive[:, 6:9], self.positive[:, 0:3]
        counts = problem.site_counts.numpy()
        self.counts, self.counts_col = counts, counts[:, self.ORDER].copy()
        self.tiny = np.float32(torch.finfo(torch.float32).tiny)
        mu_loc, mu_sd, u_conc, u_rate = problem.hyper_prior
        # The model's constants, as torch computes them from its 0-d float32 tensors.
        self.mu_loc = mu_loc.numpy()[()]
        self.mu_sd2 = (mu_sd**2).numpy()[()]
        self.two_mu_sd2 = (2 * mu_sd**2).numpy()[()]
        self.log_mu_sd = torch.log(mu_sd).numpy()[()]
        self.u_conc, self.u_conc_1, self.u_rate = u_conc, u_conc - 1, u_rate
        self.u_rate_np = u_rate.numpy()[()]
        self.xlogy_prior = torch.xlogy(u_conc, u_rate).numpy()[()]
        self.lgamma_prior = torch.lgamma(u_conc).numpy()[()]
        self.c0 = np.float32(_HALF_LOG_2PI)
        self.log_q = np.empty((5, n_splits), dtype=np.float32)
        self.log_p = np.empty((6, n_splits), dtype=np.float32)

    def sample(self, streams):
        """The guide's draws of the epoch (``streams.draw``), then ``mu`` and ``u`` (S, 3) as tensors."""
        torch = self.torch
        torch.exp(self._exp_in, out=self.positive)
        streams.draw(self.alpha_t)
        self.g_raw = g_raw = streams.gamma.numpy()
        self.ratio = ratio = g_raw / self.beta
        self.u = u = np.maximum(ratio, self.tiny)                        # clamp(min=tiny)
        self.eps_mu = eps_mu = streams.eps_mu.numpy()
        self.mu = mu = self.hyper[:, 0:3] + eps_mu * self.scale_mu
        return torch.from_numpy(mu), torch.from_numpy(u)

    def finish(self, streams, sums, lik_value):
        """The hyper-parameters' gradient into the flat gradient; ``(log_q, log_p)``, (5, S) and (6, S) float32."""
        torch = self.torch
        order, counts, counts_col = self.ORDER, self.counts, self.counts_col
        alpha, beta, scale_mu, g_raw, ratio, u, mu = (self.alpha, self.beta, self.scale_mu, self.g_raw, self.ratio,
                                                      self.u, self.mu)
        u_t = torch.from_numpy(u)
        dev_sum, sq_sum = sums[:, 0][:, order], sums[:, 1][:, order]
        g_mu = mu / self.mu_sd2 - dev_sum
        g_u = (sq_sum - counts) / u + 1.0 + (alpha - 1) / u - beta
        du_dalpha = torch._standard_gamma_grad(self.alpha_t, torch.from_numpy(g_raw)).numpy() / beta
        du_dbeta = -ratio / beta
        clamped = ratio < self.tiny
        if clamped.any():             # clamped: no gradient through u
            du_dalpha = np.where(clamped, np.float32(0.0), du_dalpha)
            du_dbeta = np.where(clamped, np.float32(0.0), du_dbeta)
        g_hyper = self.g_hyper
        g_hyper[:, 0:3] = g_mu
        g_hyper[:, 3:6] = g_mu * self.eps_mu * scale_mu - 1.0
        log_beta, log_u = torch.log(self.beta_t).numpy(), torch.log(u_t).numpy()
        digamma = torch.digamma(self.alpha_t).numpy()
        g_hyper[:, 6:9] = alpha * (g_u * du_dalpha + log_beta + log_u - digamma)
        g_hyper[:, 9:12] = beta * (g_u * du_dbeta + alpha / beta - u)
        # The loss, site by site (float32, as torch's).
        c0 = self.c0
        log_inv_u = torch.log(torch.from_numpy(1.0 / u[:, order])).numpy()
        prior = -0.5 * sums[:, 1] - counts_col * (log_inv_u + c0)
        guide = -0.5 * sums[:, 2] - sums[:, 3] - counts_col * c0
        log_q, log_p = self.log_q, self.log_p
        # Normal(mu; mu_loc, mu_sd) and Gamma(u; u_conc, u_rate), the model's; then the guide's.
        dev = mu - self.mu_loc
        _site_sum(-(dev * dev) / self.two_mu_sd2 - self.log_mu_sd - c0, log_p[0])
        xlogy_u = torch.xlogy(self.u_conc_1, u_t).numpy()
        _site_sum(self.xlogy_prior + xlogy_u - self.u_rate_np * u - self.lgamma_prior, log_p[1])
        log_p[2:5] = prior.T
        log_p[5] = lik_value
        dev = mu - self.hyper[:, 0:3]
        log_scale_mu = torch.log(self.scale_mu_t).numpy()
        _site_sum(-(dev * dev) / (2 * (scale_mu * scale_mu)) - log_scale_mu - c0, log_q[0])
        lgamma = torch.lgamma(self.alpha_t).numpy()
        xlogy_q = torch.xlogy(self.alpha_t, self.beta_t).numpy() + torch.xlogy(self.alpha_t - 1, u_t).numpy()
        _site_sum(xlogy_q - beta * u - lgamma, log_q[1])
        log_q[2:5] = guide.T
        return log_q, log_p


def _site_sum(terms, out):
    """``terms.sum(1)`` of a (S, 3) float32 array as torch sums it: ``(x0 + x1) + x2``, into ``out``."""
    np.add(terms[:, 0], terms[:, 1], out=out)
    out += terms[:, 2]


def _negative_elbo_torch(torch, problem, lik, streams, flat, grad):
    """:func:`_negative_elbo` in torch operations (the reference it matches bit for bit).

    The same negative ELBO, gradient and ``(log_q, log_p)`` (here (S,) float32 tensors), every
    hyper-parameter term a torch operation instead of :class:`_HyperTerms`'s numpy ones; the tests
    compare the two, and the derivation is in :func:`_negative_elbo`'s docstring.
    """
    if not problem.hierarchical:
        return _negative_elbo_fixed_torch(torch, problem, lik, streams, flat, grad)
    hyper, loc, log_scale = problem.views(flat)
    g_hyper, g_loc, g_log_scale = problem.views(grad)
    loc_mu = hyper[:, 0:3]
    positive = hyper[:, 3:12].exp()
    scale_mu, alpha, beta = positive[:, 0:3], positive[:, 3:6], positive[:, 6:9]
    streams.draw(alpha)
    g_raw = streams.gamma
    ratio = g_raw / beta
    tiny = torch.finfo(torch.float32).tiny
    u = ratio.clamp(min=tiny)
    mu = loc_mu + streams.eps_mu * scale_mu
    eps = streams.eps
    # Per site (theta, b, log a): sums of dev u^2, (dev u)^2, eps^2 and log scale (dev = v - mu), and
    # d(-ELBO)/dv = (v - mu) u^2 - d lik / dv, then loc and log scale.
    lik_value, sums = _likelihood_and_site_sums(problem, lik, loc, log_scale, eps, mu, u, g_loc, g_log_scale)
    dev_sum, sq_sum = sums[:, 0], sums[:, 1]                               # (S, 3) each
    # Hyper-parameters (per site b, theta, a in hyper's order; the sums above are theta, b, a).
    order = [1, 0, 2]
    counts = problem.site_counts
    dev_sum, sq_sum = dev_sum[:, order], sq_sum[:, order]
    mu_loc, mu_sd, u_conc, u_rate = problem.hyper_prior
    g_mu = mu / mu_sd**2 - dev_sum
    g_u = (sq_sum - counts) / u + 1.0 + (alpha - 1) / u - beta
    du_dalpha = torch._standard_gamma_grad(alpha, g_raw) / beta
    du_dbeta = -ratio / beta
    if bool((ratio < tiny).any()):        # clamped: no gradient through u
        du_dalpha = torch.where(ratio < tiny, 0.0, du_dalpha)
        du_dbeta = torch.where(ratio < tiny, 0.0, du_dbeta)
    g_hyper[:, 0:3] = g_mu
    g_hyper[:, 3:6] = g_mu * streams.eps_mu * scale_mu - 1.0
    g_hyper[:, 6:9] = alpha * (g_u * du_dalpha + torch.log(beta) + torch.log(u) - torch.digamma(alpha))
    g_hyper[:, 9:12] = beta * (g_u * du_dbeta + alpha / beta - u)
    # The loss, site by site (float32 sums, as before).
    c0 = _HALF_LOG_2PI
    counts_col = counts[:, order]                          # theta, b, log a
    prior = -0.5 * sums[:, 1] - counts_col * (torch.log(1.0 / u[:, order]) + c0)
    guide = -0.5 * sums[:, 2] - sums[:, 3] - counts_col * c0
    log_p = [_normal_log_prob(torch, mu, mu_loc, mu_sd).sum(1), _gamma_log_prob(torch, u, u_conc, u_rate).sum(1),
             *prior.unbind(1), lik_value]
    log_q = [_normal_log_prob(torch, mu, loc_mu, scale_mu).sum(1), _gamma_log_prob(torch, u, alpha, beta).sum(1),
             *guide.unbind(1)]
    return log_q, log_p


def _negative_elbo_fixed(torch, problem, lik, streams, flat, grad):
    """:func:`_negative_elbo` under the text's fixed priors: every site ``N(0, 1)`` (log a for a).

    The same terms with ``mu = 0`` and ``u = 1`` fixed and no hyper-parameter sites: ``g_loc = v - d
    lik / d v``, ``g_log_scale = g_loc step - 1``; the hyper-parameters' gradient stays 0. The sites' log
    densities in numpy float32 (the operations of :func:`_negative_elbo_fixed_torch`, bit for bit):
    ``(log_q, log_p)``, (3, S) and (4, S).
    """
    terms = problem.hyper_terms(torch, flat, grad)
    _, loc, log_scale = terms.views
    _, g_loc, g_log_scale = terms.grad_views
    streams.draw(None)
    eps = streams.eps
    mu, u = problem.fixed_prior(torch)
    lik_value, sums = _likelihood_and_site_sums(problem, lik, loc, log_scale, eps, mu, u, g_loc, g_log_scale)
    sums = sums.numpy()
    counts_c0 = terms.counts_col * terms.c0                                # theta, b, log a
    log_p, log_q = terms.log_p[:4], terms.log_q[:3]
    log_p[:3] = (-0.5 * sums[:, 1] - counts_c0).T
    log_p[3] = lik_value.numpy()
    log_q[:] = (-0.5 * sums[:, 2] - sums[:, 3] - counts_c0).T
    return log_q, log_p


def _negative_elbo_fixed_torch(torch, problem, lik, streams, flat, grad):
    """:func:`_negative_elbo_torch` under the text's fixed priors: every site ``N(0, 1)`` (log a for a).

    The same terms with ``mu = 0`` and ``u = 1`` fixed and no hyper-parameter sites: ``g_loc = v - d
    lik / d v``, ``g_log_scale = g_loc step - 1``; the hyper-parameters' gradient stays 0.
    """
    _, loc, log_scale = problem.views(flat)
    _, g_loc, g_log_scale = problem.views(grad)
    streams.draw(None)
    eps = streams.eps
    mu, u = problem.fixed_prior(torch)
    lik_value, sums = _likelihood_and_site_sums(problem, lik, loc, log_scale, eps, mu, u, g_loc, g_log_scale)
    counts_col = problem.site_counts[:, [1, 0, 2]]                         # theta, b, log a
    log_p = -0.5 * sums[:, 1] - counts_col * _HALF_LOG_2PI
    log_q = -0.5 * sums[:, 2] - sums[:, 3] - counts_col * _HALF_LOG_2PI
    return list(log_q.unbind(1)), [*log_p.unbind(1), lik_value]


def _guide_sample_torch(torch, problem, loc, log_scale, eps):
    """The guide's sample ``value = loc + step`` (S, n + 2 m), ``step = eps scale``, and ``a`` (S, m)."""
    n, m = problem.shape[1:]
    step = eps * log_scale.exp()
    value = loc + step
    return value, step, value[:, n + m:].exp()


def _prior_terms_torch(torch, problem, value, step, eps, log_scale, mu, u, g_lik, a, g_loc, g_log_scale):
    """The per-site sums (S, 4, 3) and ``g_loc``, ``g_log_scale`` of :func:`_negative_elbo`, in torch.

    Sums (sites theta, b, log a): dev u^2, (dev u)^2, eps^2, log scale, with dev = value - mu and the
    split's own rows of theta only; ``g_loc = dev u^2 - d lik / d value``, ``g_log_scale = g_loc step - 1``
    (0 in padded rows).
    """
    n_splits, n, m = problem.shape
    g_theta, g_b, g_a = g_lik
    u_col = _per_column(torch, problem, u)
    terms = torch.empty((n_splits, 4, value.shape[1]))
    dev_u = torch.sub(value, _per_column(torch, problem, mu), out=terms[:, 0]).mul_(u_col)
    torch.mul(dev_u, dev_u, out=terms[:, 1])
    torch.mul(eps, eps, out=terms[:, 2])
    terms[:, 3] = log_scale
    dev_u.mul_(u_col)                                       # now (v - mu) u^2
    if problem.row_w is not None:
        terms[:, :, :n] *= problem.row_w[:, None, :]
    sums = torch.stack([terms[:, :, :n].sum(2), terms[:, :, n:n + m].sum(2), terms[:, :, n + m:].sum(2)], 2)
    torch.sub(dev_u[:, :n], g_theta, out=g_loc[:, :n])
    torch.sub(dev_u[:, n:n + m], g_b, out=g_loc[:, n:n + m])
    torch.sub(dev_u[:, n + m:], g_a * a, out=g_loc[:, n + m:])
    torch.mul(g_loc, step, out=g_log_scale)
    if problem.row_w is None:
        g_log_scale.sub_(1.0)
    else:
        g_log_scale[:, :n] -= problem.row_w
        g_log_scale[:, n:] -= 1.0
    return sums


def _per_column(torch, problem, per_site):
    """A (S, 3) site quantity (b, theta, a) spread over the (S, n + 2 m) columns theta | b | log a.

    Broadcast views joined, so that its gradient is a sum along each split's row, as with
    broadcasting in the separate fit (a one-hot matrix product would sum in an order that depends on
    the number of splits).
    """
    n_splits, n, m = problem.shape
    return torch.cat((per_site[:, 1:2].expand(n_splits, n), per_site[:, 0:1].expand(n_splits, m),
                      per_site[:, 2:3].expand(n_splits, m)), 1)


def _likelihood(torch, problem):
    """The fused kernel's likelihood where it can be compiled, else the torch one (:mod:`.fused_kernel`).

    The fused one writes each epoch's outputs into the same buffers (``reuse``).
    """
    from irtlib.calibration import fused_kernel

    lib = fused_kernel.load()
    if lib is None:
        return _Likelihood(torch, problem.sign, problem.weight)
    return _FusedLikelihood(torch, lib, None, None, problem.sizes, reuse=True, problem=problem)


def _streams(torch, sizes, n_items, seed, *, hyper: bool = True):
    """Every split's random stream: in C where it draws torch's numbers here (:mod:`.stream_kernel`)."""
    from irtlib.calibration import stream_kernel

    found = stream_kernel.load()
    if found is None:
        return _Streams(torch, sizes, n_items, seed, hyper=hyper)
    return stream_kernel.CStreams(torch, *found, sizes, n_items, seed, hyper=hyper)


@contextlib.contextmanager
def _no_cycle_collection():
    """Python's cyclic garbage collector off (its state restored after) for :func:`_fit`'s epochs.

    The loop makes a few dozen small tensors an epoch and no reference cycle, which reference
    counting frees; with torch imported, each full collection their allocations trigger walks every
    object of the process (a few per cent of a batched fit's time).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fit(torch, x_np, rows, *, epochs, lr, lr_decay, seed, best, hierarchical=True):
    from irtlib.calibration import adam_kernel

    problem = _Problem.build(torch, x_np, rows, hierarchical=hierarchical)
    n_splits, n, m = problem.shape
    lik = _likelihood(torch, problem)
    flat = problem.initial_parameters(torch)
    optimizer = adam_kernel.optimizer(torch, flat, lr, lr_decay)
    streams = _streams(torch, problem.sizes, m, seed, hyper=hierarchical)
    # py-irt's trainer runs the model once (a prior sample) and the guide once (initial parameters)
    # before its first SVI step: two draws before the first step's.
    ones = torch.ones((n_splits, 3))
    streams.draw(ones * HYPER_GAMMA[0])
    streams.draw(ones)

    losses = np.empty((epochs, n_splits))
    best_loss = np.full(n_splits, math.inf)
    loc = problem.views(flat)[1]
    kept = loc.clone()
    kept_rows, loc_rows = kept.numpy(), loc.numpy()            # numpy views of the same memory
    best_epoch = np.zeros(n_splits, dtype=np.int64)
    grad = torch.zeros_like(flat)
    with _no_cycle_collection():     # no reference cycles here; a collection would walk all of torch
        for epoch in range(epochs):
            log_q, log_p = _negative_elbo(torch, problem, lik, streams, flat, grad)
            optimizer.step(grad)
            # The loss py-irt compares: site sums added in double precision (pyro adds Python floats).
            loss64 = losses[epoch]
            np.subtract(np.sum(log_q, axis=0, dtype=np.float64), np.sum(log_p, axis=0, dtype=np.float64), out=loss64)
            if best:   # py-irt keeps the parameters after the step whose (pre-step) loss is the lowest
                better = loss64 < best_loss
                if better.any():
                    best_loss[better] = loss64[better]
                    best_epoch[better] = epoch
                    for s in np.flatnonzero(better):              # those splits' rows only, no temporary
                        kept_rows[s] = loc_rows[s]
    losses = losses.T.copy()
    if not best:
        kept = loc
        best_epoch[:] = epochs - 1
    kept = kept.numpy().astype(np.float64)
    return BatchFit(a=np.exp(kept[:, n + m:]), b=kept[:, n:n + m],
                    theta=np.where(problem.row_ok, kept[:, :n], np.nan), best_epoch=best_epoch, loss=losses)
