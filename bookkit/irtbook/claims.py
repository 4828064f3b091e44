"""One verdict per claim: chapters publish their claims, the scorecard collects them.

A claim of the paper is tested in the chapter that shows its evidence, by one of the rules of
:mod:`irtbook.scorecard`, exactly once. That chapter *publishes* the claim with
:func:`publish`, which glues two values into its executed notebook:

- ``claim__<id>``: the whole :class:`~irtbook.scorecard.Claim` as JSON (hidden);
- ``verdict__<id>``: the verdict word, for the chapter's own prose (``{glue:text}`verdict__<id>```).

The scorecard page does not recompute anything: :func:`collect` reads every ``claim__*`` value
from the executed notebooks of the same build, so the scorecard's verdict and the chapter's are
the same string by construction. :func:`glued_verdicts` lists every ``verdict__*`` value any
notebook glued, which lets a test check that no page shows a different word for a claim.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from .scorecard import Claim

__all__ = ["CLAIM_PREFIX", "VERDICT_PREFIX", "publish", "collect", "glued_verdicts", "glued_values"]

#: Glue-key prefixes of a published claim (JSON) and of its verdict word.
CLAIM_PREFIX = "claim__"
VERDICT_PREFIX = "verdict__"


def _check_id(claim: Claim) -> str:
    if not claim.id or not claim.id.replace("_", "").isalnum():
        raise ValueError(f"a published claim needs an id of letters, digits and '_', got {claim.id!r} "
                         f"for {claim.claim!r}")
    return claim.id


def publish(claims: Iterable[Claim]) -> list[Claim]:
    """Glue each claim (JSON) and its verdict into the running notebook; the claims, as a list.

    Parameters
    ----------
    claims : iterable of Claim
        Each with a unique ``id``.

    Raises
    ------
    ValueError
        On a missing, malformed or repeated id.
    """
    from myst_nb import glue

    claims = list(claims)
    ids = [_check_id(c) for c in claims]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"claim ids published twice: {repeated}")
    for c in claims:
        glue(CLAIM_PREFIX + c.id, json.dumps(asdict(c), sort_keys=True), display=False)
        glue(VERDICT_PREFIX + c.id, c.verdict, display=False)
    return claims


def glued_values(notebook: str | Path) -> dict[str, str]:
    """Every text value glued into an executed notebook (glue key -> value).

    Only values glued as Python strings are returned (their ``text/plain`` is a string literal),
    read under the record's mime prefix as papermill-executed notebooks store them.
    """
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    out = {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            scrap = output.get("metadata", {}).get("scrapbook", {})
            name = scrap.get("name")
            # glue records text/plain under its mime prefix (papermill's "application/papermill.record/")
            text = output.get("data", {}).get(scrap.get("mime_prefix", "") + "text/plain")
            if name is None or text is None:
                continue
            text = "".join(text) if isinstance(text, list) else text
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str):
                out[name] = value
    return out


def _notebooks(executed_dir: str | Path) -> list[Path]:
    return sorted(Path(executed_dir).glob("*.ipynb"))


def collect(executed_dir: str | Path, *, exclude: Iterable[str] = ("scorecard",)) -> list[Claim]:
    """The claims the chapters of one build published, in chapter order then publication order.

    Parameters
    ----------
    executed_dir : path
        The build's executed notebooks (``_build/executed``).
    exclude : iterable of str
        Notebook stems to skip (the scorecard itself).

    Raises
    ------
    ValueError
        When two chapters publish the same claim id.
    """
    claims, origin = [], {}
    skip = set(exclude)
    for nb in _notebooks(executed_dir):
        if nb.stem in skip:
            continue
        for key, value in glued_values(nb).items():
            if not key.startswith(CLAIM_PREFIX):
                continue
            c = Claim(**json.loads(value))
            if c.id in origin:
                raise ValueError(f"claim {c.id!r} published by both {origin[c.id]} and {nb.stem}")
            origin[c.id] = nb.stem
            claims.append(c)
    return claims


def glued_verdicts(executed_dir: str | Path) -> pd.DataFrame:
    """Every verdict any notebook of the build glued: columns ``notebook``, ``id``, ``verdict``."""
    rows = [{"notebook": nb.stem, "id": key[len(VERDICT_PREFIX):], "verdict": value}
            for nb in _notebooks(executed_dir) for key, value in glued_values(nb).items()
            if key.startswith(VERDICT_PREFIX)]
    return pd.DataFrame(rows, columns=["notebook", "id", "verdict"])
