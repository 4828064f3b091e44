"""The paper's own data: the response matrices and fits its authors released.

The authors of the paper published their code and four of their six binary response matrices
(Anthropic Red Team 77 x 1,000, HarmBench 77 x 400, SimpleSafetyTests 77 x 100, WMDP-Bio
29 x 1,273: exactly the shapes of Table 1), plus their own 2PL fits for each of their 100
SimpleSafetyTests splits, in the public repository :data:`REPOSITORY` (Apache-2.0) at
:data:`COMMIT`. Their AIR-Bench 2024 (82 x 5,694) and SafetyBench (29 x 11,435) files are in the
same repository, but no checksum of them is known here: a download records the hash it saw and
says so, and their provenance label says "checksum not verified". What their code
does where it differs from the paper's text is in :mod:`irtlib.protocol.presets`.

Where the files are looked for, in this order (per file; the first place holding it wins):

1. the directory named by ``$IRTLIB_PAPER_DATA`` (:data:`DATA_ENV`);
2. ``../shared/realdata/paper`` beside the repository checkout (:func:`irtlib.datasets.real.shared_directory`);
3. the per-user cache ``$XDG_CACHE_HOME/irtlib/paper`` (default ``~/.cache/irtlib/paper``), which
   ``irtlib paper-data download`` fills.

Every file with a pinned SHA-256 is verified each time it is read (the files are about 1 MB); a
mismatching file is refused with one line naming it. The files are never copied into the
repository.

>>> from irtlib.datasets import authors
>>> m = authors.load_matrix("harmbench")          # 77 x 400, 1 = safe
>>> authors.load_matrix("wmdp-bio").shape         # safety = 1 - the file's "correct"
(29, 1273)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.core.responses import ResponseMatrix
from irtlib.io.checksums import RECORD_SUFFIX, recorded_sha256, sha256
from irtlib.io.download import fetch_url
from irtlib.io.jsonl import check_binary, parse_jsonl

from .. import io as _io
from .._typing import PathLike
from ..errors import InputError, UsageError
from .real import shared_directory

__all__ = [
    "REPOSITORY", "COMMIT", "DATA_COMMIT", "RAW_URL", "DATA_ENV", "SHARED_NAME", "PaperFile", "FILES",
    "RESPONSE_FILES", "UNVERIFIED", "Located", "cache_directory", "search_path", "locate", "find",
    "read_verified", "load_stored", "load_matrix", "load_items", "load_fits", "file_url", "download",
    "DownloadResult", "status_lines", "check_copy",
]

#: The authors' repository and the commit whose files are pinned (data added in :data:`DATA_COMMIT`).
REPOSITORY = "fabiospagliardi/efficient_llm_safety_benchmarking"
COMMIT = "c6813d16a999d1c6dcce3f9ede74976d5f1d0672"
DATA_COMMIT = "ce04cb5048a5e1294b33f1176459343abdbeb593"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
#: Environment variable naming a directory with the authors' files (searched first).
DATA_ENV = "IRTLIB_PAPER_DATA"
#: Name of the shared copy under ``../shared/realdata/``.
SHARED_NAME = "paper"
#: Seconds a download may stall before it fails (each file is about 1 MB; AIR-Bench and SafetyBench a few MB).
FETCH_TIMEOUT = 60
#: Seconds without an answer after which a download says it is still waiting.
WAIT_NOTE = 5
#: Sidecar suffix recording the SHA-256 a download saw for a file whose checksum is not known here.
OBSERVED_SUFFIX = RECORD_SUFFIX


@dataclass(frozen=True)
class PaperFile:
    """One file of the authors' release (or of the shared copy beside it).

    Attributes
    ----------
    key : str
        Short name: a benchmark id for a response matrix, else e.g. ``"simplesafetytests-fits"``.
    benchmark : str
        The benchmark id it belongs to.
    filename : str
        Path relative to a data directory (the shared copy's and the cache's layout).
    remote : str or None
        Path in :data:`REPOSITORY`; None for files that are not in the authors' repository.
    sha256 : str or None
        Pinned SHA-256; None when no checksum is known here.
    shape : tuple of int
        ``(models, items)`` of a response matrix, ``(rows, columns)`` of a table.
    stores : str
        ``"safe"`` (1 = safe), ``"correct"`` (1 = correct answer, i.e. unsafe: WMDP), ``"fits"`` or ``"items"``.
    """

    key: str
    benchmark: str
    filename: str
    remote: str | None
    sha256: str | None
    shape: tuple[int, int]
    stores: str

    @property
    def verifiable(self) -> bool:
        """True when a pinned checksum is known."""
        return self.sha256 is not None


_INPUT = "data/irt_input_data/"
_FITS = "helm_simplesafety_100samples_test10_4bquant_minvar0.01_step20_items.csv"

#: The files, by key. Response matrices are keyed by benchmark id.
FILES = {f.key: f for f in (
    PaperFile("anthropic-red-team", "anthropic-red-team", "helm_antredteam_irt_data.jsonl",
              _INPUT + "helm_antredteam_irt_data.jsonl",
              "3ce73aac12ceed24b7d6ec894cf3f096005df276196fdf3a9840c52a870d54ee", (77, 1000), "safe"),
    PaperFile("harmbench", "harmbench", "helm_harmbench_irt_data.jsonl", _INPUT + "helm_harmbench_irt_data.jsonl",
              "9105d4e2fe3eafac8410e3614716785c6272a39fc7dda3dd3ad9656213ed517b", (77, 400), "safe"),
    PaperFile("simplesafetytests", "simplesafetytests", "helm_simplesafety_irt_data.jsonl",
              _INPUT + "helm_simplesafety_irt_data.jsonl",
              "44f59aa378203b85d976d131003047deffd444d857e55936b5b0514967622ebf", (77, 100), "safe"),
    PaperFile("wmdp-bio", "wmdp-bio", "wmdp_irt_data.jsonl", _INPUT + "wmdp_irt_data.jsonl",
              "ffcb045137220f55531fe0d30c1d1753e84a599490c23466834dd9fefb6d3074", (29, 1273), "correct"),
    PaperFile("airbench2024", "airbench2024", "helm_airbench2024_irt_data.jsonl",
              _INPUT + "helm_airbench2024_irt_data.jsonl", None, (82, 5694), "safe"),
    PaperFile("safetybench", "safetybench", "safetybench_irt_data.jsonl", _INPUT + "safetybench_irt_data.jsonl",
              None, (29, 11435), "safe"),
    PaperFile("simplesafetytests-fits", "simplesafetytests", f"authors_fits/{_FITS}",
              f"data/static_selection_output_data/{_FITS}",
              "760cfe00b107343f97b5a818c6e6b3a17846a1592c99fc92f21e078aeaedad72", (7900, 29), "fits"),
    # Item categories assembled for the shared copy (HarmBench's behaviour list, MIT; the
    # SimpleSafetyTests repository, CC-BY-4.0): not in the authors' repository, so not downloadable;
    # pinned to the shared copy's bytes.
    PaperFile("harmbench-items", "harmbench", "harmbench_items.csv", None,
              "8ea094f06a3be4be6b4436ee39f004bdb87cecf9d3b485712c0802796bf0f14a", (400, 6), "items"),
    PaperFile("simplesafetytests-items", "simplesafetytests", "simplesafety_items.csv", None,
              "9d6c6e4d9d3cd1f85dc00c7af60627a1ef4056c4d91a584be3a928837e109ea8", (100, 5), "items"),
)}
#: Benchmark ids that have a response-matrix file in the authors' release.
RESPONSE_FILES = tuple(k for k, f in FILES.items() if f.stores in ("safe", "correct"))
#: Keys of the files whose checksum is not known here.
UNVERIFIED = tuple(k for k, f in FILES.items() if not f.verifiable)
#: What ``download`` fetches without names: every downloadable file with a pinned checksum.
DEFAULT_DOWNLOAD = tuple(k for k, f in FILES.items() if f.remote and f.verifiable)
#: Item-metadata columns kept (never prompt, behaviour or context text: the README asks so).
ITEM_COLUMNS = {"harmbench": ("functional_category", "semantic_category", "tags"),
                "simplesafetytests": ("harm_area", "category")}
HOW = ("get them with `irtlib paper-data download` (into the per-user cache), or set "
       f"{DATA_ENV}=DIR to a directory holding them, or check out the repository beside ../shared/realdata/paper")


# ---------------------------------------------------------------------------- where the files are
def cache_directory() -> Path:
    """The per-user cache: ``$XDG_CACHE_HOME/irtlib/paper``, default ``~/.cache/irtlib/paper``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "irtlib" / SHARED_NAME


