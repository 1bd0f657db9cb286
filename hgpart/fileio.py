"""Atomic file writes, output-path checks and friendly JSON reads.

Usage::

    check_writable(out, what="placement file")     # before any long work: one HgpartError if it cannot be written
    ...
    write_json(out, placement_dict)                 # temp file in the target folder, then os.replace

Profiles, placements and reports are written to a temporary file in the
target folder and renamed over the destination, so an interrupted run never
leaves a half-written file and never destroys the previous good one. A
command that writes calls :func:`check_writable` on its outputs before it
measures or partitions anything, so an unwritable path costs a second, not
the whole run; a write that still fails (disk full, a folder removed
meanwhile) is an :class:`HgpartError`, never an ``OSError`` traceback.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hgpart.errors import HgpartError

__all__ = ["atomic_write_text", "atomic_write_bytes", "write_json", "read_json", "check_writable", "check_outputs"]


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists (the folder a write would start from)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe_folder(folder: Path) -> str | None:
    """Why a file cannot be created in the existing folder ``folder`` (None: it can).

    ``os.access`` answers for ordinary permissions; a real create-and-delete answers where it is wrong
    (root ignores permission bits, read-only mounts, pseudo file systems such as /proc).
    """
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hgpart-probe.", suffix=".tmp", dir=folder)
    except OSError as exc:
        return exc.strerror or exc.__class__.__name__
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError:
        pass
    return None


def check_writable(path: str | os.PathLike[str], *, what: str = "output file", folder: bool = False,
                   where: str | None = None, suffixes: tuple[str, ...] | None = None) -> Path:
    """Refuse, with one :class:`HgpartError`, an output path that cannot be written; returns it as a Path.

    Checks without creating anything: the target is not a directory (``folder=False``) or not a file
    (``folder=True``: an output folder), no ancestor is a file, and the nearest existing folder accepts a new
    file. Missing parent folders are fine (the writers create them). ``suffixes``: the file name must end with
    one of them (a writer such as Keras's ``save`` that refuses other names would fail only after the work).
    """
    if suffixes and not folder and not str(path).endswith(suffixes):
        raise HgpartError(f"{what} {str(path)!r} does not end with {' or '.join(suffixes)}", where=where,
                          fix=f"name it e.g. model{suffixes[0]}")
    try:
        return _check_writable(path, what=what, folder=folder, where=where)
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise HgpartError(f"cannot write {what} {str(path)!r} ({exc.strerror or exc.__class__.__name__})",
                          where=where, fix="choose a shorter, valid path") from None


def _check_writable(path: str | os.PathLike[str], *, what: str, folder: bool, where: str | None) -> Path:
    target = Path(path)
    shown = str(target)
    if folder:
        if target.exists() and not target.is_dir():
            raise HgpartError(f"{what} {shown!r} is a file, not a folder", where=where,
                              fix="pass a folder path (existing or new)")
    elif target.is_dir():
        raise HgpartError(f"{what} {shown!r} is a directory", where=where, fix="pass a file path, e.g. DIR/name.json")
    elif str(path).endswith(("/", os.sep)):
        raise HgpartError(f"{what} {shown!r} names a folder (ends with a slash)", where=where,
                          fix="pass a file path, e.g. DIR/name.json")
    start = target if folder and target.is_dir() else target.parent
    base = _nearest_existing(start)
    if not base.is_dir():
        raise HgpartError(f"cannot write {what} {shown!r}: {str(base)!r} is a file, not a folder", where=where,
                          fix="choose a path whose parent folders are folders")
    reason = _probe_folder(base)
    if reason is not None:
        raise HgpartError(f"cannot write {what} {shown!r}: folder {str(base)!r} is not writable ({reason})",
                          where=where, fix="choose a writable folder, e.g. under your home or the working directory")
    return target


def check_outputs(*, files: dict[str, str | os.PathLike[str] | None] | None = None,
                  folders: dict[str, str | os.PathLike[str] | None] | None = None,
                  suffixes: dict[str, tuple[str, ...]] | None = None) -> None:
    """:func:`check_writable` on every given output of a command, keyed by its option (None values are skipped).

    Example: ``check_outputs(files={"--log": log, "--save": save}, folders={"--trace": trace,
    "--checkpoint-dir": ckpt}, suffixes={"--save": (".keras",)})``; ``suffixes`` are the file names an
    option accepts. An existing folder is a fine output folder (a checkpoint folder to resume from).
    """
    for option, p in (files or {}).items():
        if p is not None:
            check_writable(p, what=f"{option.lstrip('-')} file", where=option, suffixes=(suffixes or {}).get(option))
    for option, p in (folders or {}).items():
        if p is not None:
            check_writable(p, what=f"{option.lstrip('-')} folder", folder=True, where=option)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, what: str = "file") -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``; an OSError becomes an HgpartError."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _write_error(what, target, exc) from None
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would (0666 less the umask)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _write_error(what, target, exc) from None
        raise
    return target


def _write_error(what: str, target: Path, exc: OSError) -> HgpartError:
    return HgpartError(f"cannot write {what} {str(target)!r} ({exc.strerror or exc.__class__.__name__})",
                       fix="choose a writable path with free space; nothing was written there")


def atomic_write_text(path: str | os.PathLike[str], text: str, *, what: str = "file") -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), what=what)


def write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 1, what: str = "file") -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=False) + "\n", what=what)


def read_json(path: str | os.PathLike[str], *, what: str = "file") -> Any:
    """Read a JSON document, turning every failure into one clear HgpartError."""
    p = Path(path)
    try:
        kind = "dir" if p.is_dir() else "file" if p.is_file() else None
        if kind == "file":
            return json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise HgpartError(f"{what} {str(p)!r} is not a text file", fix="pass a JSON file") from None
    except json.JSONDecodeError as exc:
        raise HgpartError(
            f"{what} {str(p)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            fix="the file is truncated or corrupt; regenerate it",
        ) from None
    except OSError as exc:
        raise HgpartError(f"cannot read {what} {str(p)!r} ({exc.strerror or exc.__class__.__name__})",
                          fix="check the path and the file's permissions") from None
    except RecursionError:
        raise HgpartError(f"{what} {str(p)!r} nests too deeply to be a {what}", fix="regenerate it") from None
    if kind == "dir":
        raise HgpartError(f"{what} {str(p)!r} is a directory, not a file", fix="pass the path of a file inside it")
    raise HgpartError(f"{what} {str(p)!r} does not exist", fix="check the path")
