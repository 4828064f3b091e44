"""Writing outputs safely: atomically, with the user's umask, never over what irtlib did not write.

Outputs are written with :func:`atomic_write` (files) and :func:`atomic_directory` (directories):
to a temporary file or directory beside the target, then renamed over it, so an interrupted or
failed write leaves nothing half-written; they get the usual permissions (the umask's). An
existing output is never replaced unless ``force=True``, and then only when irtlib wrote it
(:func:`check_writable`, which also checks the destination before any work is done).
:func:`write_if_changed` is the data loaders' policy on top: skip a file that already holds the
same bytes, refuse one that differs unless ``force=True``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

from irtlib._typing import PathLike
from irtlib.core.responses import shown
from irtlib.errors import InputError

__all__ = ["DIRECTORY_MARKER", "check_writable", "atomic_write", "atomic_directory", "write_if_changed"]

#: The marker file :func:`atomic_directory` leaves in a directory it wrote (e.g. ``irtlib report``):
#: ``force=True`` replaces an existing directory only when it holds this file.
DIRECTORY_MARKER = ".irtlib-output"


def _umask() -> int:
    """The process's umask, read without changing it where the system allows."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)          # elsewhere: read it by setting it (and put it back at once)
    os.umask(mask)
    return mask


def _written_by_irtlib(path: Path, magic) -> bool:
    if magic is None:
        return True
    if isinstance(magic, str) and not isinstance(magic, bytes):
        magic = magic.encode("utf-8")
    try:
        with open(path, "rb") as fh:
            return fh.read(len(magic)) == magic
    except OSError:
        return False


