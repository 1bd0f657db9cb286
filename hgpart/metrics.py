"""Partition metrics, computed by our own code from a placement (never copied from a backend).

Usage::

    m = partition_metrics(hg, parts, k=4)
    m.comm_volume_mib, m.max_over_avg_work

Column names follow the thesis's Tables 5.1-5.12: Max/Min/Avg Work, Max/Min,
Max/Avg, Max*N; Comm. Vol, Max Comm., Avg Comm., Max/Avg comm (MiB at the
hypergraph's batch size, forward pass; a training step moves twice that).
Per-part memory (parameters, gradients, optimizer state, activations and received maps, the model of
:mod:`hgpart.memory`) is added, against a device limit when one is given.

Send volumes: a broadcast net (a feature map) is sent by its producer's part
once to every other part among its pins; a reduce net (fine-grain partial
sums) is sent once by every non-root part among its pins to the root's part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from hgpart.errors import BadFileError, BadOptionError, ModelMismatchError
from hgpart.hypergraph import BROADCAST, DTYPE_BYTES, Hypergraph, sorted_unique
from hgpart.memory import MemorySettings, Optimizer, part_memory

__all__ = ["PartitionMetrics", "partition_metrics", "connectivity", "km1_bytes", "MIB", "OPTIMIZER_SLOTS",
           "SCALAR_COLUMNS"]

MIB = float(2**20)
OPTIMIZER_SLOTS = {o.value: o.slots for o in Optimizer}


@dataclass
class PartitionMetrics:
    """Every figure reported for one K-way partition."""

    k: int
    max_work: float
    min_work: float
    avg_work: float
    max_over_min: float
    max_over_avg: float
    max_times_n: float
    comm_volume_mib: float
    max_comm_mib: float
    avg_comm_mib: float
    max_over_avg_comm: float
    max_recv_mib: float
    cut_nets: int
    part_work: list[float]
    part_send_mib: list[float]
    part_recv_mib: list[float]
    part_param_bytes: list[float]
    part_optimizer_bytes: list[float]
    part_activation_bytes: list[float]
    max_memory_bytes: float
    max_over_avg_memory: float
    optimizer: str = "adam"
    #: per part: gradients (one value per parameter) and the maps received from other parts, kept for backward
    part_gradient_bytes: list[float] = field(default_factory=list)
    part_received_bytes: list[float] = field(default_factory=list)
    #: batches in flight whose activations a part keeps; the device memory limit in bytes (0: none)
    inflight: int = 1
    memory_limit_bytes: float = 0.0

    @property
    def part_memory_bytes(self) -> list[float]:
        """Total memory of every part (the sum of the per-part memory lists recorded)."""
        cols = [self.part_param_bytes, self.part_gradient_bytes, self.part_optimizer_bytes,
                self.part_activation_bytes, self.part_received_bytes]
        return [float(sum(c[q] for c in cols if c)) for q in range(self.k)]

    @property
    def fits_memory(self) -> bool:
        """Every part within the memory limit (True without one)."""
        return self.memory_limit_bytes <= 0 or max(self.part_memory_bytes) <= self.memory_limit_bytes

    def to_dict(self, keys: Sequence[str] | None = None) -> dict[str, object]:
        """Every field, or only ``keys`` (in that order)."""
        d = asdict(self)
        return d if keys is None else {key: d[key] for key in keys}

    @staticmethod
    def from_dict(d: Mapping[str, object]) -> PartitionMetrics:
        """The metrics of a dict written by :meth:`to_dict` (a placement file's ``metrics``)."""
        try:
            return PartitionMetrics(**d)  # type: ignore[arg-type]
        except TypeError as exc:
            raise BadFileError(f"not a complete set of partition metrics: {exc}",
                               fix="recompute them from the placement (hgpart metrics)") from None

    def scalar(self, column: str) -> float:
        """The value of one scalar column by name (a table or plot column; see :data:`SCALAR_COLUMNS`)."""
        if column not in SCALAR_COLUMNS:
            raise KeyError(f"{column!r} is not a scalar metric; use one of {SCALAR_COLUMNS}")
        return float(getattr(self, column))


#: the one-number fields of :class:`PartitionMetrics` (the per-part lists and the optimizer name excluded)
SCALAR_COLUMNS = tuple(f.name for f in fields(PartitionMetrics) if f.type in ("int", "float"))


def _check_parts(hg: Hypergraph, parts: np.ndarray, k: int) -> np.ndarray:
    parts = np.asarray(parts)
    if parts.shape != (hg.num_vertices,):
        raise ModelMismatchError(
            f"partition has {parts.shape[0] if parts.ndim else 0} entries, the hypergraph {hg.num_vertices} vertices",
            fix="the placement was made for another hypergraph", expected=hg.num_vertices,
            found=parts.shape[0] if parts.ndim else 0,
        )
    if parts.size and (parts.min() < 0 or parts.max() >= k):
        raise BadOptionError(f"part ids must be in [0, {k}), found {int(parts.min())}..{int(parts.max())}",
                             option="parts", value=(int(parts.min()), int(parts.max())))
    return parts.astype(np.int64)


def connectivity(hg: Hypergraph, parts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per net: lambda (number of parts among its pins), plus the distinct (net, part) pairs."""
    pin_net = hg.pin_nets()
    keys = sorted_unique(pin_net * k + parts[hg.net_pins])
    net_of, part_of = np.divmod(keys, k)
    lam = np.bincount(net_of, minlength=hg.num_nets)
    return lam, net_of, part_of


def km1_bytes(hg: Hypergraph, parts: np.ndarray, k: int) -> float:
    """Connectivity-minus-one objective in bytes: sum of cost * (lambda - 1)."""
    parts = _check_parts(hg, parts, k)
    lam, _, _ = connectivity(hg, parts, k)
    return float(np.dot(hg.net_cost, np.maximum(lam - 1, 0)))


def balance_class(hg: Hypergraph, parts: np.ndarray, k: int, epsilon: float,
                   weights: np.ndarray | None = None) -> int:
    """0: within ``(1 + eps) * total / K``; 1: within that plus one vertex of ``hg`` (the partitioners' own
    tolerance after integer weight scaling); 2: outside both. ``weights``: the vertex weights ``parts`` refers
    to when it is a placement of a grouped copy of ``hg`` (same part weights, fewer vertices).

    One function, so the backends that choose between placements (auto, block) agree on the limit and its
    float tolerance."""
    w = hg.vertex_weight if weights is None else weights
    work = np.bincount(parts, weights=w, minlength=k)
    cap = (1.0 + epsilon) * hg.vertex_weight.sum() / k
    if work.max() <= cap * (1.0 + 1e-9):
        return 0
    return 1 if work.max() <= cap + float(hg.vertex_weight.max(initial=0.0)) else 2


def partition_metrics(
    hg: Hypergraph, parts: np.ndarray, k: int, *, optimizer: str = "adam", dtype_bytes: int = DTYPE_BYTES,
    inflight: int = 1, memory_limit: float | None = None,
) -> PartitionMetrics:
    """All metrics of ``parts`` (one part id per vertex) on ``hg``; memory at the hypergraph's batch size with
    ``inflight`` batches in flight, against ``memory_limit`` bytes when given."""
    if k < 1:
        raise BadOptionError(f"K = {k} must be >= 1", option="k", value=k)
    parts = _check_parts(hg, parts, k)
    work = np.bincount(parts, weights=hg.vertex_weight, minlength=k)
    lam, net_of, part_of = connectivity(hg, parts, k)
    extra = np.maximum(lam - 1, 0).astype(np.float64)
    cost = hg.net_cost
    root_part = parts[hg.net_root]
    bcast = hg.net_kind == BROADCAST
    send = np.zeros(k)
    recv = np.zeros(k)
    # broadcast nets: root part sends cost*(lambda-1); every other part receives cost
    np.add.at(send, root_part[bcast], (cost * extra)[bcast])
    other = part_of != root_part[net_of]
    pair_b = bcast[net_of] & other
    np.add.at(recv, part_of[pair_b], cost[net_of[pair_b]])
    # reduce nets: every non-root part sends cost; the root part receives cost*(lambda-1)
    red = ~bcast
    pair_r = red[net_of] & other
    np.add.at(send, part_of[pair_r], cost[net_of[pair_r]])
    np.add.at(recv, root_part[red], (cost * extra)[red])

    total = float(np.dot(cost, extra))
    settings = MemorySettings(batch_size=hg.batch_size, inflight=inflight, optimizer=Optimizer.parse(optimizer),
                              dtype_bytes=dtype_bytes)
    pm = part_memory(hg, parts, k, settings, limit=memory_limit)
    mem = np.array([p.total for p in pm])
    maxw, minw, avgw = float(work.max()), float(work.min()), float(work.mean())
    avg_comm = total / k
    return PartitionMetrics(
        k=k,
        max_work=maxw,
        min_work=minw,
        avg_work=avgw,
        max_over_min=maxw / minw if minw > 0 else float("inf"),
        max_over_avg=maxw / avgw if avgw > 0 else float("nan"),
        max_times_n=maxw * k,
        comm_volume_mib=total / MIB,
        max_comm_mib=float(send.max()) / MIB,
        avg_comm_mib=avg_comm / MIB,
        max_over_avg_comm=float(send.max()) / avg_comm if avg_comm > 0 else 0.0,
        max_recv_mib=float(recv.max()) / MIB,
        cut_nets=int(np.count_nonzero(lam > 1)),
        part_work=work.tolist(),
        part_send_mib=(send / MIB).tolist(),
        part_recv_mib=(recv / MIB).tolist(),
        part_param_bytes=[p.params for p in pm],
        part_optimizer_bytes=[p.optimizer for p in pm],
        part_activation_bytes=[p.activations for p in pm],
        max_memory_bytes=float(mem.max()),
        max_over_avg_memory=float(mem.max() / mem.mean()) if mem.mean() > 0 else 0.0,
        optimizer=settings.optimizer.value,
        part_gradient_bytes=[p.gradients for p in pm],
        part_received_bytes=[p.received for p in pm],
        inflight=inflight,
        memory_limit_bytes=float(memory_limit or 0.0),
    )
