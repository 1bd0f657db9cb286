"""Prompt, clean interruption of a partitioning run (Ctrl-C, SIGTERM).

Usage::

    with interruptible():                       # partition() wraps every backend run in this
        res = milp_interruptible(c, constraints=..., integrality=..., bounds=..., options=...)

Why: HiGHS (scipy's ``milp``) holds the calling thread in C for its whole
time limit, so a signal handler cannot run there, and a thread pool joins
its threads before the exception leaves it. Every long HiGHS solve therefore
runs in a daemon thread while its caller waits in short slices; when the run
is interrupted, :data:`CANCEL` is set, waiting callers give up at once, and
an abandoned solve ends with its time limit or with the process. SIGTERM is
turned into :class:`Terminated` (a ``SystemExit``) during the run, so
``finally`` blocks remove temporary folders and kill worker processes
instead of the process vanishing with them.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from hgpart.errors import HgpartError

__all__ = ["CANCEL", "POLL", "Terminated", "interruptible", "cancel_on_interrupt", "milp_interruptible",
           "cancelled"]

#: set while an interrupted run unwinds: solver threads stop waiting and searches stop
CANCEL = threading.Event()
#: seconds between looks at CANCEL (and chances for the main thread to take a signal)
POLL = 0.1


class Terminated(SystemExit):
    """SIGTERM arrived during a partitioning run (exit status 128 + 15)."""


def cancelled() -> bool:
    """True while an interrupted run unwinds."""
    return CANCEL.is_set()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(128 + signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """Run the body so that SIGTERM and Ctrl-C unwind it promptly and every ``finally`` runs.

    SIGTERM raises :class:`Terminated` in the main thread while the body runs
    (only if nobody installed a handler of their own). Ctrl-C or SIGTERM
    leaving the body sets :data:`CANCEL` so helper threads stop too; it stays
    set until the next run starts (threads left behind see it), while an
    ordinary error leaves it clear.
    """
    CANCEL.clear()
    previous: Any = None
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        CANCEL.set()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextmanager
def cancel_on_interrupt() -> Iterator[None]:
    """Set :data:`CANCEL` when Ctrl-C or SIGTERM unwinds the body.

    Put it *inside* a thread pool's ``with`` (``with pool, cancel_on_interrupt():``):
    the pool joins its threads on exit, and they end promptly only once CANCEL is set.
    """
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        CANCEL.set()
        raise


def wait_for(call: Callable[[], Any], what: str) -> Any:
    """``call()`` in a daemon thread; returns its result, re-raises its error, gives up when :data:`CANCEL` is set."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the waiting caller
            box["error"] = exc

    t = threading.Thread(target=target, name=f"hgpart-{what}", daemon=True)
    t.start()
    while t.is_alive():
        t.join(POLL)  # in the main thread this wait lets a signal handler run
        if CANCEL.is_set():
            raise HgpartError(f"{what} was interrupted", fix="run the command again")
    if "error" in box:
        raise box["error"]
    return box["value"]


def milp_interruptible(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.milp(*args, **kwargs)``, interruptible (see the module docstring)."""
    from scipy.optimize import milp  # here, not at the top: the package's __init__ imports this module

    return wait_for(lambda: milp(*args, **kwargs), "the HiGHS solve")
