"""Checks of command-line option values, run before a command builds, measures or partitions anything.

Usage::

    from hgpart.commands import options
    options.check_parts(k)                          # K >= 1
    options.check_epsilon(0.1)                      # 0 <= eps < 10
    options.check_backend("mtkahypar", "quality")   # known backend, preset known for it
    options.check_seconds(time_limit, "--time-limit")

Every function raises one :class:`HgpartError` naming the option, so a bad
value costs no time: typer checks the types, these check the ranges and
names that typer cannot. The partitioners validate again for API callers.
"""

from __future__ import annotations

import math

from hgpart.errors import HgpartError

__all__ = [
    "MAX_PARTS",
    "check_parts",
    "check_epsilon",
    "check_backend",
    "check_seconds",
    "check_at_least_one",
    "method_of_backend",
]

#: part ids are stored as 16-bit unsigned integers in placement files
MAX_PARTS = 65536
#: backends that produce the thesis's non-hypergraph baselines; every other backend partitions the hypergraph
BASELINE_BACKENDS = ("layerwise", "horizontal", "incremental", "block")


def check_parts(k: int, *, where: str = "--k") -> int:
    """K parts: at least 1, at most :data:`MAX_PARTS`."""
    if k < 1:
        raise HgpartError(f"K = {k} must be >= 1", where=where, fix="pass --k 1 or more (the number of devices)")
    if k > MAX_PARTS:
        raise HgpartError(f"K = {k} exceeds {MAX_PARTS} parts", where=where, fix="use fewer parts")
    return k


def check_epsilon(epsilon: float, *, where: str = "--epsilon") -> float:
    """The allowed imbalance: finite, 0 <= eps < 10."""
    if not 0.0 <= epsilon < 10.0:  # also refuses nan
        raise HgpartError(f"imbalance epsilon = {epsilon} is out of range 0 <= eps < 10", where=where,
                          fix="use a value like 0.03 or 0.1")
    return epsilon


def check_seconds(seconds: float | None, where: str) -> float | None:
    """A time limit: None (none given) or a finite number of seconds above zero."""
    if seconds is not None and not (seconds > 0.0 and math.isfinite(seconds)):
        raise HgpartError(f"time limit {seconds} s must be a positive number of seconds", where=where,
                          fix=f"pass e.g. {where} 30, or leave it out")
    return seconds


def check_at_least_one(value: int | None, where: str) -> int | None:
    """A count option (group size, threads, batch size): None or >= 1."""
    if value is not None and value < 1:
        raise HgpartError(f"value {value} must be >= 1", where=where)
    return value


def check_backend(backend: str, preset: str | None, *, allowed: tuple[str, ...] | None = None) -> None:
    """``backend`` is a registered partitioner (one of ``allowed`` if given) and ``preset`` is one it knows."""
    from hgpart.partitioners import available_backends

    names = [b for b in available_backends() if allowed is None or b in allowed]
    if backend not in names:
        raise HgpartError(f"unknown partitioner backend {backend!r}", where="--backend",
                          fix=f"use one of {', '.join(names)}")
    if preset is None:
        return
    if backend == "mtkahypar":
        from hgpart.partitioners.mtkahypar_backend import resolve_preset as mt_preset

        mt_preset(preset)
    elif backend == "kahypar":
        from hgpart.partitioners.kahypar_backend import resolve_preset as ka_preset

        ka_preset(preset)
    elif backend == "auto":
        from hgpart.partitioners.auto import resolve_preset as auto_preset

        auto_preset(preset)
    elif backend == "exact":
        from hgpart.partitioners.exact import resolve_preset as exact_preset

        exact_preset(preset)
    else:
        raise HgpartError(f"the {backend} backend takes no preset (got {preset!r})", where="--preset",
                          fix="drop --preset, or use it with --backend mtkahypar, kahypar, auto or exact")


def method_of_backend(backend: str) -> str:
    """The placement's ``method``: the baseline's own name, or ``hypergraph`` for hypergraph partitioners."""
    return backend if backend in BASELINE_BACKENDS else "hypergraph"
