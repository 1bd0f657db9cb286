"""Mt-KaHyPar backend: multi-threaded km1 partitioning with selectable presets.

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=8, backend="mtkahypar", preset="quality", seed=3)

Gottesbüren, Heuer, Sanders, Schlag et al., Mt-KaHyPar (the ``mtkahypar``
wheel). Presets (case-insensitive, ``-`` or ``_``): ``deterministic``
(default), ``deterministic_quality``, ``default``, ``quality``,
``highest_quality``, ``large_k``. The deterministic presets give the same
partition for the same seed at any thread count; the others are only
reproducible on one thread, so they run on one thread unless ``threads``
asks for more (recorded in the provenance). Runs in a child process
(Mt-KaHyPar's thread pool is initialised once per process, and the caller
may be threaded) with ``threads`` threads (default :data:`DEFAULT_THREADS`).
"""

from __future__ import annotations

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.partitioners._subprocess import partition_in_child
from hgpart.partitioners.base import PartitionResult

__all__ = ["run", "PRESETS", "DEFAULT_PRESET", "resolve_preset", "DETERMINISTIC_PRESETS", "DEFAULT_THREADS",
           "thread_count"]

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
#: Mt-KaHyPar threads when the caller does not say (one per core of the 2-core machines hgpart targets)
DEFAULT_THREADS = 2


def resolve_preset(preset: str | None) -> str:
    """Our canonical preset name for ``preset`` (case-insensitive, ``-`` and ``_`` alike)."""
    if preset is None:
        return DEFAULT_PRESET
    key = preset.strip().lower().replace("-", "_")
    if key not in PRESETS:
        raise HgpartError(f"unknown Mt-KaHyPar preset {preset!r}", fix=f"use one of {sorted(PRESETS)}")
    return key


def thread_count(threads: int | None) -> int:
    """Threads for Mt-KaHyPar: ``threads``, or :data:`DEFAULT_THREADS` when None."""
    if threads is None:
        return DEFAULT_THREADS
    if int(threads) < 1:
        raise HgpartError(f"{threads} Mt-KaHyPar threads requested", fix="use 1 or more threads")
    return int(threads)


def run(
    hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
    threads: int | None = None,
) -> PartitionResult:
    """Backend entry point (see :mod:`hgpart.partitioners`)."""
    name = resolve_preset(preset)
    n = thread_count(threads)
    deterministic = name in DETERMINISTIC_PRESETS
    if not deterministic and threads is None:
        n = 1  # non-deterministic presets are reproducible for a seed only on one thread
    deterministic = deterministic or n == 1
    return partition_in_child("mtkahypar", hg, k=k, epsilon=epsilon, seed=seed, config=PRESETS[name], preset=name,
                              threads=n, deterministic=deterministic, time_limit=time_limit)
