"""Mt-KaHyPar backend: multi-threaded km1 partitioning with selectable presets.

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=8, backend="mtkahypar", preset="quality", seed=3)

Gottesbüren, Heuer, Sanders, Schlag et al., Mt-KaHyPar (the ``mtkahypar``
wheel). Presets (case-insensitive, ``-`` or ``_``): ``deterministic``
(default), ``deterministic_quality``, ``default``, ``quality``,
``highest_quality``, ``large_k``. The deterministic presets give the same
partition for the same seed at any thread count; the others are only
reproducible on one thread, so they run on one thread unless
``HGPART_MTKAHYPAR_THREADS`` asks for more (recorded in the provenance).
Runs in a child process (Mt-KaHyPar's thread pool is initialised once per
process, and the caller may be threaded) with ``threads`` from
``HGPART_MTKAHYPAR_THREADS`` (default 2).
"""

from __future__ import annotations

import os

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.partitioners import PartitionResult
from hgpart.partitioners._subprocess import partition_in_child

__all__ = ["run", "PRESETS", "DEFAULT_PRESET", "resolve_preset", "DETERMINISTIC_PRESETS", "default_threads"]

#: our name -> mtkahypar.PresetType member
PRESETS = {
    "deterministic": "DETERMINISTIC",
    "deterministic_quality": "DETERMINISTIC_QUALITY",
    "default": "DEFAULT",
    "quality": "QUALITY",
    "highest_quality": "HIGHEST_QUALITY",
    "large_k": "LARGE_K",
}
DETERMINISTIC_PRESETS = frozenset({"deterministic", "deterministic_quality"})
DEFAULT_PRESET = "deterministic"


def resolve_preset(preset: str | None) -> str:
    """Our canonical preset name for ``preset`` (case-insensitive, ``-`` and ``_`` alike)."""
    if preset is None:
        return DEFAULT_PRESET
    key = preset.strip().lower().replace("-", "_")
    if key not in PRESETS:
        raise HgpartError(f"unknown Mt-KaHyPar preset {preset!r}", fix=f"use one of {sorted(PRESETS)}")
    return key


def default_threads() -> int:
    """Threads for Mt-KaHyPar: ``HGPART_MTKAHYPAR_THREADS`` or 2."""
    raw = os.environ.get("HGPART_MTKAHYPAR_THREADS", "2")
    try:
        n = int(raw)
    except ValueError:
        raise HgpartError(f"HGPART_MTKAHYPAR_THREADS={raw!r} is not an integer", fix="set it to e.g. 2") from None
    return max(1, n)


def run(
    hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
    threads: int | None = None,
) -> PartitionResult:
    name = resolve_preset(preset)
    explicit = threads is not None or "HGPART_MTKAHYPAR_THREADS" in os.environ
    n = max(1, int(threads)) if threads is not None else default_threads()
    deterministic = name in DETERMINISTIC_PRESETS
    if not deterministic and not explicit:
        n = 1  # non-deterministic presets are reproducible for a seed only on one thread
    deterministic = deterministic or n == 1
    return partition_in_child("mtkahypar", hg, k=k, epsilon=epsilon, seed=seed, config=PRESETS[name], preset=name,
                              threads=n, deterministic=deterministic, time_limit=time_limit)
