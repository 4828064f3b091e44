"""The book's page of results: every claim of the paper in one line, from the claims the chapters published.

The chapters test each claim once and publish it (:func:`irtbook.claims.publish`); the
scorecard page gives each claim's full evidence, this module the one line a reader scans: the
claim with the paper's number, ours, the verdict, one clause saying why, and the section that
shows it. Nothing is recomputed: the verdict is the published one, and the clause comes from the
rule that produced it (:data:`irtbook.scorecard.RULES`) or from the claim's note.
"""

from __future__ import annotations

import re

import pandas as pd

from . import scorecard as sc
from .words import names_phrase

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["REASONS", "reason", "ours", "results_frame", "results_markdown", "LIMIT_REASONS", "limit_counts",
           "found_sentences"]

#: Why a verdict is what it is, one clause per rule and verdict (the rules in full: :data:`scorecard.RULES`).
REASONS = {
    ("value", "reproduced"): "prints as the paper's number",
    ("value", "close"): f"within {sc.CLOSE_UNITS} units of the last printed decimal",
    ("value", "not reproduced"): f"more than {sc.CLOSE_UNITS} units of the last printed decimal away",
    ("budget", "reproduced"): "the same point of the authors' budget grid",
    ("budget", "close"): "one step of the authors' budget grid away",
    ("budget", "not reproduced"): "more than one grid step away, or never reached",
    ("budget", "not testable here"): "our sweep stopped before the paper's budget",
    ("count", "reproduced"): "every count equals the paper's",
    ("count", "not reproduced"): "a count differs from the paper's",
    ("bound", "reproduced"): "holds on every benchmark",
    ("bound", "close"): f"misses by at most {sc.CLOSE_UNITS} units of the last printed decimal",
    ("bound", "partly"): "holds on at least half of the benchmarks",
    ("bound", "not reproduced"): "fails on more than half of the benchmarks",
    ("bound", "not testable here"): "no benchmark to test it on",
    ("direction", "reproduced"): "the 95% interval of the difference lies above 0",
    ("direction", "partly"): "ahead in the mean, within the split-to-split noise",
    ("direction", "not reproduced"): "not ahead in the mean, within the noise",
    ("direction", "reversed"): "the 95% interval of the difference lies below 0",
    ("direction", "not testable here"): "no defined difference",
    ("match", "reproduced"): f"the 95% interval lies within ±{sc.MATCH_TOLERANCE}",
    ("match", "close"): f"the mean within ±{sc.MATCH_TOLERANCE}, its interval beyond",
    ("match", "not reproduced"): f"the mean differs by more than {sc.MATCH_TOLERANCE}",
    ("match", "not testable here"): "no defined difference",
    ("correlation", "reproduced"): "Spearman's ρ at least 0.6 across benchmarks",
    ("correlation", "partly"): "Spearman's ρ between 0 and 0.6",
    ("correlation", "not reproduced"): "Spearman's ρ between -0.6 and 0",
    ("correlation", "reversed"): "Spearman's ρ at most -0.6",
    ("correlation", "not testable here"): "ρ undefined",
    ("construction", "not testable here"): "the simulated release was generated to match it",
}

#: The reasons of :data:`REASONS` for a ``bound`` claim judged on one benchmark (``Claim.benchmarks == 1``).
ONE_BENCHMARK = {"reproduced": "holds on the one benchmark tested",
                 "not reproduced": "fails on the one benchmark tested"}

#: The limits of the reproduction a failed claim's note can name: key -> (pattern in the note, words).
LIMIT_REASONS = {
    "subset": (r"not on the paper's matrix", "rests on a subset of the paper's models"),
    "unreleased": (r"never released", "rests on the simulated release (responses never released)"),
    "training": (r"training models only", "the authors' calibration applied to every model, not per split"),
    "engine": (r"our calibration engine is", "another calibration engine than the authors'"),
}