def search_path() -> list[tuple[str, Path]]:
    """``[(origin, directory), ...]`` in search order: ``"env"``, ``"shared"``, ``"cache"``.

    Raises
    ------
    InputError
        ``$IRTLIB_PAPER_DATA`` names something that is not a directory (a typo must not fall
        through silently to another copy).
    """
    out = []
    env = os.environ.get(DATA_ENV)
    if env:
        d = Path(env).expanduser()
        if not d.is_dir():
            raise InputError(f"{DATA_ENV}={env}: not a directory; point it at a directory holding the "
                             "authors' files, or unset it")
        out.append(("env", d))
    out.append(("shared", shared_directory(SHARED_NAME)))
    out.append(("cache", cache_directory()))
    return out


@dataclass(frozen=True)
class Located:
    """Where a file of the release was found.

    Attributes
    ----------
    file : PaperFile
    path : Path
    origin : str
        ``"env"``, ``"shared"``, ``"cache"`` or ``"given"`` (an explicit ``data_dir``).
    verified : bool
        True when the file has a pinned checksum (checked on every read); False for the files
        whose checksum is not known here.
    observed_sha256 : str or None
        For an unverified file: the hash its download recorded (``<file>.sha256``), if any.
    """

    file: PaperFile
    path: Path
    origin: str
    verified: bool
    observed_sha256: str | None = None


