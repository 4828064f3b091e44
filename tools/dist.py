#!/usr/bin/env python3
"""The code the book carries: irtlib's wheel and the repository's source archive.

``tools/make_build_tree.py`` calls :func:`build_dist` to write, into ``<tree>/_dist/``:

* ``irtlib-<version>-py3-none-any.whl``: the library and its command line, built from a copy of
  ``pyproject.toml``, ``README.md`` and ``irtlib/`` (so that the working tree gets no ``build/``
  or ``*.egg-info``) by the build backend its ``pyproject.toml`` names (setuptools), called
  through its PEP 517 ``build_wheel`` hook in a fresh interpreter, as ``pip wheel
  --no-build-isolation`` calls it, without pip's own start (about 1.4 s a wheel);
* ``irtbook-<version>-py3-none-any.whl``: the book's own helpers, which the chapter notebooks
  import, built the same way from ``bookkit/``; ``pip install`` of both wheels (irtbook requires
  ``irtlib[book]``) gives a downloaded chapter everything it needs;
* ``safety-irt-<version>-src.tar.gz``: every file git tracks, as it is in the working tree
  (what the book was built from), under one top directory ``safety-irt-<version>-src/``;
  outside a git checkout, every file under the root except build products (``_build``,
  ``.venv``, ``.git``, caches). Sorted, with fixed owners and times, so that the same files
  give the same archive.

The two wheels are built at once (two processes), then the archive.

Each file lands in the HTML as ``_build/html/_downloads/<hash>/<name>`` through Sphinx's
``{download}`` role, which the Reproduce boxes and the introduction use.

Usage::

    python tools/dist.py OUT_DIR [--root .]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DIST_DIR = "_dist"
SOURCE_NAME = "safety-irt"
#: Per wheel: the directory its pyproject.toml is in and the files and folders copied from there.
WHEEL_INPUTS = {"irtlib": (".", ("pyproject.toml", "README.md", "irtlib")),
                "irtbook": ("bookkit", ("pyproject.toml", "irtbook"))}
EXCLUDED = {"_build", ".venv", ".git", "artifacts", "__pycache__", ".pytest_cache", "build", ".ipynb_checkpoints"}
FIXED_MTIME = 1_700_000_000  # 2023-11-14: archive members get one time (a reproducible archive)


def version(wheel: Path) -> str:
    """The version in a wheel's file name (``irtlib-<version>-py3-none-any.whl``)."""
    parts = wheel.name.split("-")
    if len(parts) < 5 or not wheel.name.endswith(".whl"):
        raise ValueError(f"{wheel.name} is not a wheel file name")
    return parts[1]


#: A PEP 517 front end in one line: import the backend ``argv[1]`` (``module`` or ``module:object``) and
#: print the file name its ``build_wheel`` hook returns for the directory ``argv[2]``.
_BUILD_WHEEL_HOOK = ("import functools, importlib, sys; module, _, attr = sys.argv[1].partition(':'); "
                     "backend = functools.reduce(getattr, filter(None, attr.split('.')), "
                     "importlib.import_module(module)); "
                     "print(backend.build_wheel(sys.argv[2]))")


def build_backend(pyproject: Path) -> str:
    """The build backend a ``pyproject.toml`` names (``[build-system] build-backend``)."""
    try:
        backend = tomllib.loads(pyproject.read_text(encoding="utf-8"))["build-system"]["build-backend"]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{pyproject}: no [build-system] build-backend to build the wheel with ({exc})") from exc
    if not isinstance(backend, str) or not backend:
        raise ValueError(f"{pyproject}: [build-system] build-backend is {backend!r}, not a module name")
    return backend


