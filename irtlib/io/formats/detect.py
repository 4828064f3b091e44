"""Recognising what a response file or directory is, from its name and first bytes.

One entry point, :func:`detect_format`, tells the formats :func:`irtlib.load_responses` reads
apart (``--layout auto``):

======================  =====================================================================
format                  recognised by
======================  =====================================================================
``lm-eval``             a file named ``samples_<task>_<date>.jsonl``, or any file whose first
                        line is a JSON object with ``doc_id`` (lm-evaluation-harness
                        ``--log_samples``); a directory holding such files (any depth)
``inspect``             a ``.eval`` file or a zip archive holding ``header.json``/``_journal/``;
                        a JSON file beginning ``{"version": N, "status": ...`` (how Inspect
                        writes a log); a directory holding such files
``helm``                a directory holding ``per_instance_stats.json`` files (HELM runs)
``jsonl``               any other file beginning with ``{`` or named ``.jsonl``/``.ndjson``
                        (the paper's authors' format: ``subject_id``, ``responses``); a ``.json``
                        file that is neither an Inspect log nor JSON lines is refused
``table``               any other file: CSV/TSV (optionally compressed) or Parquet, long or wide
                        (told apart by its columns, :mod:`irtlib.io`)
======================  =====================================================================

A directory holding the files of more than one evaluator is refused with one line naming a file
of each; a directory holding none of them is refused with one line saying what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path

from irtlib._typing import PathLike
from irtlib.errors import InputError

from .inspect_logs import inspect_files, looks_like_inspect_eval, looks_like_inspect_json
from .lm_eval import is_samples_name, samples_files

__all__ = ["FORMATS", "DESCRIPTIONS", "detect_format", "describe"]

FORMATS = ("table", "jsonl", "helm", "lm-eval", "inspect")

#: What each format (and each table layout) is called in messages.
DESCRIPTIONS = {
    "long": "a long table (one row per model, item and score)",
    "wide": "a wide table (one row per model, one column per item)",
    "table": "a CSV/TSV or Parquet table",
    "jsonl": "JSON lines in the paper's authors' format (subject_id, responses)",
    "helm": "a HELM run directory",
    "lm-eval": "lm-evaluation-harness per-sample logs (samples_<task>_<date>.jsonl)",
    "inspect": "Inspect AI eval logs (.eval, .json)",
}

EXPECTED_IN_DIRECTORY = ("a HELM run directory (runs holding per_instance_stats.json), lm-evaluation-harness "
                         "per-sample logs (samples_<task>_<date>.jsonl, from --log_samples) or Inspect AI eval logs "
                         "(.eval, .json)")


def _first_line(path: Path, limit: int = 1 << 24) -> bytes:
    with open(path, "rb") as fh:
        return fh.readline(limit)


def _uncompressed_head(path: Path, head: bytes) -> bytes:
    """The first bytes of a gzip, bz2 or xz file's content (``head`` itself when it is not compressed)."""
    import bz2
    import gzip
    import lzma

    from ..compressed import compression_of

    kind = compression_of(head)
    if kind is None:
        return head
    try:
        with {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}[kind](path, "rb") as fh:
            return fh.read(4096)
    except (OSError, EOFError, lzma.LZMAError):
        return head                            # a damaged archive: the reader says so


def _refuse_results_file(path: Path, first: object) -> None:
    """An lm-eval results file (aggregate scores) is not per-sample logs: say where those are."""
    if isinstance(first, dict) and "results" in first and ({"config", "versions", "model_name"} & set(first)):
        raise InputError(f"{path}: is an lm-evaluation-harness results file (aggregate scores per task), not "
                         "per-sample judgments; irtlib reads the samples_<task>_<date>.jsonl logs beside it "
                         "(written with --log_samples): give one of them, or their directory")


def _detect_file(path: Path) -> str:
    if is_samples_name(path):
        return "lm-eval"
    if looks_like_inspect_eval(path):
        return "inspect"
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return "table"                         # the table reader reports the error with the file's name
    content = _uncompressed_head(path, head)
    if content is not head and content.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return "jsonl"                         # compressed JSON lines (e.g. .jsonl.gz): the authors' format
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        if looks_like_inspect_json(path):
            return "inspect"
        try:
            first = json.loads(_first_line(path).decode("utf-8", errors="replace").lstrip("\ufeff"))
        except (ValueError, OSError):
            first = None
        # an lm-eval results file, on one line or pretty-printed, gets one message whatever its layout
        _refuse_results_file(path, _whole_json(path) if first is None and path.suffix.lower() == ".json" else first)
        if isinstance(first, dict) and "doc_id" in first and "subject_id" not in first:
            return "lm-eval"
        if first is None and path.suffix.lower() == ".json":
            raise InputError(f"{path}: a JSON document that is neither an Inspect AI eval log (which begins "
                             "{\"version\": N, \"status\": ...) nor JSON lines (one object per line: lm-evaluation-"
                             "harness samples, or the authors' subject_id/responses); irtlib reads "
                             f"{', '.join(DESCRIPTIONS[k] for k in ('lm-eval', 'inspect', 'jsonl'))} and tables")
        return "jsonl"
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    return "table"


def _whole_json(path: Path, limit: int = 1 << 26) -> object:
    """A JSON document read whole (None when it is larger than ``limit`` bytes or not JSON)."""
    try:
        if path.stat().st_size > limit:
            return None
        return json.loads(path.read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff"))
    except (ValueError, OSError):
        return None


def _detect_directory(path: Path) -> str:
    examples = {}
    helm = sorted(path.rglob("per_instance_stats.json"))
    if helm:
        examples["helm"] = helm[0]
    lm = samples_files(path)
    if lm:
        examples["lm-eval"] = lm[0]
    inspect = inspect_files(path)
    if inspect:
        examples["inspect"] = inspect[0]
    if len(examples) > 1:
        parts = [f"{DESCRIPTIONS[k]} ({examples[k]})" for k in examples]
        raise InputError(f"{path}: mixes {' and '.join(parts)}; expected the output of one evaluator: put each "
                         "in its own directory (or name one file)")
    if not examples:
        raise InputError(f"{path}: holds no response files irtlib reads; expected {EXPECTED_IN_DIRECTORY}")
    return next(iter(examples))


def detect_format(path: PathLike) -> str:
    """Which format a response file or directory is in (see the module docstring).

    Parameters
    ----------
    path : path-like
        An existing file or directory.

    Returns
    -------
    str
        One of :data:`FORMATS`.

    Raises
    ------
    InputError
        A directory mixing the files of several evaluators, or holding none irtlib reads.
    FileNotFoundError
        ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    return _detect_directory(path) if path.is_dir() else _detect_file(path)


def describe(layout: str, *, n_models: int, n_items: int) -> str:
    """One sentence for what was read: ``"a long table (...): 12 models x 300 items"``."""
    what = DESCRIPTIONS.get(layout, layout)
    return f"{what}: {n_models} model{'s' * (n_models != 1)} x {n_items} item{'s' * (n_items != 1)}"
