"""The batched py-irt fit's C kernels: compiled at first use, loaded with ctypes.

:mod:`irtlib.calibration.pyirt_batch` spends most of its time on the 2PL log-likelihood of every
training cell and its gradient. In torch that takes about ten passes over the cells per epoch; the C
function ``loglik_2pl`` in ``_batch_kernels.c`` (beside this module) does it in one pass, with one
exponential and one division per cell (see the comment at its top for the formulas). Two more,
``guide_sample`` and ``prior_terms``, make the guide's sample and the priors' and guides' terms in
one pass over the parameter columns each, where torch took a dozen.

The source is compiled once per machine with the system C compiler (``$CC``, default ``cc``) into
``$XDG_CACHE_HOME/irtlib/kernels`` (default ``~/.cache/irtlib/kernels``; ``$IRTLIB_KERNEL_DIR``
overrides), under a name made of the checksum of the source and of the compiler flags, written to a
temporary file and renamed, so concurrent processes are safe and a changed source recompiles.
``-mavx2`` is added where the processor has AVX2; the kernels use no fused multiply-add and no
reassociation, so the numbers do not depend on it (a test compiles both). Where an x86 processor has
AVX-512 (F, DQ, VL, BW), ``loglik_2pl`` runs its cells sixteen at a time in one register (a clone of
its pass compiled for AVX-512, chosen when the library is first called; ``loglik_2pl_mode(0)`` turns
it off; elsewhere only the eight-lane pass is built): each lane's operations and the order of every
sum and product are those of the eight-lane pass, so the bits are the same (a test compares the two).

Without a working compiler (or with ``IRTLIB_FUSED_KERNEL=0``), :func:`load` returns None and the
fit uses its torch likelihood, with a warning: the same formulas, rounded differently (float32
sums in another order), about three times slower.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

__all__ = ["SOURCE", "load", "compile_kernel", "bind_library", "kernel_fingerprint", "compiled"]

SOURCE = Path(__file__).with_name("_batch_kernels.c")
#: Flags every build uses: optimised, position independent, GNU C (vector extensions), and no
#: contraction of a * b + c into a fused multiply-add (which would round differently with and
#: without FMA hardware).
BASE_FLAGS = ("-O2", "-std=gnu11", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno")

_LOADED: dict = {}          # "lib": the loaded library or None once load() has decided


def cpu_flags() -> frozenset:
    """The processor's feature flags (``avx2``, ``fma``, ...) from /proc/cpuinfo; empty off x86-64."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        return frozenset()
    return frozenset()


def _has_avx2() -> bool:
    """Whether this x86-64 processor has AVX2."""
    return "avx2" in cpu_flags()