def _foreign_entries(path: Path) -> list[str]:
    """Entries of an output directory that its marker does not list (added by someone else)."""
    import json

    try:
        listed = json.loads((path / DIRECTORY_MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if not isinstance(listed, list):
        return [DIRECTORY_MARKER]             # unreadable marker: do not trust the directory
    return sorted(set(os.listdir(path)) - set(map(str, listed)) - {DIRECTORY_MARKER})


def check_writable(path: PathLike, *, force: bool = False, magic: bytes | str | None = None,
                   directory: bool = False) -> Path:
    """Check, before any work is done, that an output can be written at ``path``.

    Parameters
    ----------
    path : path-like
        The output file (or directory, with ``directory=True``).
    force : bool
        Allow replacing an existing output, but only one that irtlib wrote (see ``magic``).
    magic : bytes or str, optional
        How irtlib's own output of this kind begins (e.g. ``b"# irtlib-bank "``). With
        ``force``, an existing file that does not begin so is not replaced. Ignored for
        directories, which must hold :data:`DIRECTORY_MARKER`.
    directory : bool
        ``path`` is a directory to create.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        ``path`` is empty.
    FileExistsError
        ``path`` exists and ``force`` is false, or it exists and was not written by irtlib.
    IsADirectoryError
        A file output names an existing directory.
    FileNotFoundError, NotADirectoryError, PermissionError
        Its directory does not exist, is not a directory, or cannot be written to.
    """
    if os.fspath(path) == "":
        raise InputError("the output path is empty")
    path = Path(path)
    if os.path.lexists(path):
        if not directory and path.is_dir():
            raise IsADirectoryError(f"{path}: is a directory; give the name of a file to write")
        if not force:
            raise FileExistsError(f"{path}: already exists; pass --force to overwrite")
        if directory:
            if not path.is_dir() or path.is_symlink() or not (path / DIRECTORY_MARKER).is_file():
                what = "a directory" if path.is_dir() else "a file"
                raise FileExistsError(f"{path}: already exists and is {what} irtlib did not write (no "
                                      f"{DIRECTORY_MARKER} marker); --force replaces only irtlib's own output: "
                                      "remove it yourself or choose another name")
            extra = _foreign_entries(path)
            if extra:
                raise FileExistsError(f"{path}: holds {shown(extra[0])}, which irtlib did not write; --force replaces "
                                      "only irtlib's own output: move it out of the directory first")
        elif path.is_symlink() or not path.is_file() or not _written_by_irtlib(path, magic):
            raise FileExistsError(f"{path}: already exists and was not written by irtlib; --force replaces "
                                  "only irtlib's own output: remove it yourself or choose another name")
    parent = path.parent
    if not parent.exists():
        raise FileNotFoundError(f"{path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise NotADirectoryError(f"{path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"{path}: cannot write in directory {parent} (permission denied)")
    return path


def _temporary(path: Path, *, directory: bool):
    """A temporary file (fd, name) or directory next to ``path``; errors name ``path``, not the temporary."""
    try:
        if directory:
            return tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write in directory {path.parent} ({exc.strerror})", str(path)) from None


def atomic_write(path: PathLike, data: str | bytes, *, force: bool = False, fsync: bool = False,
                 magic: bytes | str | None = None) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    The file gets the usual permissions (``0666`` less the umask), as ``open`` would give it.
    On any failure or interruption (including SIGTERM, which the command line turns into an
    exception) the temporary file is removed and ``path`` is left as it was.

    Parameters
    ----------
    path : path-like
    data : str or bytes
        Text is written as UTF-8.
    force : bool
        Replace an existing file (only one written by irtlib when ``magic`` is given);
        otherwise :class:`FileExistsError`.
    fsync : bool
        Flush the file to disk before the rename (for state files written after every step).
    magic : bytes or str, optional
        How irtlib's own output of this kind begins (see :func:`check_writable`).

    Returns
    -------
    Path
    """
    path = check_writable(path, force=force, magic=magic)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = _temporary(path, directory=False)
    try:
        os.fchmod(fd, 0o666 & ~_umask())     # mkstemp makes 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                if fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
        except OSError as exc:               # a full disk, a quota: name the file, not the temporary
            raise type(exc)(exc.errno, f"{exc.strerror or exc} while writing it ({len(payload)} bytes); the "
                            "file itself is unchanged", str(path)) from None
        if not force and os.path.lexists(path):  # appeared meanwhile
            raise FileExistsError(f"{path}: already exists; pass --force to overwrite")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


@contextlib.contextmanager
def atomic_directory(path: PathLike, *, force: bool = False, note: str = "") -> Iterator[Path]:
    """Build a directory in a temporary sibling and rename it into place when the block succeeds.

    Yields the temporary directory's path; write the outputs into it. When the block ends
    normally the marker file :data:`DIRECTORY_MARKER` (recording ``note`` and the files) is
    added, and the directory is renamed to ``path``: an existing ``path`` is replaced only with
    ``force``, and only when it holds the marker (a previous output of irtlib) and nothing the
    marker does not list. When the block raises or is interrupted (Ctrl-C, or SIGTERM, which
    the command line turns into an exception) the temporary directory is removed and ``path``
    is left as it was. The directory gets the usual permissions (``0777`` less the umask).

    Parameters
    ----------
    path : path-like
    force : bool
        Replace a previous irtlib output at ``path``.
    note : str
        Recorded in the marker (e.g. which command wrote the directory), with the list of files.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``force`` is false, or it is not irtlib's output.
    OSError
        The directory cannot be written or renamed; the message names the path at fault.
    """
    path = check_writable(path, force=force, directory=True)
    tmp = Path(_temporary(path, directory=True))
    old = None
    try:
        os.chmod(tmp, 0o777 & ~_umask())           # mkdtemp makes 0700
        yield tmp
        import json

        files = sorted(os.listdir(tmp))
        marker = {"written_by": "irtlib", "note": note, "files": files}
        (tmp / DIRECTORY_MARKER).write_text(json.dumps(marker, indent=1) + "\n",
                                  encoding="utf-8")
        if os.path.lexists(path):
            check_writable(path, force=force, directory=True)          # still irtlib's?
            old = Path(_temporary(path, directory=True))                 # an empty directory, unique
            try:
                os.replace(path, old)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot move the previous output aside ({exc.strerror})",
                              str(path)) from None
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)                                  # put the previous output back
                old = None
                raise
        else:
            try:
                os.rename(tmp, path)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot create it ({exc.strerror})", str(path)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not os.path.lexists(path):
            with contextlib.suppress(OSError):
                os.replace(old, path)
                old = None
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
            if os.path.lexists(old):
                warnings.warn(f"{path}: could not remove the previous output moved to {old}", stacklevel=3)


def write_if_changed(path: PathLike, data: bytes, *, force: bool = False) -> bool:
    """Write ``data`` to ``path`` atomically unless the file already holds exactly ``data``.

    Parameters
    ----------
    path : path-like
        Parent directories are created.
    data : bytes
    force : bool
        Replace an existing file whose content differs. Without it such a file raises.

    Returns
    -------
    bool
        True if the file was written, False if it already held exactly ``data``.

    Raises
    ------
    FileExistsError
        ``path`` exists with different content and ``force`` is False.
    """
    path = Path(path)
    if path.exists():
        if path.read_bytes() == data:
            return False
        if not force:
            raise FileExistsError(f"{path} exists with different content; pass force=True "
                                  f"(--force) to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data, force=True, fsync=True)
    return True
