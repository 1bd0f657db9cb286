"""The ``hgpart`` commands: one module per command group, each registering its commands on :data:`app`.

:mod:`hgpart.cli` imports the command modules and runs :data:`app`; the app lives here, not in the CLI module, so a
command module imports its parent package and never the module that imports it.
"""

from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(
    name="hgpart",
    help="Model parallelism for CNNs chosen by hypergraph partitioning: profile, build, partition, train, compare.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
