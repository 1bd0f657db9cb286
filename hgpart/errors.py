"""The one exception type a user can cause.

Every error that stems from user input (a bad model, a profile for another
model, a malformed placement file, a missing device) is raised as
:class:`HgpartError`, carrying *what* went wrong, *where*, and *how to fix it*.
The CLI turns it into a single line and exit code 2 instead of a traceback.
"""

from __future__ import annotations

__all__ = ["HgpartError"]


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