def kernel_fingerprint() -> str:
    """Hex SHA-256 of the kernel's source (part of the split cache's key)."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def _kernel_directory() -> Path:
    if os.environ.get("IRTLIB_KERNEL_DIR"):
        return Path(os.environ["IRTLIB_KERNEL_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "irtlib" / "kernels"


def compile_kernel(*, avx2: bool | None = None, directory: Path | None = None, source: Path = SOURCE,
                   extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` (``_batch_kernels.c``) into a shared library (unless there) and return its path.

    Parameters
    ----------
    avx2 : bool or None
        Add ``-mavx2``; None: where the processor has it.
    directory : Path or None
        Where the library goes; None: the per-user kernel directory.
    source : Path
        The C file (:data:`SOURCE`, or :mod:`irtlib.calibration.stream_kernel`'s).
    extra_flags : tuple of str
        More compiler flags (e.g. ``-mavx512f`` for a kernel that checks its numbers after loading);
        part of the library's name.

    Raises
    ------
    OSError
        No compiler, or the compiler failed (its message), or the directory cannot be written.
    """
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        raise OSError(f"no C compiler {compiler!r} on PATH")
    flags = [*BASE_FLAGS, *(["-mavx2"] if (_has_avx2() if avx2 is None else avx2) else []), *extra_flags]
    source = Path(source)
    digest = hashlib.sha256(_source_bytes(source) + repr((compiler, flags)).encode()).hexdigest()[:20]
    directory = _kernel_directory() if directory is None else Path(directory)
    stem = source.stem.lstrip("_")
    target = directory / f"{stem}-{digest}.so"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", suffix=".so", dir=directory)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *flags, "-o", tmp, str(source), "-lm"], capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(f"{compiler} failed on {source.name}: {done.stderr.strip()[:500]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _source_bytes(source: Path, *, seen: frozenset = frozenset()) -> bytes:
    """The C file's bytes, then those of every local file it includes, and of the files those include.

    Local means ``#include "name"``, beside the including file; each path is read once per chain.
    Part of the compiled library's name, so that a changed header builds a new library.
    """
    text = source.read_bytes()
    seen = seen | {source.resolve()}
    included = [source.parent / h.decode() for h in re.findall(rb'^\s*#\s*include\s+"([^"]+)"', text,
                                                                flags=re.MULTILINE)]
    return text + b"".join(_source_bytes(f, seen=seen) for f in included if f.resolve() not in seen)


def compiled(source: Path, bind: Callable[[Path], ctypes.CDLL], *, switch: str,
             extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """``bind(compile_kernel(source=source))``, or None where it cannot be built or ``$switch`` is ``"0"``.

    For the kernels that check their own numbers after loading (:mod:`irtlib.calibration.stream_kernel`,
    :mod:`irtlib.selection.score_kernel`) and fall back silently.
    """
    built = _built(source, bind, switch=switch, extra_flags=extra_flags)
    return None if built is None else built[1]


def _built(source: Path, bind: Callable[[Path], ctypes.CDLL], *, switch: str,
           extra_flags: tuple[str, ...]) -> tuple[Path, ctypes.CDLL] | None:
    """The compiled library's path and ``bind(path)``, or None (``$switch`` is ``"0"``, or it cannot be built)."""
    if os.environ.get(switch, "1") == "0":
        return None
    try:
        path = compile_kernel(source=source, extra_flags=extra_flags)
        return path, bind(path)
    except OSError:
        return None


def verified(source: Path, bind: Callable[[Path], ctypes.CDLL], *, switch: str,
             matches: Callable[[ctypes.CDLL], bool], cache: dict,
             extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """:func:`compiled`'s library if ``matches(library)`` (its numbers equal numpy's), else None.

    Decided once per process: the answer is kept in ``cache["lib"]`` (the calling module's own dict).
    For :mod:`irtlib.selection.score_kernel` and :mod:`irtlib.bank.interval_kernel`. ``extra_flags``: see
    :func:`compile_kernel`.

    The check's answer is also kept on disk, beside the library, under a key made of the library's bytes,
    the check's module and name, irtlib's sources, numpy's version and the processor features numpy
    dispatches on, and Python's version (:func:`_check_key`): a later process with all of these equal
    reads the answer instead of running the check again (each chapter of the book is its own process and
    loads about ten kernels). ``IRTLIB_KERNEL_RECHECK=1`` runs every check again.
    """
    if "lib" not in cache:
        cache["lib"] = _checked_library(source, bind, switch=switch, matches=matches, extra_flags=extra_flags)
    return cache["lib"]


def _checked_library(source: Path, bind: Callable[[Path], ctypes.CDLL], *, switch: str,
                     matches: Callable[[ctypes.CDLL], bool], extra_flags: tuple[str, ...]) -> ctypes.CDLL | None:
    """:func:`verified`'s answer, from the answer kept beside the library or from ``matches``."""
    built = _built(source, bind, switch=switch, extra_flags=extra_flags)
    if built is None:
        return None
    path, lib = built
    key = _check_key(path, matches)
    answer = path.with_name(f"{path.name}.check-{key}") if key is not None else None
    if answer is not None and os.environ.get("IRTLIB_KERNEL_RECHECK", "0") != "1":
        try:
            kept = answer.read_text()
        except OSError:
            kept = None
        if kept in ("equal", "differs"):
            return lib if kept == "equal" else None
    ok = bool(matches(lib))
    if answer is not None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{answer.name}-", dir=answer.parent)
            with os.fdopen(fd, "w") as f:
                f.write("equal" if ok else "differs")
            os.replace(tmp, answer)
        except OSError:
            pass                                  # a read-only kernel directory: the check runs every time
    return lib if ok else None


_IRTLIB_SOURCES: dict[str, str] = {}


def _irtlib_sources_digest() -> str:
    """SHA-256 of every ``.py`` and ``.c`` file of the installed irtlib, by relative path (once per process)."""
    if "digest" not in _IRTLIB_SOURCES:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for f in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".c", ".h") and p.is_file()):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
        _IRTLIB_SOURCES["digest"] = h.hexdigest()
    return _IRTLIB_SOURCES["digest"]


def _check_key(path: Path, matches: Callable) -> str | None:
    """The key under which a load check's answer is kept (None: not kept, the check runs every time).

    Everything the answer could depend on: the library's bytes, the check (its module and name, and
    irtlib's sources, which hold it and the numpy forms it compares with), numpy's version and the
    processor features its loops dispatch on (numpy's own rounding), and Python's version.
    """
    import numpy as np

    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:                           # pragma: no cover - numpy < 2 or another layout
        return None
    h = hashlib.sha256()
    for part in (path.read_bytes(), f"{matches.__module__}.{matches.__qualname__}".encode(),
                 _irtlib_sources_digest().encode(), np.__version__.encode(),
                 repr(sorted(k for k, on in features.items() if on)).encode(), sys.version.encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:24]


def bind_library(path: Path) -> ctypes.CDLL:
    """The library at ``path`` with ``loglik_2pl``'s argument types declared."""
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.loglik_2pl.argtypes = [i64, i64, i64, i64, ptr, ptr, ptr, i64, ptr, i64, ptr, i64, ptr, ptr, ptr, ptr, ptr]
    lib.guide_sample.argtypes = [i64, i64, i64, ptr, ptr, i64, ptr, ptr, ptr, ptr]
    lib.prior_terms.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, i64, *[ptr] * 9]
    for name in ("loglik_2pl", "guide_sample", "prior_terms"):
        getattr(lib, name).restype = None
    lib.loglik_2pl_mode.argtypes = [ctypes.c_int]
    lib.loglik_2pl_mode.restype = ctypes.c_int
    return lib


def load() -> ctypes.CDLL | None:
    """The compiled kernel (a ctypes library with ``loglik_2pl``), or None where it cannot be built.

    Decided once per process; ``IRTLIB_FUSED_KERNEL=0`` turns the kernel off. Where it cannot be built
    the first call warns (the fit then uses its torch likelihood).
    """
    if "lib" not in _LOADED:
        lib = None
        if os.environ.get("IRTLIB_FUSED_KERNEL", "1") != "0":
            try:
                lib = bind_library(compile_kernel())
            except OSError as exc:
                warnings.warn(f"the batched py-irt fit's fused likelihood kernel is not available ({exc}); "
                              "using the torch likelihood, about three times slower", RuntimeWarning, stacklevel=2)
        _LOADED["lib"] = lib
    return _LOADED["lib"]