def _file(key: str) -> PaperFile:
    if key not in FILES:
        raise InputError(f"unknown file {key!r} of the authors' release; choose one of {list(FILES)}")
    return FILES[key]


def _observed(path: Path) -> str | None:
    return recorded_sha256(path)


def locate(key: str, *, data_dir: PathLike | None = None) -> Located | None:
    """The first copy of a file in :func:`search_path` (or only in ``data_dir`` when given); None if absent."""
    f = _file(key)
    dirs = [("given", Path(data_dir).expanduser())] if data_dir is not None else search_path()
    for origin, d in dirs:
        path = d / f.filename
        if path.is_file():
            return Located(f, path, origin, f.verifiable, None if f.verifiable else _observed(path))
    return None


def find(key: str, *, data_dir: PathLike | None = None) -> Located:
    """:func:`locate`, or a :class:`FileNotFoundError` saying where it looked and how to get the file."""
    found = locate(key, data_dir=data_dir)
    if found is None:
        f = FILES[key]
        where = [str(Path(data_dir))] if data_dir is not None else [str(d) for _, d in search_path()]
        how = HOW if f.remote else ("it is part of the shared copy only (../shared/realdata/paper), not of the "
                                    "authors' repository")
        extra = " --with-unverified " + key if not f.verifiable else ""
        raise FileNotFoundError(f"the authors' {f.filename} ({key}) is not in {', '.join(where)}; "
                                + how.replace("download`", f"download{extra}`"))
    return found


