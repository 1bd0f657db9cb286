"""Rich tables of partition metrics with the thesis's column names (Tables 5.1-5.12).

Usage::

    from hgpart.tables import metrics_tables, print_metrics
    rows = [("hypergraph N=4", m4), ("layerwise N=4", l4)]
    print_metrics(rows, work_unit="ms")            # work, communication and memory tables
    work_table(rows, work_unit="ms")                # one rich.table.Table

One place that decides how a :class:`~hgpart.metrics.PartitionMetrics` is
shown, so ``hgpart partition``, ``hgpart metrics`` and the comparison report
print the same columns with the same units: work in the profile's unit,
communication in MiB per forward pass at the hypergraph's batch size, memory
in MiB.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from hgpart.metrics import MIB, PartitionMetrics

__all__ = ["WORK_COLUMNS", "COMM_COLUMNS", "MEMORY_COLUMNS", "work_table", "comm_table", "memory_table",
           "part_memory_table", "metrics_tables", "print_metrics", "fmt"]

Rows = Sequence[tuple[str, PartitionMetrics]]

WORK_COLUMNS = ("Max Work", "Min Work", "Avg. Work", "Max/Min", "Max/Avg", "Max*N")
COMM_COLUMNS = ("Comm. Vol", "Max Comm.", "Avg Comm.", "Max/Avg comm", "Max Recv.", "Cut nets")
MEMORY_COLUMNS = ("Params", "Optim. state", "Activations", "Total", "Max/Avg mem")


def fmt(x: float, digits: int = 3) -> str:
    """Compact number: thousands separators for large values, ``digits`` significant decimals otherwise."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "inf"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 1 or ax == 0:
        return f"{x:.{digits - 1}f}".rstrip("0").rstrip(".") if ax else "0"
    return f"{x:.{digits}g}"


def _table(title: str, label: str, columns: Sequence[str]) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    t.add_column(label)
    for c in columns:
        t.add_column(c, justify="right")
    return t


def work_table(rows: Rows, *, work_unit: str = "ms", label: str = "Partition") -> Table:
    """Max Work, Min Work, Avg. Work, Max/Min, Max/Avg, Max*N (work in ``work_unit``)."""
    t = _table(f"Computational load ({work_unit})", label, WORK_COLUMNS)
    for name, m in rows:
        t.add_row(name, fmt(m.max_work), fmt(m.min_work), fmt(m.avg_work), fmt(m.max_over_min),
                  fmt(m.max_over_avg), fmt(m.max_times_n))
    return t


def comm_table(rows: Rows, *, label: str = "Partition", batch_size: int | None = None) -> Table:
    """Comm. Vol, Max Comm., Avg Comm., Max/Avg comm (MiB per forward pass) plus max receive and cut nets."""
    at = f" at batch {batch_size}" if batch_size else ""
    t = _table(f"Communication in MiB per forward pass{at} (a training step moves twice this)", label, COMM_COLUMNS)
    for name, m in rows:
        t.add_row(name, fmt(m.comm_volume_mib), fmt(m.max_comm_mib), fmt(m.avg_comm_mib),
                  fmt(m.max_over_avg_comm), fmt(m.max_recv_mib), f"{m.cut_nets:,}")
    return t


def memory_table(rows: Rows, *, label: str = "Partition") -> Table:
    """Largest per-part parameter, optimizer-state, activation and total memory (MiB), and max/avg memory."""
    t = _table("Memory in MiB, largest over the parts", label, MEMORY_COLUMNS)
    for name, m in rows:
        t.add_row(name, fmt(max(m.part_param_bytes) / MIB), fmt(max(m.part_optimizer_bytes) / MIB),
                  fmt(max(m.part_activation_bytes) / MIB), fmt(m.max_memory_bytes / MIB),
                  fmt(m.max_over_avg_memory))
    return t


def metrics_tables(rows: Rows, *, work_unit: str = "ms", label: str = "Partition",
                   batch_size: int | None = None) -> list[Table]:
    return [work_table(rows, work_unit=work_unit, label=label),
            comm_table(rows, label=label, batch_size=batch_size),
            memory_table(rows, label=label)]


def print_metrics(rows: Rows, *, work_unit: str = "ms", label: str = "Partition", batch_size: int | None = None,
                  console: Console | None = None) -> None:
    console = console or Console()
    for t in metrics_tables(rows, work_unit=work_unit, label=label, batch_size=batch_size):
        console.print(t)


def part_memory_table(m: PartitionMetrics) -> Table:
    """Every part's memory (MiB) by component, its total, and its use of the memory limit when one is set."""
    limit = m.memory_limit_bytes
    title = f"Memory per part in MiB, {m.optimizer}, {m.inflight} batch(es) in flight" + (
        f", limit {fmt(limit / MIB)} MiB" if limit > 0 else "")
    t = _table(title, "Part", ("Params", "Gradients", "Optim. state", "Activations", "Received", "Total", "Use"))
    for q, total in enumerate(m.part_memory_bytes):
        cells = (m.part_param_bytes, m.part_gradient_bytes, m.part_optimizer_bytes, m.part_activation_bytes,
                 m.part_received_bytes)
        use = f"{total / limit:.0%}" + ("" if total <= limit else " [red]over[/]") if limit > 0 else "-"
        t.add_row(str(q), *(fmt(c[q] / MIB) if c else "-" for c in cells), fmt(total / MIB), use)
    return t