def reason(claim) -> str:
    """One clause saying why ``claim`` got its verdict (the rule's, then the data's first reason).

    Parameters
    ----------
    claim : Claim or namedtuple
        With ``rule``, ``verdict`` and ``note`` (and ``benchmarks``: a bound judged on one benchmark
        says so, :data:`ONE_BENCHMARK`).
    """
    one = claim.rule == "bound" and getattr(claim, "benchmarks", 0) == 1
    clause = ONE_BENCHMARK.get(claim.verdict) if one else None
    clause = clause or REASONS.get((claim.rule, claim.verdict), claim.verdict)
    for pattern, words in LIMIT_REASONS.values():
        if claim.note and re.search(pattern, claim.note):
            return f"{clause}; {words}"
    return clause


def _first_clause(text: str) -> str:
    """``text`` up to its first ``"; "`` outside parentheses (a clause's own aside stays whole).

    >>> _first_clause("HarmBench: 19 of 77 (paper 19; 20 strictly above); WMDP (Bio): 0 of 29")
    'HarmBench: 19 of 77 (paper 19; 20 strictly above)'
    """
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth <= 0 and text.startswith("; ", i):
            return text[:i]
    return text


_INTERVAL = re.compile(r"\s*\(95% Monte Carlo interval[^)]*\)")


def ours(evidence: str) -> str:
    """The first clause of a claim's evidence, without its interval: our number, as the line shows it.

    >>> ours("ours 0.873 (95% Monte Carlo interval over splits [0.85, 0.89]), at the nearest swept k = 20")
    '0.873, at the nearest swept k = 20'
    >>> ours("our k: 25 (+1 grid steps); the unrounded mean reaches 0.90 at k = 25")
    'our k: 25 (+1 grid steps)'
    """
    first = _first_clause(str(evidence))
    first = _INTERVAL.sub("", first)
    return re.sub(r"^ours\s+", "", first).strip()


def results_frame(claims) -> pd.DataFrame:
    """One row per claim: its words, ours, the difference, the verdict and why, the section, the data.

    Columns ``claim``, ``source``, ``ours``, ``difference``, ``verdict``, ``why``, ``section``, ``kind``
    and ``data``.

    Parameters
    ----------
    claims : iterable of Claim
        As :func:`irtbook.claims.collect` returns them (one verdict per claim, published once).
    """
    card = sc.scorecard_frame(list(claims))
    return pd.DataFrame({"claim": card["claim"], "source": card["source"],
                         "ours": card["evidence"].map(ours), "difference": card["difference"].fillna(""),
                         "verdict": card["verdict"],
                         "why": [reason(r) for r in card.itertuples()], "section": card["section"],
                         "kind": card["kind"], "data": card["data"]},
                        columns=["claim", "source", "ours", "difference", "verdict", "why", "section", "kind", "data"])


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


#: The limits of :data:`LIMIT_REASONS` that a table's data column already states.
DATA_LIMITS = ("subset", "unreleased")


def _without_data_limits(why: str) -> str:
    """``why`` without a clause the row's data column already says (a subset, the simulated release).

    >>> _without_data_limits("fails on more than half of the benchmarks; rests on a subset of the paper's models")
    'fails on more than half of the benchmarks'
    """
    for key in DATA_LIMITS:
        why = why.replace(f"; {LIMIT_REASONS[key][1]}", "")
    return why


