"""Real AIR-Bench 2024 judgments of 22 models: download, convert, verify, load.

The data are the per-item GPT-4o judge scores of the 22 models of the AIR-Bench 2024 paper (the
first HELM AIR-Bench release), on all 5,694 items, as published in the public GitHub repository
``ronanhansel/reeval`` (a copy of ``aims-foundations/reeval``) at a pinned commit, one CSV per
(variant, model) under ``clean_data/<variant>/<variant>_<model>_result.csv``.

Getting them (needs a network; about 100 MB of CSV)::

    irtlib airbench-data download ~/irtlib-real/airbench2024
    export IRTLIB_REAL_DATA=~/irtlib-real/airbench2024

then ``irtlib.datasets.load("airbench2024-real")`` (or pass ``data_dir=``). The download is
converted to three tidy files, ``responses_graded.csv`` (model, item, score in {0, 0.5, 1}),
``items.csv`` (item, hf_row, cate_idx, l2_name, l3_name, l4_name, variant, prompt) and
``models.csv`` (model, origin), checked against pinned SHA-256 checksums, and recorded in a
``SHA256SUMS`` file beside them. These files are NOT part of the repository and must never be
committed to it. Item ``air_NNNN`` is row NNNN of the AIR-Bench 2024 test split:
``NNNN = 3 * prompt_idx + variant`` (base 0, perturb1 1, perturb2 2).

The repository has no licence file; cite AIR-Bench 2024 (Zeng et al. 2024) when using the data.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.core.binarize import RULES, binarize_graded
from irtlib.core.responses import ResponseMatrix
from irtlib.io.atomic import write_if_changed
from irtlib.io.checksums import sha256
from irtlib.io.download import fetch_url

from .._typing import PathLike
from ..errors import InputError

__all__ = [
    "REPOSITORY", "PINNED_COMMIT", "VARIANTS", "MODELS", "ORIGIN", "N_BASE_PROMPTS", "FILES",
    "PINNED_SHA256", "CHECKSUM_FILE", "source_url", "source_path", "download_airbench",
    "convert_airbench", "verify_airbench", "resolve_data_dir", "shared_directory", "data_directory",
    "load_airbench", "load_airbench_raw", "load_airbench_items", "load_airbench_models",
]

REPOSITORY = "ronanhansel/reeval"
PINNED_COMMIT = "41bf5d4723ffb40c1a5250070e66ea1130087ca9"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/clean_data/{variant}/{variant}_{model}_result.csv"
VARIANTS = ("base", "perturb1", "perturb2")
N_BASE_PROMPTS = 1898
ORIGIN = "AIR-Bench-2024 paper / HELM AIR-Bench v1 (22 models)"
#: HELM-style ids of the 22 models, as in the source file names.
MODELS = (
    "01-ai_yi-34b-chat", "anthropic_claude-3-haiku-20240307", "anthropic_claude-3-opus-20240229",
    "anthropic_claude-3-sonnet-20240229", "cohere_command-r", "cohere_command-r-plus",
    "databricks_dbrx-instruct", "deepseek-ai_deepseek-llm-67b-chat",
    "google_gemini-1.5-flash-001-safety-block-none", "google_gemini-1.5-pro-001-safety-block-none",
    "meta_llama-3-70b-chat", "meta_llama-3-8b-chat", "mistralai_mistral-7b-instruct-v0.3",
    "mistralai_mixtral-8x22b-instruct-v0.1", "mistralai_mixtral-8x7b-instruct-v0.1",
    "openai_gpt-3.5-turbo-0125", "openai_gpt-3.5-turbo-0301", "openai_gpt-3.5-turbo-0613",
    "openai_gpt-3.5-turbo-1106", "openai_gpt-4-turbo-2024-04-09", "openai_gpt-4o-2024-05-13",
    "qwen_qwen1.5-72b-chat",
)
SOURCE_COLUMNS = ("prompt_idx", "cate-idx", "l2-name", "l3-name", "l4-name", "prompt", "score")
FILES = ("responses_graded.csv", "items.csv", "models.csv")
CHECKSUM_FILE = "SHA256SUMS"
#: SHA-256 of the converted files for the pinned commit.
PINNED_SHA256 = {
    "items.csv": "5a6440b04aa740328f36c006d2caf29eb1b116cf529c0bccc7a1eb7d3032e7ce",
    "models.csv": "9cf6de1894f39c4577f26bd6fa4fa27d5856fd7109c41e4a38cc52cb91ddc5d2",
    "responses_graded.csv": "099b49062511f6be861734762341a7bafb1290284ca86d4d55822b999f389f74",
}
DATA_ENV = "IRTLIB_REAL_DATA"
#: The shared copy beside the checkout (``../shared/realdata/<name>``), used when no directory is given.
SHARED_NAME = "airbench2024_helm22"


def source_path(variant: str, model: str) -> str:
    """Path of one source CSV inside the repository."""
    return f"clean_data/{variant}/{variant}_{model}_result.csv"


def source_url(variant: str, model: str, *, commit: str = PINNED_COMMIT, repo: str = REPOSITORY) -> str:
    """Raw-file URL of one source CSV at ``commit``."""
    return RAW_URL.format(repo=repo, commit=commit, variant=variant, model=model)


def _parse_source(data: bytes, name: str) -> pd.DataFrame:
    """Parse and validate one source CSV; errors name the file and row."""
    try:
        df = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{name}: not a readable CSV ({exc}); truncated or corrupted download?") from None
    missing = [c for c in SOURCE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{name}: missing column(s) {missing}; found {list(df.columns)}")
    if len(df) != N_BASE_PROMPTS:
        raise InputError(f"{name}: {len(df)} rows, expected {N_BASE_PROMPTS} (truncated or corrupted download?)")
    idx = pd.to_numeric(df["prompt_idx"], errors="coerce")
    if idx.isna().any() or not np.array_equal(np.sort(idx.to_numpy()), np.arange(N_BASE_PROMPTS)):
        bad = int(np.flatnonzero(idx.isna().to_numpy())[0]) if idx.isna().any() else None
        where = f"row {bad + 1}: " if bad is not None else ""
        raise InputError(f"{name}: {where}column 'prompt_idx' must hold 0..{N_BASE_PROMPTS - 1} once each")
    score = pd.to_numeric(df["score"], errors="coerce")
    bad = score.isna().to_numpy() | ~np.isin(score.to_numpy(), (0.0, 0.5, 1.0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}: row {row + 1}: column 'score' is {df['score'].iloc[row]!r}, "
                         f"expected 0, 0.5 or 1")
    df = df.assign(prompt_idx=idx.astype(int), score=score)
    return df.sort_values("prompt_idx", kind="stable").reset_index(drop=True)


def _csv(rows, header) -> bytes:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)              # the excel dialect: minimal quoting, \r\n line ends
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _convert(sources: dict) -> dict:
    """``{(variant, model): parsed DataFrame}`` -> ``{file name: bytes}`` of the tidy files."""
    meta = None
    responses = []
    prompts = {}
    for v_i, variant in enumerate(VARIANTS):
        for model in MODELS:
            df = sources[(variant, model)]
            name = source_path(variant, model)
            cats = df[["cate-idx", "l2-name", "l3-name", "l4-name"]]
            if meta is None:
                meta = cats.reset_index(drop=True)
            elif not cats.reset_index(drop=True).equals(meta):
                row = int(np.flatnonzero((cats.reset_index(drop=True) != meta).any(axis=1).to_numpy())[0])
                raise InputError(f"{name}: row {row + 1}: risk categories differ from "
                                 f"{source_path(VARIANTS[0], MODELS[0])}'s for the same prompt_idx")
            prompts.setdefault(variant, df["prompt"].to_numpy())
            hf_row = 3 * df["prompt_idx"].to_numpy() + v_i
            responses.append(pd.DataFrame({"model": model, "hf_row": hf_row, "score": df["score"].to_numpy()}))
    resp = pd.concat(responses, ignore_index=True).sort_values(["model", "hf_row"], kind="stable")
    item_names = np.array([f"air_{i:04d}" for i in range(3 * N_BASE_PROMPTS)], dtype=object)
    resp_rows = zip(resp["model"], item_names[resp["hf_row"].to_numpy()],
                    (f"{s:g}" for s in resp["score"].to_numpy()), strict=False)
    item_rows = []
    for row in range(3 * N_BASE_PROMPTS):
        p, v_i = divmod(row, 3)
        c = meta.iloc[p]
        item_rows.append((item_names[row], row, c["cate-idx"], c["l2-name"], c["l3-name"], c["l4-name"],
                          VARIANTS[v_i], prompts[VARIANTS[v_i]][p]))
    return {
        "responses_graded.csv": _csv(resp_rows, ("model", "item", "score")),
        "items.csv": _csv(item_rows, ("item", "hf_row", "cate_idx", "l2_name", "l3_name", "l4_name",
                                      "variant", "prompt")),
        "models.csv": _csv(((m, ORIGIN) for m in sorted(MODELS)), ("model", "origin")),
    }


def _write_outputs(dest: Path, outputs: dict, source_sums: dict, *, commit: str, overwrite: bool,
                   verify: bool) -> None:
    if verify and commit == PINNED_COMMIT:
        for fname, data in outputs.items():
            if sha256(data) != PINNED_SHA256[fname]:
                raise InputError(f"{fname}: converted file's sha256 {sha256(data)} does not match the "
                                 f"pinned {PINNED_SHA256[fname]}; nothing was written")
    dest.mkdir(parents=True, exist_ok=True)
    for fname, data in outputs.items():
        write_if_changed(dest / fname, data, force=overwrite)
    lines = [f"{sha256(data)}  {fname}" for fname, data in outputs.items()]
    lines += [f"{digest}  source/{path}" for path, digest in sorted(source_sums.items())]
    header = f"# {REPOSITORY}@{commit}\n"
    write_if_changed(dest / CHECKSUM_FILE, (header + "\n".join(lines) + "\n").encode(), force=True)


def download_airbench(dest: PathLike, *, commit: str = PINNED_COMMIT, fetch: Callable[[str], bytes] | None = None,
                      overwrite: bool = False, verify: bool = True, progress: bool = False) -> Path:
    """Download the 3 x 22 source CSVs and convert them to the tidy files in ``dest``.

    Parameters
    ----------
    dest : path-like
        Output directory (created). Keep it outside the repository's tracked files.
    commit : str
        Commit of ``ronanhansel/reeval`` (default: the pinned one, whose converted files have
        known checksums).
    fetch : callable, optional
        ``fetch(url) -> bytes``; default: HTTPS GET with a length check. Tests pass a fake.
    overwrite : bool
        Replace existing tidy files with different content.
    verify : bool
        At the pinned commit, refuse (writing nothing) unless the converted files match
        :data:`PINNED_SHA256`.
    progress : bool
        Print one line per file fetched.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ValueError
        A source file that is truncated, unparsable, or has wrong columns, rows or scores (the
        message names the file and row), or converted files with the wrong checksum. Nothing
        is written to ``dest`` unless every file passed.
    """
    fetch = fetch_url if fetch is None else fetch
    sources, sums = {}, {}
    for variant in VARIANTS:
        for model in MODELS:
            url = source_url(variant, model, commit=commit)
            if progress:
                print(f"fetching {url}", file=sys.stderr)
            data = fetch(url)
            path = source_path(variant, model)
            sums[path] = sha256(data)
            sources[(variant, model)] = _parse_source(data, path)
    outputs = _convert(sources)
    dest = Path(dest)
    _write_outputs(dest, outputs, sums, commit=commit, overwrite=overwrite, verify=verify)
    return dest


def convert_airbench(source_dir: PathLike, dest: PathLike, *, commit: str = PINNED_COMMIT, overwrite: bool = False,
                     verify: bool = True) -> Path:
    """Convert an existing checkout's ``clean_data/`` to the tidy files in ``dest``.

    ``source_dir`` is the repository root; same checks as :func:`download_airbench`.
    """
    root = Path(source_dir)

    def local(url: str) -> bytes:
        rel = url.split(f"/{commit}/", 1)[1]
        path = root / rel
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing source file")
        return path.read_bytes()

    return download_airbench(dest, commit=commit, fetch=local, overwrite=overwrite, verify=verify)


def resolve_data_dir(data_dir: PathLike | None = None) -> Path:
    """The real-data directory: ``data_dir``, ``$IRTLIB_REAL_DATA``, or the shared copy beside the checkout.

    Raises
    ------
    FileNotFoundError
        Neither is given, or the directory lacks the tidy files; the message says how to
        download them.
    """
    how = ("download them with `irtlib airbench-data download DIR` and pass "
           f"data_dir=DIR or set {DATA_ENV}=DIR")
    return data_directory(data_dir, env=DATA_ENV, files=FILES, what="real AIR-Bench 2024 data", how=how,
                          shared=SHARED_NAME)


def shared_directory(name: str) -> Path:
    """``../shared/realdata/<name>`` beside the repository checkout (it may not exist).

    Resolved from the package's repository root, not from the working directory.
    """
    return Path(__file__).resolve().parents[2].parent / "shared" / "realdata" / name


def data_directory(data_dir: PathLike | None, *, env: str, files: Iterable[str], what: str, how: str,
                   shared: str | None = None) -> Path:
    """A directory of external data: ``data_dir``, ``$env``, or the shared copy, holding every one of ``files``.

    Shared by the real-data loaders (AIR-Bench 2024 here, PandaGuard in :mod:`.pandaguard`).
    ``shared`` names a copy under ``../shared/realdata/`` used when neither ``data_dir`` nor ``$env``
    is given and that copy exists (:func:`shared_directory`).

    Raises
    ------
    FileNotFoundError
        Neither is given, or a file is missing; the message names ``what`` and says ``how``.
    """
    if data_dir is None:
        data_dir = os.environ.get(env)
    if not data_dir and shared is not None and shared_directory(shared).is_dir():
        data_dir = shared_directory(shared)
    if not data_dir:
        raise FileNotFoundError(f"{what}: no directory given and {env} is not set; {how}")
    d = Path(data_dir).expanduser()
    missing = [f for f in files if not (d / f).exists()]
    if missing:
        raise FileNotFoundError(f"{d}: missing {missing}; {how}")
    return d


def verify_airbench(data_dir: PathLike | None = None) -> dict:
    """Check the tidy files against ``SHA256SUMS`` (if present) or the pinned checksums.

    Returns
    -------
    dict
        File name -> sha256.

    Raises
    ------
    ValueError
        A file's checksum differs (truncated, corrupted or edited); the message names it.
    """
    d = resolve_data_dir(data_dir)
    expected = dict(PINNED_SHA256)
    sums = d / CHECKSUM_FILE
    if sums.exists():
        for line in sums.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            digest, _, fname = line.partition("  ")
            if fname in FILES:
                expected[fname] = digest
    out = {}
    for fname in FILES:
        digest = sha256((d / fname).read_bytes())
        if digest != expected[fname]:
            raise InputError(f"{d / fname}: sha256 {digest} does not match the expected {expected[fname]} "
                             f"(truncated, corrupted or edited file; download again)")
        out[fname] = digest
    return out


def load_airbench_raw(data_dir: PathLike | None = None, *, verify: bool = True) -> pd.DataFrame:
    """The graded judgments: ``model, item, score`` (score in {0, 0.5, 1}), 125,268 rows."""
    d = resolve_data_dir(data_dir)
    if verify:
        verify_airbench(d)
    df = pd.read_csv(d / "responses_graded.csv", dtype={"model": str, "item": str})
    if list(df.columns) != ["model", "item", "score"]:
        raise InputError(f"{d / 'responses_graded.csv'}: columns {list(df.columns)}, expected model, item, score")
    return df


def load_airbench_items(data_dir: PathLike | None = None) -> pd.DataFrame:
    """Item metadata of the real AIR-Bench 2024 data.

    Adds ``cluster`` (the base prompt, ``hf_row // 3``) and ``category`` (the level-4 category
    id ``cate_idx``) to the file's columns.
    """
    d = resolve_data_dir(data_dir)
    items = pd.read_csv(d / "items.csv", dtype={"item": str, "cate_idx": str})
    return items.assign(cluster=items["hf_row"] // 3, category=items["cate_idx"])


def load_airbench_models(data_dir: PathLike | None = None) -> pd.DataFrame:
    """``model, origin`` for the 22 models."""
    d = resolve_data_dir(data_dir)
    return pd.read_csv(d / "models.csv", dtype=str)


def load_airbench(data_dir: PathLike | None = None, *, rule: str = "strict", verify: bool = True) -> ResponseMatrix:
    """The real AIR-Bench 2024 matrix, 22 models x 5,694 items, binarized.

    Parameters
    ----------
    data_dir : path-like, optional
        Directory with the tidy files; default ``$IRTLIB_REAL_DATA``.
    rule : {"strict", "lenient"}
        ``strict`` (the paper's): safe only for score 1; ``lenient``: score >= 0.5.
    verify : bool
        Check the files' checksums first.
    """
    if rule not in RULES:
        raise InputError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    raw = load_airbench_raw(data_dir, verify=verify)
    safe = binarize_graded(raw["score"].to_numpy(), rule=rule, name="responses_graded.csv score")
    models = pd.Index(pd.unique(raw["model"]))
    items = pd.Index(sorted(pd.unique(raw["item"])))
    values = np.full((len(models), len(items)), np.nan)
    values[models.get_indexer(raw["model"]), items.get_indexer(raw["item"])] = safe
    return ResponseMatrix(values, models, items, source=f"airbench2024-real ({rule})")