def read_verified(found: Located) -> bytes:
    """The file's bytes, after checking its SHA-256 against the pinned one, or the one its download recorded.

    A file with a pinned checksum is compared with it; a file without one (AIR-Bench, SafetyBench)
    is compared with the hash seen when it was downloaded (``<file>.sha256``), when that was recorded.
    Every read checks, whether the file was verified at download or not.

    Raises
    ------
    InputError
        The checksum differs (a truncated, corrupted or edited copy); the message names the file.
    """
    data = found.path.read_bytes()
    problem = _integrity(found.file, found.path, sha256(data))
    if problem is not None:
        raise InputError(f"{found.path}: {problem}: delete it and download it again")
    return data


def _integrity(f: PaperFile, path: Path, digest: str) -> str | None:
    """What is wrong with a copy whose bytes hash to ``digest`` (None: it matches what is known of it)."""
    if f.verifiable:
        if digest != f.sha256:
            return (f"sha256 {digest} does not match the pinned {f.sha256} of the authors' {Path(f.filename).name} "
                    "(truncated, corrupted or edited copy)")
        return None
    recorded = recorded_sha256(path)
    if recorded is not None and recorded != digest:
        return (f"sha256 {digest} differs from {recorded}, the hash recorded in {path.name}{OBSERVED_SUFFIX} when it "
                "was downloaded (edited or corrupted since)")
    return None


def check_copy(path: PathLike) -> None:
    """Refuse a copy of one of the release's files (in :func:`search_path`) that fails its checksum.

    What the command line runs on a response file before reading it, so that ``irtlib calibrate``
    on a cached path takes the same check as :func:`load_matrix`. Other paths are left alone.

    Raises
    ------
    InputError
        ``path`` is a copy of a release file in the cache, the shared copy or ``$IRTLIB_PAPER_DATA``,
        and its bytes are not the pinned ones (or not the ones recorded at download).
    """
    path = Path(path)
    if not path.is_file():
        return
    try:
        dirs = [d for _, d in search_path()]
    except InputError:
        return
    real = path.resolve()
    for f in FILES.values():
        if real.name != Path(f.filename).name:
            continue
        if any(real == (d / f.filename).resolve() for d in dirs):
            read_verified(Located(f, path, "given", f.verifiable))
            return


# ---------------------------------------------------------------------------- loaders
@functools.lru_cache(maxsize=16)
def _parsed(path: str, mtime_ns: int, size: int, key: str, verified: bool):
    found = Located(FILES[key], Path(path), "given", verified)
    data = read_verified(found)
    values, models, items, lines = parse_jsonl(data, source=path)
    check_binary(values, items, source=path, lines=lines)
    want = FILES[key].shape
    if values.shape != want:
        raise InputError(f"{path}: {values.shape[0]} models x {values.shape[1]} items, the authors' file has "
                         f"{want[0]} x {want[1]} (a different or truncated file?)")
    values.setflags(write=False)
    return values, tuple(models), tuple(items)


def _matrix_file(name: str, data_dir) -> tuple[Located, np.ndarray, tuple, tuple]:
    if name not in RESPONSE_FILES:
        raise InputError(f"no response matrix of {name!r} in the authors' release; "
                         f"choose one of {list(RESPONSE_FILES)}")
    found = find(name, data_dir=data_dir)
    st = found.path.stat()
    values, models, items = _parsed(str(found.path), st.st_mtime_ns, st.st_size, name, found.verified)
    return found, values, models, items


def load_stored(name: str, *, data_dir: PathLike | None = None) -> ResponseMatrix:
    """A response matrix exactly as the authors' file stores it (WMDP: 1 = correct answer).

    Parameters
    ----------
    name : str
        A benchmark id in :data:`RESPONSE_FILES`.
    data_dir : path-like, optional
        Read only from this directory instead of :func:`search_path`.

    Returns
    -------
    ResponseMatrix
        ``(n_models, n_items)`` in the file's order (models as the lines, items as the first line).
    """
    found, values, models, items = _matrix_file(name, data_dir)
    return ResponseMatrix(values, models, items, source=str(found.path))


