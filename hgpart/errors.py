"""The exceptions a user can cause, typed by cause.

Usage::

    from hgpart.errors import BadOptionError, HgpartError, MissingProfileError
    try:
        graph, prof, path = load_inputs(...)
    except MissingProfileError as exc:      # a cause, not a message text
        ...exc.path, exc.model, exc.batch_size...
    except HgpartError as exc:              # any other user error
        print(exc.line())

Every error that stems from user input (a bad model, a profile for another
model, a malformed placement file, a missing device) is an
:class:`HgpartError`, carrying *what* went wrong, *where*, and *how to fix it*.
The CLI turns it into a single line and exit code 2 instead of a traceback.

The subclasses name the cause and carry the offending values, so code that
must react to one cause (``quickstart`` falling back to FLOP counts when no
measured profile exists) catches a type and never parses message text:

* :class:`BadOptionError` - an argument or option value that cannot be used (``option``, ``value``);
* :class:`BadFileError` - a file that is missing, unreadable or malformed (``path``);
  :class:`MissingProfileError` - no measured profile for a model (``path``, ``model``, ``batch_size``);
* :class:`ModelMismatchError` - a file or object made for another model or hypergraph (``expected``, ``found``);
* :class:`DeviceError` - a device, worker process or training step that failed (``device``, ``cause``);
* :class:`InterruptedRunError` - a run stopped before it finished (``completed``).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

_E = TypeVar("_E", bound=Enum)

__all__ = ["HgpartError", "BadOptionError", "BadFileError", "MissingProfileError", "ModelMismatchError",
           "DeviceError", "InterruptedRunError", "parse_enum"]


class HgpartError(Exception):
    """A user-facing error: one line, what / where / how to fix."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        """The single line printed by the CLI."""
        parts = [self.what]
        if self.where:
            parts.append(f"in {self.where}")
        text = " ".join(parts)
        if self.fix:
            text += f"; {self.fix}"
        return text

    def _values(self) -> dict[str, Any]:
        """The subclass's own keyword values (for pickling across worker processes)."""
        base = {"what", "where", "fix"}
        return {key: val for key, val in vars(self).items() if key not in base and not key.startswith("_")}

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles only ``args``; keep the keyword-only fields so the type and values survive a process hop
        return (_rebuild, (type(self), self.what, self.where, self.fix, self._values()))


def _rebuild(cls: type[HgpartError], what: str, where: str | None, fix: str | None,
             values: dict[str, Any]) -> HgpartError:
    return cls(what, where=where, fix=fix, **values)


class BadOptionError(HgpartError):
    """An argument or option value that cannot be used (unknown name, out of range, inconsistent with another)."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None, option: str | None = None,
                 value: object = None) -> None:
        self.option = option if option is not None else where
        self.value = value
        super().__init__(what, where=where, fix=fix)


class BadFileError(HgpartError):
    """A file that is missing, unreadable, or not in the expected format or version."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None,
                 path: str | None = None) -> None:
        self.path = path if path is not None else where
        super().__init__(what, where=where, fix=fix)


class MissingProfileError(BadFileError):
    """No measured profile exists for a model at an input size and batch size."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None, path: str | None = None,
                 model: str = "", batch_size: int = 0) -> None:
        self.model = model
        self.batch_size = batch_size
        super().__init__(what, where=where, fix=fix, path=path)


class ModelMismatchError(HgpartError):
    """A file or object made for another model or hypergraph than the one given with it."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None, expected: object = None,
                 found: object = None) -> None:
        self.expected = expected
        self.found = found
        super().__init__(what, where=where, fix=fix)


class DeviceError(HgpartError):
    """A device that cannot be opened, a worker process that died, or a training step that failed on a device."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None, device: str | None = None,
                 cause: str | None = None) -> None:
        self.device = device
        self.cause = cause  # the type name of the original exception, when one was wrapped
        super().__init__(what, where=where, fix=fix)


class InterruptedRunError(HgpartError):
    """A run stopped before it finished (a signal, a time limit); ``completed`` is how far it got."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None,
                 completed: object = None) -> None:
        self.completed = completed
        super().__init__(what, where=where, fix=fix)


def parse_enum(cls: type[_E], value: str | _E, *, what: str, where: str) -> _E:
    """The member of ``cls`` whose value is ``value`` (a member is returned as it is); else one BadOptionError
    naming ``what`` was unknown and listing the values."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        names = ", ".join(str(m.value) for m in cls)
        raise BadOptionError(f"unknown {what} {value!r}", where=where, option=where, value=str(value),
                             fix=f"use one of {names}") from None
