"""Response files irtlib knows, by checksum or by name, and what a 1 means in each.

The paper's authors released their matrices as JSON lines that all store 0/1, but not in one
direction: the three HELM sets store 1 = safe, WMDP-Bio stores 1 = the model answered CORRECTLY,
which is unsafe under the paper's rule (``../shared/realdata/paper/README.md``). Read as it is,
the WMDP file gives every model its *danger* as its safety score. :func:`known_direction`
tells :func:`irtlib.io.load_responses` which way such a file points, so that the default reading
is right, and says how it knows (the exact bytes, or only the name).

:mod:`irtlib.datasets.authors` holds the full table of the release (paths, shapes, URLs); this
module holds only what a reader needs, and a test checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from irtlib._typing import PathLike

__all__ = ["KnownFile", "KNOWN_FILES", "known_direction", "looks_like_wmdp"]


@dataclass(frozen=True)
class KnownFile:
    """A response file irtlib recognises.

    Attributes
    ----------
    filename : str
        Its name as released.
    what : str
        What it is, for messages.
    sha256 : str or None
        Its SHA-256 when known (None: recognised by name only).
    positive : {"safe", "unsafe"}
        What a 1 in it means.
    meaning : str
        What a 1 in it is, in words, for messages.
    """

    filename: str
    what: str
    sha256: str | None
    positive: str
    meaning: str


KNOWN_FILES = (
    KnownFile("helm_antredteam_irt_data.jsonl", "the paper's authors' Anthropic Red Team matrix",
              "3ce73aac12ceed24b7d6ec894cf3f096005df276196fdf3a9840c52a870d54ee", "safe", "a safe response"),
    KnownFile("helm_harmbench_irt_data.jsonl", "the paper's authors' HarmBench matrix",
              "9105d4e2fe3eafac8410e3614716785c6272a39fc7dda3dd3ad9656213ed517b", "safe", "a safe response"),
    KnownFile("helm_simplesafety_irt_data.jsonl", "the paper's authors' SimpleSafetyTests matrix",
              "44f59aa378203b85d976d131003047deffd444d857e55936b5b0514967622ebf", "safe", "a safe response"),
    KnownFile("wmdp_irt_data.jsonl", "the paper's authors' WMDP-Bio matrix",
              "ffcb045137220f55531fe0d30c1d1753e84a599490c23466834dd9fefb6d3074", "unsafe",
              "a CORRECT answer to a hazardous-knowledge question, which is unsafe"),
    KnownFile("helm_airbench2024_irt_data.jsonl", "the paper's authors' AIR-Bench 2024 matrix", None, "safe",
              "a safe response"),
    KnownFile("safetybench_irt_data.jsonl", "the paper's authors' SafetyBench matrix", None, "safe",
              "a safe response"),
)


def known_direction(path: PathLike, sha256: str) -> tuple[KnownFile, str] | None:
    """The known file ``path`` is, and how it was recognised (``"checksum"`` or ``"name"``); None if unknown.

    Parameters
    ----------
    path : path-like
        The file as given (its name is compared when its bytes are not known).
    sha256 : str
        The SHA-256 of its bytes.

    Returns
    -------
    (KnownFile, str) or None
    """
    for known in KNOWN_FILES:
        if known.sha256 is not None and known.sha256 == sha256:
            return known, "checksum"
    name = Path(path).name
    for known in KNOWN_FILES:
        if known.filename == name:
            return known, "name"
    return None


def looks_like_wmdp(name: str) -> bool:
    """True when a file or task name mentions WMDP, whose 0/1 scores usually mean a correct (unsafe) answer."""
    return "wmdp" in name.lower()