def load_matrix(name: str, *, data_dir: PathLike | None = None, source: str | None = None) -> ResponseMatrix:
    """The paper's response matrix of a benchmark as SAFETY, 1 = safe (paper, section "Binarization").

    The three HELM sets store 1 = safe; WMDP's file stores 1 = correct, which the paper counts as
    unsafe, so its safety is ``1 - x``. The data are already binary: no binarization rule applies.

    Parameters
    ----------
    name : str
        A benchmark id in :data:`RESPONSE_FILES`.
    data_dir : path-like, optional
        Read only from this directory.
    source : str, optional
        The matrix's ``source`` (default: the benchmark id and the file).

    Returns
    -------
    ResponseMatrix
        ``(n_models, n_items)``, models in file order, items in the first line's order.
    """
    found, values, models, items = _matrix_file(name, data_dir)
    safe = 1.0 - values if found.file.stores == "correct" else values
    check = "" if found.verified else ", checksum not verified"
    label = source or f"{name} (the authors' {found.file.filename}{check})"
    return ResponseMatrix(safe, models, items, source=label)


def load_items(name: str, *, data_dir: PathLike | None = None) -> pd.DataFrame:
    """Item metadata of a benchmark of the release, without any prompt or behaviour text.

    HarmBench: ``item, functional_category, semantic_category, tags``; SimpleSafetyTests:
    ``item, harm_area, category`` (from the shared copy's category files; the SST id mapping
    there is assumed, not verified). Other benchmarks: ``item`` only. Rows in the matrix's item order.
    """
    _, _, _, items = _matrix_file(name, data_dir)
    order = pd.DataFrame({"item": list(items)})
    if name not in ITEM_COLUMNS:
        return order
    found = find(f"{name}-items", data_dir=data_dir)
    import io

    table = pd.read_csv(io.BytesIO(read_verified(found)), dtype=str, keep_default_na=False)
    keep = ["item", *ITEM_COLUMNS[name]]
    missing = [c for c in keep if c not in table.columns]
    if missing:
        raise InputError(f"{found.path}: missing column(s) {missing}")
    out = order.merge(table[keep], on="item", how="left", validate="one_to_one")
    if out[keep[1]].isna().any():
        raise InputError(f"{found.path}: no row for item {out['item'][out[keep[1]].isna()].iloc[0]!r}")
    return out


def load_fits(*, data_dir: PathLike | None = None) -> pd.DataFrame:
    """The authors' per-split 2PL fits and static-method ranks for SimpleSafetyTests.

    Returns
    -------
    DataFrame, 7,900 rows
        One row per (split, item): ``item_id, a, b, total_fisher, marginal_fisher_contribution``,
        the rank of each static method (``*_rank``), ``anchor_B_<k>`` and ``fold`` (the split, 0..99).
        The 79 items of each split are the items the variance filter keeps.
    """
    import io

    found = find("simplesafetytests-fits", data_dir=data_dir)
    df = pd.read_csv(io.BytesIO(read_verified(found)), dtype={"item_id": str})
    missing = [c for c in ("item_id", "a", "b", "fold") if c not in df.columns]
    if missing:
        raise InputError(f"{found.path}: missing column(s) {missing}")
    return df


# ---------------------------------------------------------------------------- download
def file_url(key: str, *, base_url: str | None = None, commit: str = COMMIT) -> str:
    """Raw URL of a file at ``commit`` (``base_url`` replaces ``https://raw.githubusercontent.com/<repo>/<commit>``)."""
    f = _file(key)
    if f.remote is None:
        raise InputError(f"{f.filename} is not in the authors' repository (it comes with the shared copy only)")
    if base_url is not None:
        return f"{base_url.rstrip('/')}/{f.remote}"
    return RAW_URL.format(repo=REPOSITORY, commit=commit, path=f.remote)