def build_wheel(root: Path, out: Path, *, python: str = sys.executable, package: str = "irtlib") -> Path:
    """Build the wheel of ``package`` (irtlib or irtbook) into ``out`` (its backend's hook, no isolation)."""
    out.mkdir(parents=True, exist_ok=True)
    where, inputs = WHEEL_INPUTS[package]
    with tempfile.TemporaryDirectory(prefix=f"{package}-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in inputs:
            path = root / where / name
            if path.is_dir():
                shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(path, src / name)
        built = Path(tmp) / "wheel"
        built.mkdir()
        run = subprocess.run([python, "-c", _BUILD_WHEEL_HOOK, build_backend(src / "pyproject.toml"), str(built)],
                             cwd=src, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"building the {package} wheel failed:\n{run.stdout[-2000:]}{run.stderr[-3000:]}")
        wheels = sorted(built.glob(f"{package}-*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"the build made {[w.name for w in wheels]}, not one {package} wheel")
        target = out / wheels[0].name
        shutil.copy2(wheels[0], target)
    return target


def source_files(root: Path) -> list[Path]:
    """The files of the source archive, relative to ``root``, sorted."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True).stdout
        files = [Path(p) for p in listed.decode().split("\0") if p]
        files = [p for p in files if (root / p).is_file()]  # a tracked file deleted in the working tree
    except (OSError, subprocess.CalledProcessError):
        files = [p.relative_to(root) for p in root.rglob("*")
                 if p.is_file() and not EXCLUDED & set(p.relative_to(root).parts) and p.suffix != ".pyc"]
    return sorted(files, key=lambda p: p.as_posix())


def build_source(root: Path, out: Path, *, name: str) -> Path:
    """Write ``out/<name>.tar.gz`` holding :func:`source_files` under ``<name>/``."""
    out.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in source_files(root):
            path = root / rel
            info = tarfile.TarInfo(f"{name}/{rel.as_posix()}")
            data = path.read_bytes()
            info.size, info.mtime = len(data), FIXED_MTIME
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    target = out / f"{name}.tar.gz"
    target.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))
    return target


#: The record of a directory :func:`build_dist` wrote: its files by kind and the fingerprint of their inputs.
MANIFEST = "dist.json"


def input_files(root: Path) -> list[Path]:
    """Every file the wheels and the archive are made of, relative to ``root``, sorted.

    The archive's (:func:`source_files`) and the wheels' inputs as :func:`build_wheel` copies them
    (untracked files under ``irtlib/`` included).
    """
    files = set(source_files(root))
    for where, names in WHEEL_INPUTS.values():
        for name in names:
            path = root / where / name
            found = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            files |= {p.relative_to(root) for p in found
                      if "__pycache__" not in p.relative_to(root).parts and p.suffix != ".pyc"}
    return sorted(files, key=lambda p: p.as_posix())


def fingerprint(root: Path, *, python: str = sys.executable) -> str:
    """SHA-256 of the inputs' paths, sizes and modification times, the build's interpreter and setuptools."""
    import hashlib
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        backend = installed("setuptools")
    except PackageNotFoundError:
        backend = "none"
    digest = hashlib.sha256(f"{python}\n{backend}\n".encode())
    for rel in input_files(root):
        stat = (root / rel).stat()
        digest.update(f"{rel.as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def built_in(directory: Path) -> dict[str, str]:
    """The names of the files :func:`build_dist` wrote into ``directory`` (its manifest), by kind."""
    manifest = Path(directory) / MANIFEST
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise FileNotFoundError(f"{manifest}: no record of built wheels ({exc}); build them with "
                                "`python tools/dist.py DIR` or `make dist`") from exc
    missing = [name for name in files.values() if not (Path(directory) / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: {', '.join(missing)} missing; build them again (`make dist`)")
    return files


def build_dist(root: Path, out: Path, *, reuse: bool = False) -> dict[str, str]:
    """The two wheels and the source archive in ``out``: ``{"wheel", "book_wheel", "source"}`` names.

    ``reuse``: keep what an earlier call wrote into ``out`` when its inputs (:func:`fingerprint`) are
    unchanged. The files an earlier call listed in ``out``'s manifest and this one did not write (another
    version's) are removed; nothing else in ``out`` is touched.
    """
    root = root.resolve()
    key = fingerprint(root)
    try:
        earlier = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        earlier = {}
    if reuse and earlier.get("fingerprint") == key:
        try:
            return built_in(out)
        except FileNotFoundError:          # a listed file was removed since: build them again
            pass
    with ThreadPoolExecutor(2) as pool:                 # each thread waits for its build's process
        wheel, book_wheel = pool.map(lambda package: build_wheel(root, out, package=package), ("irtlib", "irtbook"))
    source = build_source(root, out, name=f"{SOURCE_NAME}-{version(wheel)}-src")
    files = {"wheel": wheel.name, "book_wheel": book_wheel.name, "source": source.name}
    listed = earlier.get("files") if isinstance(earlier.get("files"), dict) else {}
    for stale in set(map(str, listed.values())) - set(files.values()):
        if Path(stale).name == stale and (out / stale).is_file():
            (out / stale).unlink()
    (out / MANIFEST).write_text(json.dumps({"fingerprint": key, "files": files}, indent=1) + "\n", encoding="utf-8")
    return files


def main(argv: list[str] | None = None) -> int:
    """The command line: build the wheels and the archive into OUT_DIR."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--reuse", action="store_true",
                        help="keep what OUT_DIR holds when the inputs have not changed since it was built")
    args = parser.parse_args(argv)
    built = build_dist(args.root, args.out, reuse=args.reuse)
    print(f"dist: {args.out / built['wheel']}, {args.out / built['book_wheel']}, {args.out / built['source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
