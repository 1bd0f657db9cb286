"""Atomic file writes and friendly JSON reads.

Profiles, placements and reports are written to a temporary file in the
target folder and renamed over the destination, so an interrupted run never
leaves a half-written file and never destroys the previous good one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hgpart.errors import HgpartError

__all__ = ["atomic_write_text", "atomic_write_bytes", "write_json", "read_json"]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 1) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike[str], *, what: str = "file") -> Any:
    """Read a JSON document, turning every failure into one clear HgpartError."""
    p = Path(path)
    if not p.is_file():
        raise HgpartError(f"{what} {str(p)!r} does not exist", fix="check the path")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise HgpartError(f"{what} {str(p)!r} is not a text file", fix="pass a JSON file") from None
    except json.JSONDecodeError as exc:
        raise HgpartError(
            f"{what} {str(p)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            fix="the file is truncated or corrupt; regenerate it",
        ) from None