@dataclass(frozen=True)
class DownloadResult:
    """What :func:`download` did with one file.

    ``status`` is ``"downloaded"``, ``"present"`` (in the destination already) or ``"found"``
    (elsewhere in the search path, with ``missing_only``).
    """

    key: str
    path: Path
    status: str
    sha256: str
    verified: bool

    def line(self) -> str:
        """One line for the user."""
        check = "sha256 verified" if self.verified else \
            f"sha256 {self.sha256} observed, NOT verified (no checksum of this file is known here; recorded in " \
            f"{self.path.name}{OBSERVED_SUFFIX})"
        return f"{self.status} {self.key}: {self.path} ({check})"


def _check_download(f: PaperFile, data: bytes, url: str) -> str:
    digest = sha256(data)
    if f.verifiable:
        if digest != f.sha256:
            raise InputError(f"{url}: sha256 {digest} does not match the pinned {f.sha256}; nothing was written")
        return digest
    values, _, _, lines = parse_jsonl(data, source=url)      # no checksum: at least the format and shape
    check_binary(values, [str(i) for i in range(values.shape[1])], source=url, lines=lines)
    if values.shape != f.shape:
        raise InputError(f"{url}: {values.shape[0]} models x {values.shape[1]} items, expected {f.shape[0]} x "
                         f"{f.shape[1]}; nothing was written")
    return digest


def download(names: Sequence[str] | None = None, *, dest: PathLike | None = None, with_unverified: bool = False,
             base_url: str | None = None, fetch: Callable[[str], bytes] | None = None,
             progress: Callable[[str], None] | None = None, missing_only: bool = False,
             announce: Callable[[str], None] | None = None) -> list[DownloadResult]:
    """Fetch the authors' files at the pinned commit, verify them and write them atomically.

    Parameters
    ----------
    names : sequence of str, optional
        Keys of :data:`FILES` (default: the four response matrices and the fits, every file
        with a pinned checksum; with ``with_unverified`` also AIR-Bench 2024 and SafetyBench).
    dest : path-like, optional
        Target directory (default :func:`cache_directory`; created).
    with_unverified : bool
        Allow the files whose checksum is not known here (:data:`UNVERIFIED`): their format and
        shape are checked, the SHA-256 seen is recorded in ``<file>.sha256`` marked "observed,
        not verified".
    base_url : str, optional
        Replaces ``https://raw.githubusercontent.com/<repository>/<commit>`` (a mirror; the tests'
        loopback server).
    fetch : callable, optional
        ``fetch(url) -> bytes`` (default :func:`irtlib.io.download.fetch_url`).
    progress : callable, optional
        Called with one line per file.
    missing_only : bool
        Skip files already found in :func:`search_path` (status ``"found"``; what ``make
        paper-data`` does).
    announce : callable, optional
        Called with one line when a fetch has had no answer for :data:`WAIT_NOTE` seconds (which URL,
        how long a stalled server is waited for).

    Returns
    -------
    list of DownloadResult
        One per file, ``"present"`` when a verified copy was already in ``dest``.

    Raises
    ------
    InputError
        An unknown name, an unverified file without ``with_unverified``, a download whose checksum
        (or, unverified, whose format or shape) is wrong, or a file already in ``dest`` that fails
        its checksum. A failed file leaves nothing behind (files already done stay).
    OSError
        The network or the file system failed (the message names the URL or the path).
    """
    fetch = functools.partial(fetch_url, timeout=FETCH_TIMEOUT) if fetch is None else fetch
    if names is None or len(names) == 0:
        keys = list(DEFAULT_DOWNLOAD) + (list(UNVERIFIED) if with_unverified else [])
    else:
        keys = list(dict.fromkeys(names))
        unknown = [k for k in keys if k not in FILES]
        if unknown:
            raise UsageError(f"unknown file {unknown[0]!r} of the authors' release; choose among "
                             f"{', '.join(k for k, f in FILES.items() if f.remote)}")
        for k in keys:
            f = _file(k)
            if f.remote is None:
                raise InputError(f"{k}: {f.filename} is not in the authors' repository; it comes with the shared "
                                 "copy (../shared/realdata/paper) only")
            if not f.verifiable and not with_unverified:
                raise UsageError(f"{k}: no checksum of {f.filename} is known here; add --with-unverified "
                                 "to download it and record the hash it has")
    if base_url is not None:
        _check_base_url(base_url)
    dest = cache_directory() if dest is None else Path(dest).expanduser()
    if dest.exists() and not dest.is_dir():
        raise InputError(f"--dest {dest}: is a file, not a directory; give the directory to download into")
    dest.mkdir(parents=True, exist_ok=True)
    results = []
    for k in keys:
        f = FILES[k]
        path = dest / f.filename
        elsewhere = locate(k) if missing_only else None
        if elsewhere is not None:
            data = read_verified(elsewhere)
            result = DownloadResult(k, elsewhere.path, "found", sha256(data), elsewhere.verified)
        elif path.exists():
            data = read_verified(Located(f, path, "given", f.verifiable))
            result = DownloadResult(k, path, "present", sha256(data), f.verifiable)
        else:
            url = file_url(k, base_url=base_url)
            waiting = _waiting_note(announce, f"still waiting for {url} (the server has not answered for "
                                              f"{WAIT_NOTE} s; giving up after {FETCH_TIMEOUT} s without data)")
            try:
                data = fetch(url)
            except OSError as exc:
                reason = getattr(exc, "reason", None) or exc.strerror or exc
                raise OSError(f"cannot download {url}: {reason} (offline? files already downloaded are kept)") from None
            finally:
                waiting.cancel()
            digest = _check_download(f, data, url)
            path.parent.mkdir(parents=True, exist_ok=True)
            _io.atomic_write(path, data)
            if not f.verifiable:
                note = (f"{digest}  {f.filename}\n# observed when downloaded from {url}; NOT verified: no checksum "
                        "of this file is known to irtlib\n")
                _io.atomic_write(path.with_name(path.name + OBSERVED_SUFFIX), note, force=True)
            result = DownloadResult(k, path, "downloaded", digest, f.verifiable)
        results.append(result)
        if progress is not None:
            progress(result.line())
    return results