def results_markdown(frame: pd.DataFrame, *, with_data: bool = False) -> str:
    """A MyST table of :func:`results_frame` rows (the section column links to the chapter).

    ``with_data`` adds the data each claim rests on (for claims not on the paper's data); the
    ``why`` cells then leave out the limits that column states (:data:`DATA_LIMITS`).
    """
    head = ["the paper's claim", "ours", "verdict", "why", "shown in"]
    if with_data:
        head.insert(1, "data")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in frame.itertuples():
        mine = f"{r.ours}; {r.difference} against the paper" if r.difference else r.ours
        why = _without_data_limits(r.why) if with_data else r.why
        cells = [f"{_cell(r.claim)} ({_cell(r.source)})", _cell(mine), r.verdict, _cell(why), r.section]
        if with_data:
            cells.insert(1, _cell(r.data))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def limit_counts(frame: pd.DataFrame) -> dict[str, int]:
    """How many claims that did not reproduce each limit of :data:`LIMIT_REASONS` may explain.

    Counted from the claims' ``why`` (the words of each limit), over verdicts other than reproduced.
    """
    off = frame[frame["verdict"] != "reproduced"]
    return {key: int(off["why"].str.contains(re.escape(words)).sum()) for key, (_, words) in LIMIT_REASONS.items()}


_KIND_WORDS = {"paper": "the paper's data", "real": "other real data", "sim": "the simulated release",
               "mixed": "several kinds of data together", "": "data not stated"}


def _counted(frame: pd.DataFrame) -> str:
    parts = [(tallied, words) for tallied, words in (
        (int((frame["verdict"] == "reproduced").sum()), "reproduced"),
        (int((frame["verdict"] == "close").sum()), "close"),
        (int((frame["verdict"] == "partly").sum()), "partly"),
        (int(frame["verdict"].isin(["not reproduced", "reversed"]).sum()), "not reproduced or reversed"),
        (int((frame["verdict"] == "not testable here").sum()), "not testable here")) if tallied]
    text = [f"{n} {words}" for n, words in parts]
    return names_phrase(text)


def found_sentences(claims, *, most: int = 2) -> str:
    """What a chapter found, in two or three sentences, from the claims it published (Markdown).

    The first sentence counts the verdicts on the paper's data; the second names the claims that
    did not reproduce there, or, if none failed outright, those that held only in part or were only
    close (at most ``most``, each with its verdict and the reason); the third counts those on other
    data and names the ones that failed there. The counts and names are the published verdicts', so
    the sentences agree with the chapter's numbers.

    Parameters
    ----------
    claims : iterable of Claim
        The claims the chapter published (:func:`irtbook.claims.publish` returns them).
    most : int
        How many failed claims to name.
    """
    frame = results_frame(claims)
    if frame.empty:
        return "This chapter tested none of the paper's claims in this build."
    out = []
    paper = frame[frame["kind"] == "paper"]
    if len(paper):
        out.append(f"On the paper's data this chapter tested {len(paper)} of its claims: {_counted(paper)}.")
        off = paper[paper["verdict"].isin(_FAILED)]
        loose = paper[paper["verdict"].isin(["close", "partly"])]
        if len(off):
            out.append(f"Those that did not reproduce: {_named(off, most)}.")
        elif len(loose):
            out.append(f"None failed outright; not fully reproduced: {_named(loose, most)}.")
        else:
            out.append("None of them failed outright (not reproduced or reversed).")
    other = frame[frame["kind"] != "paper"]
    if len(other):
        kinds = [_KIND_WORDS[k] for k in sorted(set(other["kind"]), key=list(_KIND_WORDS).index)]
        off = other[other["verdict"].isin(_FAILED)]
        failed = f"; not reproduced there: {_named(off, most)}" if len(off) else ""
        out.append(f"On {names_phrase(kinds)}, {len(other)} "
                   f"{'claim' if len(other) == 1 else 'claims'}: {_counted(other)}{failed}.")
    return " ".join(out)


_FAILED = ("not reproduced", "reversed")


def _named(rows: pd.DataFrame, most: int) -> str:
    """The first ``most`` claims of ``rows`` with verdict and reason, then how many more the results page has."""
    named = "; ".join(f"{r.claim} ({r.verdict}: {r.why})" for r in rows.head(most).itertuples())
    return named + (f", and {len(rows) - most} more ({{doc}}`results`)" if len(rows) > most else "")
