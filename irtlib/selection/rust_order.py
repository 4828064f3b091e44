"""The ``kmedoids`` package's random processing order for FasterPAM, computed in numpy.

The package's ``rand_fasterpam`` (Schubert and Rousseeuw's FasterPAM, the authors' Anchor Points of the
paper's appendix D) visits the swap candidates in the order ``rand::seq::index::sample(rng, n, n)`` of the
Rust ``rand`` crate its wheel was built with (0.10), ``rng`` being ``StdRng::seed_from_u64(seed)``:

- ``seed_from_u64``: eight 32-bit words from a PCG32 stepped from ``seed`` (multiplier
  6364136223846793005, increment 11634580027462260723, the XSH-RR output), the ChaCha key;
- ``StdRng``: ChaCha with 12 rounds, that key, a 64-bit block counter from 0 and stream 0; each
  ``u32`` drawn is the next word of the key stream;
- ``sample(rng, n, n)``: for ``n`` of 12 or more, a Fisher-Yates shuffle of ``0 .. n-1`` in place
  (position ``i`` swapped with ``random_range(i..n)``); below 12, Floyd's combination algorithm (for
  ``j`` in ``0 .. n-1``: ``t = random_range(0..=j)``; where ``t`` was already drawn, its place takes
  ``j``; ``t`` is appended);
- ``random_range`` of ``u32``: Canon's method (the high word of a widening product of one draw by the
  range; where its low word is above ``2^32 - range``, a second draw's high word carried into it).

The order depends on ``(seed, n)`` alone: :func:`shuffled_order` keeps it per pair. A test compares the
package's results with the C kernel's, which runs on this order (:mod:`irtlib.selection.fasterpam`).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["shuffled_order", "stdrng_words", "seed_key"]

_MASK64 = (1 << 64) - 1
_PCG_MUL, _PCG_INC = 6364136223846793005, 11634580027462260723
_SIGMA = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)


def seed_key(seed: int) -> np.ndarray:
    """``seed_from_u64``'s 32-byte seed as eight little-endian ``uint32`` words (PCG32 from ``seed``)."""
    state = int(seed) & _MASK64
    words = []
    for _ in range(8):
        state = (state * _PCG_MUL + _PCG_INC) & _MASK64
        xorshifted = (((state >> 18) ^ state) >> 27) & 0xFFFFFFFF
        rot = state >> 59
        words.append(((xorshifted >> rot) | (xorshifted << ((32 - rot) & 31))) & 0xFFFFFFFF)
    return np.array(words, dtype=np.uint32)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def stdrng_words(seed: int, n_blocks: int) -> np.ndarray:
    """The first ``16 n_blocks`` ``u32`` draws of ``StdRng::seed_from_u64(seed)`` (ChaCha12's key stream)."""
    key = seed_key(seed)
    counter = np.arange(n_blocks, dtype=np.uint64)
    init = np.empty((16, n_blocks), dtype=np.uint32)
    init[:4] = _SIGMA[:, None]
    init[4:12] = key[:, None]
    init[12] = (counter & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    init[13] = (counter >> np.uint64(32)).astype(np.uint32)
    init[14:] = 0
    x = [init[i].copy() for i in range(16)]

    def quarter(a, b, c, d):
        x[a] += x[b]
        x[d] = _rotl(x[d] ^ x[a], 16)
        x[c] += x[d]
        x[b] = _rotl(x[b] ^ x[c], 12)
        x[a] += x[b]
        x[d] = _rotl(x[d] ^ x[a], 8)
        x[c] += x[d]
        x[b] = _rotl(x[b] ^ x[c], 7)

    for _ in range(6):                                   # 12 rounds: a column and a diagonal round each
        quarter(0, 4, 8, 12)
        quarter(1, 5, 9, 13)
        quarter(2, 6, 10, 14)
        quarter(3, 7, 11, 15)
        quarter(0, 5, 10, 15)
        quarter(1, 6, 11, 12)
        quarter(2, 7, 8, 13)
        quarter(3, 4, 9, 14)
    out = np.stack(x) + init
    return out.T.reshape(-1)                             # block by block, each block's words in order


class _Words:
    """The draws of one ``StdRng``, in order, extended block by block as needed."""

    def __init__(self, seed: int, first: int):
        self.seed, self.pos = int(seed), 0
        self.words = stdrng_words(self.seed, max(1, -(-first // 16)))

    def next(self) -> int:
        if self.pos >= self.words.size:
            self.words = stdrng_words(self.seed, 2 * (self.words.size // 16))
        w = int(self.words[self.pos])
        self.pos += 1
        return w


def _range_inclusive(words: _Words, low: int, high: int) -> int:
    """``random_range(low..=high)`` of ``u32`` (Canon's method, biased: at most two draws)."""
    span = (high - low + 1) & 0xFFFFFFFF
    if span == 0:
        return words.next()
    wide = words.next() * span
    result, lo = wide >> 32, wide & 0xFFFFFFFF
    if lo > ((-span) & 0xFFFFFFFF):
        new_hi = (words.next() * span) >> 32
        result += int(lo + new_hi > 0xFFFFFFFF)
    return (low + result) & 0xFFFFFFFF


def _sample_all(seed: int, n: int) -> np.ndarray:
    words = _Words(seed, n + 16)
    if n >= 12:                                          # sample_inplace
        idx = list(range(n))
        for i in range(n):
            j = _range_inclusive(words, i, n - 1)
            idx[i], idx[j] = idx[j], idx[i]
        return np.array(idx, dtype=np.int64)
    out: list[int] = []                                  # sample_floyd
    for j in range(n):
        t = _range_inclusive(words, 0, j)
        if t in out:
            out[out.index(t)] = j
        out.append(t)
    return np.array(out, dtype=np.int64)


def shuffled_order(seed: int, n: int) -> np.ndarray:
    """``rand::seq::index::sample(&mut StdRng::seed_from_u64(seed), n, n)`` as ``int64`` (read only; kept per pair)."""
    return _kept_order(int(seed) & _MASK64, int(n))


@functools.lru_cache(maxsize=64)
def _kept_order(seed: int, n: int) -> np.ndarray:
    order = _sample_all(seed, n)
    order.setflags(write=False)
    return order
