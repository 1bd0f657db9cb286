"""The ``hgpart`` command line: one typer app, one module per command group.

Each command module in :mod:`hgpart.commands` registers its commands on
:data:`app` (defined in :mod:`hgpart.commands`, which imports none of them)
when imported. Errors a user can cause (:class:`HgpartError`) are
printed as one red line and exit with code 2; no traceback. Ctrl-C prints one
``interrupted`` line and exits with code 130. TensorFlow is quiet by default
(see :mod:`hgpart.quiet`); ``hgpart --verbose COMMAND`` shows its log lines and
Python warnings again. TensorFlow's CPU allocator is BFC by default (see
:mod:`hgpart.allocator`).
"""

from __future__ import annotations

import gc
import importlib
import sys

import typer

from hgpart.allocator import use_bfc
from hgpart.commands import app
from hgpart.errors import HgpartError
from hgpart.quiet import StderrFilter, quiet_python, show_notes

__all__ = ["app", "main"]

#: command modules, imported in pipeline order
COMMAND_MODULES = [
    "hgpart.commands.model_cmds",
    "hgpart.commands.partition_cmds",
    "hgpart.commands.compare_cmds",
    "hgpart.commands.train_cmds",
    "hgpart.commands.quickstart_cmds",
    "hgpart.commands.sim_cmds",
    "hgpart.commands.plan_cmds",
    "hgpart.commands.calibrate_cmds",
    "hgpart.commands.calibrate_split_cmds",
]

#: drops TensorFlow's C++ log lines from file descriptor 2 while :func:`main` runs (off with --verbose)
_STDERR_FILTER = StderrFilter()

#: exit code after Ctrl-C (128 + SIGINT), as shells report it
EXIT_INTERRUPTED = 130


@app.callback()
def _global_options(
    verbose: bool = typer.Option(False, "--verbose", help="show TensorFlow's log lines and Python warnings "
                                 "(hidden by default)"),
) -> None:
    if verbose:
        _STDERR_FILTER.stop()
    else:
        quiet_python()
    show_notes()


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


def _interrupted(exc: BaseException) -> bool:
    """True if ``exc`` is, or was raised while handling, a KeyboardInterrupt (typer turns Ctrl-C into exit 130)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _run(argv: list[str] | None) -> int:
    """Run the app; the exit code. Errors are printed here, and no exception (nor its frames) outlives this call."""
    try:
        code = app(args=argv, prog_name="hgpart", standalone_mode=False)
    except typer.TyperException as exc:  # a usage error (unknown option, bad type): one line too, not a panel
        ctx = getattr(exc, "ctx", None)
        msg = " ".join(exc.format_message().split())
        print(f"error: {msg} (see `{ctx.command_path if ctx is not None else 'hgpart'} --help`)", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except HgpartError as exc:
        from rich.console import Console

        Console(stderr=True).print(f"[bold red]error:[/] {exc.line()}", highlight=False, soft_wrap=True)
        return 2
    except (KeyboardInterrupt, typer.Abort):
        print("interrupted (Ctrl-C); stopped", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED and _interrupted(exc):
            print("interrupted (Ctrl-C); stopped", file=sys.stderr, flush=True)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr, flush=True)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    code = code if isinstance(code, int) else 0
    if code == EXIT_INTERRUPTED:  # typer (not standalone) returns 130 for a KeyboardInterrupt it caught
        print("interrupted (Ctrl-C); stopped", file=sys.stderr, flush=True)
    return code


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    use_bfc()  # before any command makes a tensor: TensorFlow reads it when it builds its CPU allocator
    _register()
    _STDERR_FILTER.start()
    try:
        code = _run(argv)
        # Free TensorFlow's functions now, while the filter still drops the lines their deletion may log
        # (a remote function whose worker has stopped cannot be deleted, and TensorFlow says so on fd 2).
        gc.collect()
    finally:
        _STDERR_FILTER.stop()
    sys.exit(code)
