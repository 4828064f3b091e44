"""The fit chapters' calibrations side by side: the main fit (a chapter's ``ENGINE``) and the others beside it.

The chapters that reproduce the paper's fit numbers (the 2PL fit, the ceiling, the discrimination
spread, the model checks) calibrate every benchmark with the authors' calibration by default and
set py-irt with the text's priors and irtlib's MAP engine beside it
(:data:`irtbook.pipeline.CHAPTER_ENGINES`). These helpers build the comparison tables and the
phrases glued into their prose, so that a sentence that compares two engines says what the numbers
beside it say whichever engine is the main one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from irtbook.words import engine_noun, engine_short, names_phrase

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["alternatives", "engine_table", "agreement_phrase", "least_agreement_phrase", "seconds_phrase",
           "count_phrase", "direction", "names_phrase"]   # names_phrase: irtbook.words

_PARAMS = (("theta", "θ"), ("b", "b"), ("a", "a"))


def alternatives(main: str, engines: Sequence[str]) -> list[str]:
    """The engines of ``engines`` other than ``main``, in order."""
    return [e for e in engines if e != main]


def _spearman(x: pd.Series, y: pd.Series) -> float:
    from irtlib.protocol.agreement import spearman

    return float(spearman(x.to_numpy(), y.reindex(x.index).to_numpy()))


def engine_table(benches: Mapping, calibrations: Mapping[str, Mapping], main: str) -> pd.DataFrame:
    """Per benchmark: items fitted, seconds per fit of each engine, and the others' rank agreement with ``main``.

    Parameters
    ----------
    benches : mapping
        Benchmark id -> ``Benchmark``.
    calibrations : mapping
        Engine -> (benchmark id -> ``Calibration``); must hold ``main``.
    main : str
        The engine the others are compared with.

    Returns
    -------
    DataFrame
        Indexed by display name: ``items fitted``, ``"<engine> s"`` per engine (the seconds of the
        run that made a cached fit), and ``"Spearman <param>, <engine>"`` for theta, b and a of
        every engine but ``main``, against ``main``'s estimates.
    """
    rows = []
    for b, bench in benches.items():
        r = {"benchmark": bench.display_name, "items fitted": bench.filtered.shape[1]}
        r.update({f"{engine_short(e)} s": float(cals[b].seconds) for e, cals in calibrations.items()})
        for e in alternatives(main, list(calibrations)):
            for attr, sym in _PARAMS:
                r[f"Spearman {sym}, {engine_short(e)}"] = _spearman(getattr(calibrations[main][b], attr),
                                                                  getattr(calibrations[e][b], attr))
        rows.append(r)
    return pd.DataFrame(rows).set_index("benchmark")


def agreement_phrase(table: pd.DataFrame, main: str, others: Sequence[str]) -> str:
    """How closely each other engine agrees with ``main`` (lowest Spearman of theta, b and a over the benchmarks).

    E.g. "py-irt, text's priors: θ at least 0.995, b at least 0.990 and a at least 0.700 (a lowest on
    HarmBench); MAP engine: ...".
    """
    parts = []
    for e in others:
        cols = {sym: f"Spearman {sym}, {engine_short(e)}" for _, sym in _PARAMS}
        low = {sym: float(table[c].min()) for sym, c in cols.items()}
        worst = min(low, key=low.get)
        parts.append(f"{engine_short(e)}: θ at least {low['θ']:.3f}, b at least {low['b']:.3f} and a at least "
                     f"{low['a']:.3f} ({worst} lowest, on {table[cols[worst]].idxmin()})")
    return "; ".join(parts)


def least_agreement_phrase(table: pd.DataFrame, others: Sequence[str]) -> str:
    """Which parameter agrees least with the main fit, per engine if they differ.

    E.g. "the discrimination a agrees least under both other calibrations" (plain text: it is glued).
    """
    worst = {}
    for e in others:
        low = {sym: float(table[f"Spearman {sym}, {engine_short(e)}"].min()) for _, sym in _PARAMS}
        worst[e] = min(low, key=low.get)
    names = {"θ": "the ability θ", "b": "the difficulty b", "a": "the discrimination a"}   # glued text: no markdown
    if len(set(worst.values())) == 1:
        who = {1: "the other calibration", 2: "both other calibrations"}.get(len(others), "every other calibration")
        return f"{names[next(iter(worst.values()))]} agrees least under {who}"
    return "; ".join(f"{names[sym]} agrees least under {engine_noun(e)}" for e, sym in worst.items())


def seconds_phrase(table: pd.DataFrame, engines: Sequence[str]) -> str:
    """Median seconds per fit of each engine, e.g. "authors' calibration 12.1 s, ..., MAP engine 0.21 s"."""
    def fmt(x):
        return f"{x:.1f} s" if x >= 1 else f"{x:.2f} s"

    return ", ".join(f"{engine_short(e)} {fmt(float(table[f'{engine_short(e)} s'].median()))}" for e in engines)


def count_phrase(n: int, total: int) -> str:
    """``"every one"``, ``"none"`` or ``"n of the total"`` (of ``total`` benchmarks)."""
    return "all " + str(total) if n == total else "none" if n == 0 else f"{n} of the {total}"


def direction(diff: float, *, tol: float = 0.0, above: str = "higher than", below: str = "lower than",
              equal: str = "close to") -> str:
    """A comparison word computed from a difference (``diff`` = left - right), ``equal`` within ``tol``."""
    return above if diff > tol else below if diff < -tol else equal

