"""KaHyPar backend: direct k-way km1 with the preset shipped in ``hgpart/data/kahypar_km1.ini``.

Usage::

    from hgpart.partitioners import partition
    res = partition(hg, k=4, backend="kahypar", epsilon=0.1, seed=1)

Sebastian Schlag et al., KaHyPar (the ``kahypar`` wheel). The wheel ships no
configuration and ``exit()``\\ s the interpreter on bad input, so the
hypergraph is validated and scaled to 32-bit integers first
(:mod:`hgpart.partitioners.scaling`) and KaHyPar runs in a child process.
``preset`` is ``km1`` (our shipped file) or the path of another KaHyPar
``.ini``. KaHyPar is sequential and deterministic for a fixed seed.
"""

from __future__ import annotations

from pathlib import Path

from hgpart.errors import HgpartError
from hgpart.hypergraph import Hypergraph
from hgpart.partitioners._subprocess import partition_in_child
from hgpart.partitioners.base import PartitionResult

__all__ = ["run", "PRESET_FILE", "DEFAULT_PRESET", "resolve_preset"]

PRESET_FILE = Path(__file__).resolve().parent.parent / "data" / "kahypar_km1.ini"
DEFAULT_PRESET = "km1"


def resolve_preset(preset: str | None) -> tuple[str, Path]:
    """(name, .ini path) for ``preset``: ``km1`` (shipped) or a path to an .ini file."""
    if preset is None or preset.lower() in ("km1", "default"):
        return DEFAULT_PRESET, PRESET_FILE
    path = Path(preset)
    if path.suffix == ".ini" and path.is_file():
        return str(path), path
    raise HgpartError(f"unknown KaHyPar preset {preset!r}",
                      fix="use 'km1' (shipped km1 direct k-way preset) or the path of a KaHyPar .ini file")


def run(
    hg: Hypergraph, *, k: int, epsilon: float, seed: int, preset: str | None, time_limit: float | None,
    threads: int | None = None,
) -> PartitionResult:
    """Backend entry point (see :mod:`hgpart.partitioners`); KaHyPar is sequential, ``threads`` is ignored."""
    name, ini = resolve_preset(preset)
    return partition_in_child("kahypar", hg, k=k, epsilon=epsilon, seed=seed, config=str(ini), preset=name,
                              threads=1, deterministic=True, time_limit=time_limit)
