"""Reports of a measured comparison: rich tables, CSV / JSON / Markdown files, loss/accuracy-vs-time PNG curves.

Usage::

    from hgpart.compare.measured_report import measured_tables, print_measured, write_measured
    print_measured(cmp)
    paths = write_measured(cmp, "reports/minivgg_measured")   # report.md, runs.csv, curves.csv, measured.json, PNGs

Tables: per-epoch time (methods x batch sizes, like the thesis's Table 5.15), time to the target training accuracy
(Figure 5.2's measure), images/s, bytes communicated per step, the ratio of each strategy's time to the
reference hypergraph model parallelism (``coarse-async``; > 1 means the hypergraph run was faster) and
utilisation: process CPU cores and, for traced runs, each device's busy % in a few profiled steps. Tables are
built once as :class:`hgpart.compare.report.Table` and rendered to both the terminal and Markdown.
Every file is written atomically.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hgpart.compare.measured import REFERENCE_METHOD, MeasuredComparison, MeasuredRun
from hgpart.compare.report import Table, pyplot_agg, save_png
from hgpart.fileio import atomic_write_text
from hgpart.runtime.strategy import Parallelism, Strategy

__all__ = ["measured_tables", "print_measured", "write_measured", "ratio_rows"]

#: curve styles: solid model parallelism, dashed data parallelism, dotted one device
_LINE_STYLE = {Parallelism.MODEL: "-", Parallelism.DATA: "--", Parallelism.SINGLE: ":"}


def _f(v: float | None, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.{digits}f}"


def _grid(cmp: MeasuredComparison, title: str, cell: Any, caption: str = "") -> Table:
    rows = []
    for m in cmp.methods:
        row = [m]
        for b in cmp.batch_sizes:
            r = cmp.run(m, b)
            row.append("-" if r is None else ("failed" if r.status != "ok" else cell(r)))
        rows.append(row)
    return Table(title, ["Method"] + [f"BS={b}" for b in cmp.batch_sizes], rows, caption)


def ratio_rows(cmp: MeasuredComparison, *, reference: str = REFERENCE_METHOD) -> list[dict[str, Any]]:
    """Other method's time / reference's time per batch size: per epoch and to the target accuracy."""
    out = []
    for b in cmp.batch_sizes:
        ref = cmp.run(reference, b)
        if ref is None or ref.status != "ok":
            continue
        for m in cmp.methods:
            r = cmp.run(m, b)
            if m == reference or r is None or r.status != "ok":
                continue
            epoch = r.epoch_seconds / ref.epoch_seconds if r.epoch_seconds and ref.epoch_seconds else None
            tta = (r.time_to_target_s / ref.time_to_target_s
                   if r.time_to_target_s is not None and ref.time_to_target_s else None)
            out.append({"batch_size": b, "method": m, "reference": reference, "epoch_ratio": epoch,
                        "target_ratio": tta})
    return out


def measured_tables(cmp: MeasuredComparison) -> list[Table]:
    """Every table of the report (the terminal and report.md print exactly these)."""
    k = cmp.k
    tables = [
        _grid(cmp, f"Per-epoch training time (s), K = {k} {cmp.devices} devices ({cmp.images} images/epoch)",
              lambda r: _f(r.epoch_seconds), "mean measured seconds per step x steps per epoch; training only"),
        _grid(cmp, f"Time to {cmp.target:.0%} training accuracy (s) [epochs]",
              lambda r: (f"{_f(r.time_to_target_s, 1)} [{_f(r.epochs_to_target, 2)}]" if r.time_to_target_s is not None
                         else f"not reached ({_f(r.final_accuracy, 3)})"),
              f"accuracy on a fixed subset of {cmp.eval_n} training images, checked at each evaluation point"),
        _grid(cmp, "Throughput (images/s)", lambda r: _f(r.images_per_s, 0)),
        _grid(cmp, "Bytes communicated per step (KiB, excluding the input feed)",
              lambda r: _f((r.comm_bytes_per_step or 0) / 1024, 1) + (" *" if r.bytes_source == "formula" else ""),
              "read from the placed step graph; * = ring all-reduce formula 2(K-1)Pd (collective not in the graph); "
              "async DP: one step = K worker updates"),
        _grid(cmp, "Process CPU cores used during training (of "
              f"{cmp.machine.get('cores_available', '?')})", lambda r: _f(r.cpu_cores, 2),
              "CPU time / wall time of this process (on worker processes the workers' CPU is not included)"),
    ]
    if any(r.device_busy or r.trace_note for r in cmp.runs):
        tables.append(_grid(
            cmp, "Device busy % in traced steps (device 0 / device 1 / ...)",
            lambda r: " / ".join(f"{100 * b:.0f}" for b in r.device_busy) if r.device_busy else "not traced",
            "union of each device's op intervals / traced wall time, from a TensorFlow profiler trace of max(2, K) "
            "extra steps after the timed run; Chrome/Perfetto view: each run's devices_trace.json (runs.csv "
            "trace_path)"
            + ("; logical devices share one thread pool: the figures show how work was spread over the device "
               "labels, not parallel cores" if cmp.devices == "logical" else "")))
    rr = ratio_rows(cmp)
    if rr:
        rows = [[f"{r['method']}", str(r["batch_size"]), _f(r["epoch_ratio"]), _f(r["target_ratio"])] for r in rr]
        tables.append(Table(f"Time of each strategy / time of {REFERENCE_METHOD} (hypergraph MP) at equal K and BS",
                            ["Method", "BS", "per epoch", "to target"], rows, "> 1: hypergraph MP is faster"))
    failed = [r for r in cmp.runs if r.status != "ok"]
    if failed:
        tables.append(Table("Strategies that could not run", ["Method", "BS", "Reason"],
                            [[r.method, str(r.batch_size), r.reason] for r in failed]))
    untraced = [r for r in cmp.runs if r.status == "ok" and not r.device_busy and r.trace_note]
    if untraced:
        tables.append(Table("Runs whose devices could not be traced", ["Method", "BS", "Reason"],
                            [[r.method, str(r.batch_size), r.trace_note] for r in untraced]))
    ran = [r for r in cmp.runs if r.status == "ok" and r.pipeline]
    if ran:
        tables.append(Table(f"How model parallelism's steps ran (--pipeline {cmp.pipeline})",
                            ["Method", "BS", "Steps as"], [[r.method, str(r.batch_size), r.pipeline] for r in ran]))
    notes = {}
    for r in cmp.runs:
        if r.status == "ok" and r.notes and r.method not in notes:
            # a model-parallel note quotes its placement's Comm. Vol, which depends on the batch size
            mp = Strategy.parse(r.method).is_model_parallel
            notes[r.method] = r.notes + (f" (BS={r.batch_size})" if mp else "")
    if notes:
        tables.append(Table("Strategy notes (first batch size)", ["Method", "Notes"],
                            [[m, n] for m, n in notes.items()]))
    return tables


def print_measured(cmp: MeasuredComparison, *, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    console = console or Console()
    for t in measured_tables(cmp):
        rt = RichTable(title=t.title, caption=t.caption or None)
        for h in t.headers:
            rt.add_column(h)
        for row in t.rows:
            rt.add_row(*row)
        console.print(rt)


def _md(t: Table) -> str:
    lines = [f"### {t.title}", "", "| " + " | ".join(t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in t.rows]
    if t.caption:
        lines += ["", f"_{t.caption}_"]
    return "\n".join(lines) + "\n"


def _markdown(cmp: MeasuredComparison, plots: list[str]) -> str:
    m = cmp.machine
    head = [
        f"# Measured comparison: {cmp.model} {'x'.join(map(str, cmp.input_shape))}, K = {cmp.k} ({cmp.devices})", "",
        f"- data: scikit-learn digits ({cmp.images} images, {cmp.num_classes} classes) resized to the input; "
        f"{cmp.epochs:g} epoch(s) per run; same seed ({cmp.seed}), data order and initial weights for every strategy",
        f"- optimizer: {cmp.optimizer}, lr {cmp.lr:g}; batch sizes {cmp.batch_sizes} (global: images per step)",
        f"- placements: compiled on the fly, {cmp.profile}, hypergraph backend {cmp.backend}, layer-wise backend",
        f"- machine: {m.get('cpu', '?')}, {m.get('cores_available', '?')} cores available, "
        f"{m.get('memory_gib', '?')} GiB, Python {m.get('python', '?')}, TensorFlow {m.get('tensorflow', '?')}",
        f"- load average (1/5/15 min) at start {m.get('loadavg_at_start', '?')}, at end "
        f"{m.get('loadavg_at_end', '?')} (shared machine: other processes compete for the cores)",
        f"- total time {cmp.seconds:.0f} s", "",
    ]
    body = [_md(t) for t in measured_tables(cmp)]
    pics = [f"![{p}]({p})" for p in plots]
    return "\n".join(head) + "\n".join(body) + ("\n" + "\n\n".join(pics) + "\n" if pics else "")


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def _run_row(r: MeasuredRun) -> dict[str, Any]:
    return {"method": r.method, "batch_size": r.batch_size, "status": r.status, "reason": r.reason,
            "steps": r.steps, "epochs": r.epochs, "train_seconds": r.train_seconds, "epoch_seconds": r.epoch_seconds,
            "images_per_s": r.images_per_s, "time_to_target_s": r.time_to_target_s,
            "epochs_to_target": r.epochs_to_target, "final_accuracy": r.final_accuracy, "final_loss": r.final_loss,
            "comm_bytes_per_step": r.comm_bytes_per_step, "feed_bytes_per_step": r.feed_bytes_per_step,
            "bytes_source": r.bytes_source, "cpu_cores": r.cpu_cores,
            "slot_busy": ";".join(f"{b:.3f}" for b in r.slot_busy),
            "device_busy": ";".join(f"{b:.3f}" for b in r.device_busy), "trace_path": r.trace_path,
            "trace_note": r.trace_note, "compile_seconds": r.compile_seconds, "pipeline": r.pipeline}


def _plots(cmp: MeasuredComparison, out: Path) -> list[str]:
    plt = pyplot_agg()

    names = []
    for b in cmp.batch_sizes:
        runs = [r for r in cmp.runs if r.batch_size == b and r.status == "ok" and r.curve]
        if not runs:
            continue
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
        colors = plt.get_cmap("tab20").colors
        for r in runs:
            t = [p.wall_s for p in r.curve]
            # solid: model parallelism; dashed: data parallelism; dotted: one device. One colour per method.
            style = _LINE_STYLE[Strategy.parse(r.method).parallelism]
            col = colors[(2 * cmp.methods.index(r.method)) % 20 + (cmp.methods.index(r.method) >= 10)]
            a1.plot(t, [p.loss for p in r.curve], style, marker=".", color=col, label=r.method)
            a2.plot(t, [p.accuracy for p in r.curve], style, marker=".", color=col, label=r.method)
        a2.axhline(cmp.target, color="grey", lw=0.8, ls=":")
        a1.set(xlabel="training wall time (s)", ylabel="loss (eval subset)", title=f"Loss, BS={b}, K={cmp.k}")
        a2.set(xlabel="training wall time (s)", ylabel="training accuracy (eval subset)",
               title=f"Accuracy, BS={b}, K={cmp.k}")
        a2.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        name = f"curves_bs{b}.png"
        save_png(fig, out / name, dpi=100, tight=False)
        names.append(name)
    return names


def write_measured(cmp: MeasuredComparison, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write report.md, runs.csv, curves.csv, ratios.csv, measured.json and curves_bs<B>.png into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pics = _plots(cmp, out) if plots else []
    curves = [{"method": r.method, "batch_size": r.batch_size, **asdict(p)} for r in cmp.runs for p in r.curve]
    paths = [
        atomic_write_text(out / "runs.csv", _csv([_run_row(r) for r in cmp.runs])),
        atomic_write_text(out / "curves.csv", _csv(curves)),
        atomic_write_text(out / "ratios.csv", _csv(ratio_rows(cmp))),
        atomic_write_text(out / "measured.json", json.dumps(cmp.to_dict(), indent=1, default=float)),
        atomic_write_text(out / "report.md", _markdown(cmp, pics)),
    ]
    return paths + [out / p for p in pics]
