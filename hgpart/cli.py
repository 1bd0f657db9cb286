"""The ``hgpart`` command line: one typer app, one module per command group.

Each command module in :mod:`hgpart.commands` registers its commands on
:data:`app` (defined in :mod:`hgpart.commands`, which imports none of them)
when imported. Errors a user can cause (:class:`HgpartError`) are printed as
one red line and exit with code 2; no traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from hgpart.commands import app
from hgpart.errors import HgpartError

__all__ = ["app", "main"]

#: command modules, imported in pipeline order
COMMAND_MODULES = [
    "hgpart.commands.model_cmds",
    "hgpart.commands.partition_cmds",
    "hgpart.commands.compare_cmds",
    "hgpart.commands.train_cmds",
    "hgpart.commands.quickstart_cmds",
]


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _register()
    try:
        code = app(args=argv, prog_name="hgpart", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.TyperException as exc:  # a usage error (unknown option, bad type): one line too, not a panel
        ctx = getattr(exc, "ctx", None)
        msg = " ".join(exc.format_message().split())
        print(f"error: {msg} (see `{ctx.command_path if ctx is not None else 'hgpart'} --help`)", file=sys.stderr)
        sys.exit(exc.exit_code)
    except HgpartError as exc:
        from rich.console import Console

        Console(stderr=True).print(f"[bold red]error:[/] {exc.line()}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