def _waiting_note(announce: Callable[[str], None] | None, line: str):
    """A started timer calling ``announce(line)`` after :data:`WAIT_NOTE` seconds (cancel it when the fetch ends)."""
    import threading

    timer = threading.Timer(WAIT_NOTE, announce if announce is not None else (lambda _line: None), [line])
    timer.daemon = True
    timer.start()
    return timer


def _check_base_url(base_url: str) -> None:
    """Refuse a ``--base-url`` urllib cannot fetch from (no scheme or host), before any download."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
        raise InputError(f"--base-url {base_url!r}: not a URL irtlib can download from; give http://HOST/..., "
                         "https://HOST/... or file:///DIR (a mirror of the repository at the pinned commit)")


def status_lines() -> list[str]:
    """One line per file: where it was found and whether its bytes check out, or that it is missing.

    Every copy found is hashed: one whose bytes differ from the pinned checksum (or from the hash
    recorded at its download) is listed as CORRUPTED, never as pinned.
    """
    out = []
    for k, f in FILES.items():
        found = locate(k)
        if found is None:
            out.append(f"missing  {k}: {f.filename}")
            continue
        try:
            digest = sha256(found.path.read_bytes())
        except OSError as exc:
            out.append(f"{found.origin:<8} {k}: {found.path} (UNREADABLE: {exc.strerror or exc})")
            continue
        problem = _integrity(f, found.path, digest)
        if problem is not None:
            check = f"CORRUPTED: {problem}; delete it and download it again"
        elif found.verified:
            check = "pinned sha256, verified"
        elif found.observed_sha256 is not None:
            check = "checksum not verified; unchanged since download"
        else:
            check = "checksum not verified"
        out.append(f"{found.origin:<8} {k}: {found.path} ({check})")
    return out
