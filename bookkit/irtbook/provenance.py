"""What data a page rests on, said from the data themselves.

Every table, figure and sentence of the book names its data: the paper's own response matrices
(the authors' release), another real set (22 real AIR-Bench 2024 models, PandaGuard), or the
simulated release. The words come from each loaded benchmark's
:class:`~irtlib.datasets.DataSource` (``Benchmark.data``), never from the chapter's text, so a
caption is true for the build it is in: a build without the real files says "simulated" wherever
it fell back, and a banner says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .words import names_phrase

__all__ = ["KIND_WORDS", "HAS_REAL", "kinds", "describe", "caption", "fallback_banner", "real_expected", "all_real",
           "short_label"]

#: How each kind of source is named in a caption.
KIND_WORDS = {
    "paper": "the paper's data (the authors' released matrices)",
    "real-subset": "real judgments",
    "real": "real judgments",
    "simulated": "the simulated release",
}


#: The benchmarks that have real data beside the simulated release: the authors' four released
#: matrices and AIR-Bench 2024 (22 real models, or the authors' 82-model file). SafetyBench has none here.
HAS_REAL = ("airbench2024", "anthropic-red-team", "harmbench", "simplesafetytests", "wmdp-bio")


def _source(bench):
    """A ``Benchmark``'s data source, or the ``DataSource`` itself."""
    return getattr(bench, "data", bench)


def _display(bench) -> str:
    name = getattr(bench, "display_name", None)
    if name is None:
        from irtlib import datasets

        name = datasets.display_name(_source(bench).benchmark)
    return name


def kinds(benches: Mapping) -> dict[str, str]:
    """Benchmark id -> the kind of its source (``"paper"``, ``"real-subset"``, ``"simulated"``).

    ``benches`` maps benchmark ids to loaded ``Benchmark`` objects or to their ``DataSource``.
    """
    return {b: _source(bench).kind for b, bench in benches.items()}


def all_real(benches: Mapping) -> bool:
    """True when no benchmark of ``benches`` rests on the simulated release."""
    return all(k != "simulated" for k in kinds(benches).values())


def short_label(bench) -> str:
    """A few words for a table column or legend: "paper's data", "real, 22 models", "simulated"."""
    src = _source(bench)
    if src.kind == "paper":
        return "paper's data"
    if src.kind == "simulated":
        return "simulated"
    shape = bench.full.shape if hasattr(bench, "full") else src.shape
    return f"real, {shape[0]} models" if shape else "real"


def _names(benches, ids) -> str:
    return names_phrase([_display(benches[b]) for b in ids], empty="")


def describe(benches: Mapping) -> str:
    """One clause naming the data of every benchmark in ``benches``, grouped by kind.

    >>> describe(benches)  # doctest: +SKIP
    "the paper's data (the authors' released matrices) for Anthropic Red Team, HarmBench,
    SimpleSafetyTests and WMDP-Bio; real judgments of 22 of the paper's 82 models for
    AIR-Bench 2024; the simulated release for SafetyBench"
    """
    by_kind: dict[str, list[str]] = {}
    for b, kind in kinds(benches).items():
        by_kind.setdefault(kind, []).append(b)
    parts = []
    for kind in ("paper", "real-subset", "real", "simulated"):
        ids = by_kind.get(kind)
        if not ids:
            continue
        if kind in ("real-subset", "real"):
            parts.extend(_source(benches[b]).label for b in ids)     # the label names its benchmark
        elif len(by_kind) == 1:
            parts.append(KIND_WORDS[kind])
        else:
            parts.append(f"{KIND_WORDS[kind]} for {_names(benches, ids)}")
    return "; ".join(parts)


def caption(benches: Mapping) -> str:
    """``describe`` as a caption's closing sentence: "Data: ... ."."""
    text = describe(benches)
    return f"Data: {text}." if text else ""


def fallback_banner(benches: Mapping, *, real_expected: Mapping[str, bool]) -> str:
    """Markdown for a warning box when a benchmark that has real data fell back to the simulation.

    Parameters
    ----------
    benches : mapping
        Benchmark id -> loaded ``Benchmark``.
    real_expected : mapping
        Benchmark id -> whether real data exist for it in principle (the build asked for them).

    Returns
    -------
    str
        Empty when nothing fell back.
    """
    fell = [b for b, bench in benches.items() if real_expected.get(b) and _source(bench).kind == "simulated"]
    if not fell:
        return ""
    return (":::{warning}\n"
            f"This build did not find the real data for {_names(benches, fell)}: the results on this page for "
            f"{'it' if len(fell) == 1 else 'them'} rest on the simulated release. `irtlib paper-data "
            "download` fetches the paper's files (or set `IRTLIB_PAPER_DATA`), then rebuild.\n:::")


def real_expected(names: Iterable[str], *, source: str | None = None) -> dict[str, bool]:
    """Benchmark id -> whether this build asked for real data that exist for it (``fallback_banner``).

    Parameters
    ----------
    names : iterable of str
        Benchmark ids.
    source : {"auto", "real", "simulated"} or None
        The build's ``source`` (None: ``$IRTLIB_DATA`` or ``"auto"``); ``"simulated"`` expects no real data.
    """
    from irtlib.datasets.sources import source_setting

    wanted = source_setting(source) != "simulated"
    return {b: wanted and b in HAS_REAL for b in names}
