"""TensorFlow quiet by default: what the ``hgpart`` command line does so its own lines are the only output.

Usage (the CLI does this; ``hgpart --verbose ...`` skips it)::

    from hgpart import quiet
    quiet.quiet_python()                 # before TensorFlow is imported
    with quiet.StderrFilter():           # C++ log lines written to fd 2 are dropped, every other line kept
        run_the_command()

What TensorFlow prints, and what silences each kind:

* its C++ log (``I0000 ... cpu_feature_guard``, the oneDNN notice, ``E0000 ... Failed to remove function
  remotely``): ``TF_CPP_MIN_LOG_LEVEL=3``, read when TensorFlow is imported;
* absl's ``WARNING: All log messages before absl::InitializeLog() is called are written to STDERR``, written
  straight to file descriptor 2 the first time anything logs, whatever the level: only a filter on fd 2
  removes it, hence :class:`StderrFilter`;
* Python warnings (Keras, NumPy) and the ``tensorflow`` / ``absl`` Python loggers: filtered and set to ERROR.

hgpart's own notes (:class:`hgpart.notes.HgpartNote`) stay visible either way, as one ``note:`` line each.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import warnings
from types import TracebackType
from typing import TextIO

from hgpart.notes import HgpartNote

__all__ = ["NOISE", "StderrFilter", "quiet_python", "show_notes"]

#: lines of TensorFlow's C++ logging (absl / glog format), and the continuation lines of its messages we have seen
NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\)"
    r"|[IWE]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ ]+:\d+\] "  # seconds may be epoch seconds (the CUDA stub's lines)
    r"|This could happen if the remote target has been disconnected from the client"
    r"|To enable the following instructions: )"
)

_LOGGERS = ("tensorflow", "absl", "h5py", "jax")


def quiet_python() -> None:
    """C++ log level 3 (set before TensorFlow is imported), Python warnings off except notes, loggers at ERROR."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    warnings.simplefilter("ignore")
    warnings.simplefilter("always", HgpartNote)
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def show_notes(stream: TextIO | None = None) -> None:
    """Print each :class:`HgpartNote` as one ``note: ...`` line (no source path); other warnings as before."""
    original = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, HgpartNote):
            print(f"note: {message}", file=stream or sys.stderr, flush=True)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def _writes_to_fd2(stream: TextIO) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


class StderrFilter:
    """Route file descriptor 2 through a thread that drops :data:`NOISE` lines; Python's ``sys.stderr`` stays direct.

    C++ code (TensorFlow, absl, gRPC) writes to fd 2, so fd 2 becomes a pipe read by a daemon thread that
    forwards every other line to the real stderr. ``sys.stderr`` is pointed at a duplicate of the real stderr, so
    Python output keeps its order, its colours and its terminal. ``stop()`` (or leaving ``with``) restores both
    and forwards whatever is still in the pipe.
    """

    def __init__(self, noise: re.Pattern[str] = NOISE) -> None:
        self.noise = noise
        self._real: int | None = None
        self._read: int | None = None
        self._thread: threading.Thread | None = None
        self._saved_stderr: TextIO | None = None
        self._direct: TextIO | None = None

    @property
    def active(self) -> bool:
        return self._real is not None

    def start(self) -> StderrFilter:
        """Install the filter; a no-op if installed, or if ``sys.stderr`` is not fd 2 (a test captures it)."""
        if self.active or not _writes_to_fd2(sys.stderr):
            return self
        sys.stderr.flush()
        self._real = os.dup(2)
        self._read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._saved_stderr = sys.stderr
        self._direct = open(os.dup(self._real), "w", encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
                            errors="backslashreplace", buffering=1, closefd=True)
        sys.stderr = self._direct
        self._thread = threading.Thread(target=self._pump, args=(self._read, self._real), daemon=True,
                                        name="hgpart-stderr-filter")
        self._thread.start()
        return self

    def _pump(self, read: int, real: int) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(read, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            self._forward(real, lines)
        if pending:
            self._forward(real, [pending])

    def _forward(self, real: int, lines: list[bytes]) -> None:
        keep = [ln for ln in lines if not self.noise.match(ln.decode("utf-8", "replace"))]
        if keep:
            try:
                os.write(real, b"\n".join(keep) + b"\n")
            except OSError:
                pass

    def stop(self) -> None:
        """Restore fd 2 and ``sys.stderr``; forward what is left in the pipe (waits up to 2 s for writers)."""
        if self._real is None:
            return
        if self._direct is not None:
            self._direct.flush()
        if sys.stderr is self._direct and self._saved_stderr is not None:
            sys.stderr = self._saved_stderr
        os.dup2(self._real, 2)  # closes our write end of the pipe: the pump sees EOF once children have exited
        if self._thread is not None:
            self._thread.join(2.0)
        for fd in (self._read, self._real):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self._direct is not None:
            self._direct.close()
        self._real = self._read = None
        self._thread = self._direct = None

    def __enter__(self) -> StderrFilter:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
