"""Notes: things a user should know that are not errors (the run goes on).

Usage::

    import warnings
    from hgpart.notes import HgpartNote
    warnings.warn(HgpartNote("3 local workers on 2 cores: cores are shared"), stacklevel=2)

A note is a typed Python warning, so library users can filter or escalate it with the :mod:`warnings`
machinery as usual; the ``hgpart`` command line prints each one as a single ``note:`` line on stderr, with no
source path (see :func:`hgpart.quiet.show_notes`).
"""

from __future__ import annotations

__all__ = ["HgpartNote"]


class HgpartNote(UserWarning):
    """A one-line note for the user: what happened and what it means, never a source location."""
