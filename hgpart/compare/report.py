"""Reports of a static comparison: rich tables, CSV / JSON / Markdown files, PNG plots.

Usage::

    from hgpart.compare.report import print_report, write_report
    print_report(cmp, images=64000, batch_sizes=[16, 32, 64])
    paths = write_report(cmp, "reports/vgg16_compare", images=64000, batch_sizes=[16, 32, 64])

Tables mirror the thesis (Eserol 2019): per method, a work table (Tables
5.1, 5.3, 5.5, 5.7, 5.9, 5.11) and a communication table (5.2, 5.4, 5.6, 5.8,
5.10, 5.12), with the thesis's value beside ours where it printed one; two
overview tables (Comm. Vol and Max/Avg work, method x N) and the per-epoch
data-parallel vs hypergraph table (Table 5.14). Every table is built once
as plain data (:class:`Table`) and rendered to the terminal and to Markdown
from it, so the files and the screen never disagree. Files are written
atomically; plots use matplotlib's Agg backend and go to files only.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.compare.dataparallel import GIB, DataParallelCost, data_parallel, mp_epoch_bytes
from hgpart.compare.static import StaticComparison, StaticResult
from hgpart.compare.thesis import load_thesis
from hgpart.errors import HgpartError
from hgpart.fileio import atomic_write_bytes, atomic_write_text, write_json
from hgpart.metrics import MIB

__all__ = ["Table", "build_tables", "epoch_rows", "print_report", "write_report", "reference_epsilon", "pyplot_agg",
           "save_png"]


@dataclass
class Table:
    """A titled table of already formatted cells (what both renderers print)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


# ----------------------------------------------------------------- formatting


def _num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return "inf" if math.isinf(v) else "nan"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if 0 < abs(v) < 0.1:
        return f"{v:.2g}"
    return f"{v:,.{digits}f}"


def _ratio(v: float | None) -> str:
    return _num(v, 2)


def _thesis(r: StaticResult, col: str, fmt: Any = _num) -> str:
    cell = r.thesis.get(col)
    return fmt(cell.value) if cell else "-"


def _groups(cmp: StaticComparison) -> list[tuple[str, list[StaticResult]]]:
    out: dict[str, list[StaticResult]] = {}
    for r in cmp.results:
        out.setdefault(r.label, []).append(r)
    return list(out.items())


def reference_epsilon(cmp: StaticComparison) -> float | None:
    """The epsilon the overview and per-epoch tables use: 0.1 (the thesis's default) if run, else the first."""
    if not cmp.epsilons:
        return None
    return next((e for e in cmp.epsilons if abs(e - 0.1) < 1e-12), cmp.epsilons[0])


def _work_unit(cmp: StaticComparison) -> str:
    return cmp.work_unit


# ----------------------------------------------------------------- tables


def build_tables(cmp: StaticComparison, *, images: int = 64000,
                 batch_sizes: Sequence[int] = (16, 32, 64)) -> list[Table]:
    """Every table of the report, in print order."""
    tables = [_overview(cmp, "comm_volume_mib", "Comm. Vol (MiB, forward pass)", _num),
              _overview(cmp, "max_over_avg", "Max/Avg work", _ratio)]
    gaps = _gap_overview(cmp)
    if gaps is not None:
        tables.append(gaps)
    unit = _work_unit(cmp)
    for label, rs in _groups(cmp):
        work_rows, comm_rows = [], []
        for r in rs:
            if r.status != "ok" or r.metrics is None:
                msg = f"{r.status}: {r.reason}"
                work_rows.append([str(r.k), msg] + [""] * 7)
                comm_rows.append([str(r.k), msg] + [""] * 8)
                continue
            m = r.metrics
            work_rows.append([
                str(r.k), _num(m.max_work), _num(m.min_work), _num(m.avg_work), _ratio(m.max_over_min),
                _ratio(m.max_over_avg), _num(m.max_times_n), _thesis(r, "max_over_avg", _ratio),
                f"{r.seconds:.2f}",
            ])
            comm_rows.append([
                str(r.k), _num(m.comm_volume_mib), _num(m.max_comm_mib), _num(m.avg_comm_mib),
                _ratio(m.max_over_avg_comm), _thesis(r, "comm_volume_mib"), _thesis(r, "max_comm_mib"),
                _num(m.max_memory_bytes / GIB, 2), *_bound_cells(r),
            ])
        cites = sorted({c.citation for r in rs for c in r.thesis.values()})
        cap = ("thesis: " + "; ".join(cites)) if cites else ""
        tables.append(Table(f"{label}: computational load balance (work in {unit})",
                            ["N", "Max Work", "Min Work", "Avg. Work", "Max/Min", "Max/Avg", "Max*N",
                             "thesis Max/Avg", "seconds"], work_rows, cap))
        tables.append(Table(f"{label}: communication volume (MiB per forward pass, batch {cmp.batch_size})",
                            ["N", "Comm. Vol", "Max Comm.", "Avg Comm.", "Max/Avg comm", "thesis Comm. Vol",
                             "thesis Max Comm.", "max mem/part GiB", "lower bound", "gap"], comm_rows, cap))
    tables.append(_epoch_table(cmp, images=images, batch_sizes=batch_sizes))
    return tables


def _overview(cmp: StaticComparison, col: str, what: str, fmt: Any) -> Table:
    ks = cmp.ks
    rows = []
    for label, rs in _groups(cmp):
        by_k = {r.k: r for r in rs}
        row = [label]
        for k in ks:
            r = by_k.get(k)
            if r is None:
                row.append("")
            elif r.status != "ok" or r.metrics is None:
                row.append("n/p" if r.status == "not possible" else r.status)
            else:
                cell = fmt(r.metrics.scalar(col))
                if col in r.thesis:
                    cell += f" ({fmt(r.thesis[col].value)})"
                row.append(cell)
        rows.append(row)
    cap = "ours (thesis, Eserol 2019, where printed); n/p = not possible" if cmp.thesis_applies else \
        "n/p = not possible; the thesis's numbers apply only to VGG16 224x224x3 batch 32"
    return Table(f"{what} by method and N", ["method"] + [f"N={k}" for k in ks], rows, cap)


def _bound_cells(r: StaticResult) -> list[str]:
    """Proven lower bound (MiB) and gap of a coarse result, "-" where none is proven."""
    bound, gap = _proven(r)
    if bound is None:
        return ["-", "-"]
    return [_num(bound / MIB), "inf" if gap is None else f"{gap:.1%}"]


def _proven(r: StaticResult) -> tuple[float | None, float | None]:
    """(proven lower bound in bytes, finite gap) of a result; None where nothing is proven or the gap is infinite."""
    c = r.certificate
    if c is None or c.status != "ok" or c.lower_bound_bytes is None:
        return None, None
    gap = None if c.gap is None or math.isinf(c.gap) else c.gap
    return c.lower_bound_bytes, gap


def _gap_overview(cmp: StaticComparison) -> Table | None:
    """Optimality gap of every coarse result (proven lower bound of the exact count program), method x N."""
    coarse = [(label, rs) for label, rs in _groups(cmp) if rs and rs[0].grain == "coarse"]
    if not any(r.certificate is not None and r.certificate.status == "ok" for _, rs in coarse for r in rs):
        return None
    rows = []
    for label, rs in coarse:
        by_k = {r.k: r for r in rs}
        rows.append([label] + [_bound_cells(by_k[k])[1] if k in by_k else "" for k in cmp.ks])
    cap = ("volume / proven lower bound - 1, the bound taken at the imbalance each result reached "
           "(exact count program; '-' = not proven, e.g. not interchangeable filters)")
    return Table("Coarse grain: gap to the proven optimum by method and N", ["method"] + [f"N={k}" for k in cmp.ks],
                 rows, cap)


def epoch_rows(cmp: StaticComparison, *, images: int, batch_sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Per-epoch communication of data parallelism vs hypergraph partitioning (Table 5.14), as records."""
    eps = reference_epsilon(cmp)
    t514: dict[tuple[int, int], dict[str, Any]] = {}
    if cmp.thesis_applies:
        tab = load_thesis()["tables"]["5.14"]
        if images == tab["images"]:
            t514 = {(r["n"], r["batch_size"]): r for r in tab["rows"]}
    rows: list[dict[str, Any]] = []
    for k in cmp.ks:
        if k < 2:
            continue
        for bs in batch_sizes:
            row: dict[str, Any] = {"n": k, "batch_size": bs, "images": images}
            try:
                dp: DataParallelCost | None = data_parallel(
                    params=cmp.params, n=k, batch_size=bs, images=images, activation_bytes=cmp.activation_bytes,
                    activation_batch=cmp.batch_size)
            except HgpartError as exc:
                dp = None
                row["data_parallel_note"] = f"n/p: {exc.what}"
            if dp is not None:
                row.update(dp_epoch_gib=dp.epoch_gib, dp_step_mib=dp.step_mib, dp_memory_gib=dp.memory_bytes / GIB)
            for grain in cmp.grains:
                r = cmp.find("hypergraph", grain, k, eps)
                if r is None or r.status != "ok" or r.metrics is None:
                    continue
                mp = mp_epoch_bytes(r.metrics.comm_volume_mib * MIB, at_batch=cmp.batch_size, batch_size=bs,
                                    images=images)
                row[f"hp_{grain}_epoch_gib"] = mp / GIB
                if dp is not None and dp.epoch_bytes > 0:
                    row[f"hp_{grain}_reduction_pct"] = 100.0 * (1.0 - mp / dp.epoch_bytes)
            th = t514.get((k, bs))
            if th:
                row.update(thesis_dp_gib=th["data_parallelism_gb"], thesis_hp_gib=th["hypergraph_gb"],
                           thesis_reduction_pct=th["reduction_pct"], thesis_citation="Eserol 2019, Table 5.14")
            rows.append(row)
    return rows


def _epoch_table(cmp: StaticComparison, *, images: int, batch_sizes: Sequence[int]) -> Table:
    rows = epoch_rows(cmp, images=images, batch_sizes=batch_sizes)
    grains = cmp.grains if "hypergraph" in cmp.methods else []
    headers = ["N, BS", "DP GiB/epoch", "DP mem/device GiB"]
    for g in grains:
        headers += [f"HP {g} GiB/epoch", f"{g} reduce %"]
    headers += ["thesis DP", "thesis HP", "thesis reduce %"]
    out = []
    for r in rows:
        line = [f"N={r['n']}, BS={r['batch_size']}", _num(r.get("dp_epoch_gib")) if "dp_epoch_gib" in r else
                "n/p (BS < N)", _num(r.get("dp_memory_gib"), 2)]
        for g in grains:
            line += [_num(r.get(f"hp_{g}_epoch_gib")), _num(r.get(f"hp_{g}_reduction_pct"))]
        line += [_num(r.get("thesis_dp_gib")), _num(r.get("thesis_hp_gib")), _num(r.get("thesis_reduction_pct"))]
        out.append(line)
    avg = ["Average", "", ""] + ["" for _ in range(2 * len(grains))] + ["", "", ""]
    for i, g in enumerate(grains):
        vals = [r[f"hp_{g}_reduction_pct"] for r in rows if f"hp_{g}_reduction_pct" in r]
        if vals:
            avg[3 + 2 * i + 1] = _num(float(np.mean(vals)))
    th = [r["thesis_reduction_pct"] for r in rows if "thesis_reduction_pct" in r]
    if th:
        avg[-1] = _num(float(np.mean(th)))
    if any(avg[1:]):
        out.append(avg)
    eps = reference_epsilon(cmp)
    cap = (f"{images:,} images; data parallelism 2(N-1)Pd per step, P = {cmp.params:,}, d = 4, global batch BS "
           f"split over N replicas; hypergraph = Comm. Vol at eps={eps} x 2 (forward+backward) x steps; GiB = 2**30 "
           "bytes (the thesis prints them as GB)")
    return Table("Per-epoch communication: data parallelism vs hypergraph partitioning (Table 5.14)", headers, out, cap)


# ----------------------------------------------------------------- rendering


def print_report(cmp: StaticComparison, *, images: int = 64000, batch_sizes: Sequence[int] = (16, 32, 64),
                 console: Any = None, width: int | None = None) -> None:
    """Print every table on the terminal with rich (``width`` forces a width, e.g. when piped to a file)."""
    from rich.console import Console
    from rich.table import Table as RichTable

    con = console or Console(width=width)
    for t in build_tables(cmp, images=images, batch_sizes=batch_sizes):
        rt = RichTable(title=t.title, caption=t.caption or None, title_justify="left", show_lines=False)
        for i, h in enumerate(t.headers):
            rt.add_column(h, justify="left" if i == 0 else "right", overflow="fold")
        for row in t.rows:
            rt.add_row(*row)
        con.print(rt)
    con.print(f"wall time of the comparison: {cmp.wall_seconds:.1f} s ({len(cmp.results)} grid cells)")


def _markdown(cmp: StaticComparison, tables: list[Table]) -> str:
    buf = io.StringIO()
    buf.write(f"# Static comparison: {cmp.model} {'x'.join(map(str, cmp.input_shape))}, batch {cmp.batch_size}\n\n")
    buf.write(f"- profile: {cmp.profile_mode} ({cmp.profile_source or 'in memory'}), work unit {cmp.work_unit}, "
              f"fingerprint {cmp.fingerprint}\n")
    buf.write(f"- hypergraph backend: {cmp.backend}" + (f" preset {cmp.preset}" if cmp.preset else "") +
              f", seed {cmp.seed}, epsilons {cmp.epsilons}\n")
    for g, info in cmp.hypergraphs.items():
        buf.write(f"- {g} grain: {info['vertices']:,} vertices, {info['nets']:,} nets, {info['pins']:,} pins\n")
    buf.write(f"- machine: {cmp.machine.get('cpu', '?')}, {cmp.machine.get('usable_cpus', '?')} usable cores, "
              f"{cmp.machine.get('memory_gib', '?')} GiB\n")
    buf.write(f"- wall time of the whole comparison: {cmp.wall_seconds:.1f} s\n")
    if cmp.thesis_applies:
        buf.write("- thesis values: Eserol (2019), Tables 5.1-5.14 and Appendix A, as printed (PaToH, the thesis's "
                  "own profile; its work unit differs from ours, compare ratios)\n")
    buf.write("\n")
    for t in tables:
        buf.write(f"## {t.title}\n\n")
        buf.write("| " + " | ".join(t.headers) + " |\n")
        buf.write("|" + "|".join(["---"] + ["---:"] * (len(t.headers) - 1)) + "|\n")
        for row in t.rows:
            buf.write("| " + " | ".join(c.replace("|", "/") for c in row) + " |\n")
        if t.caption:
            buf.write(f"\n_{t.caption}_\n")
        buf.write("\n")
    return buf.getvalue()


def _csv(rows: list[dict[str, Any]]) -> str:
    keys: list[str] = []
    for r in rows:
        for key in r:
            if key not in keys:
                keys.append(key)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def result_rows(cmp: StaticComparison) -> list[dict[str, Any]]:
    """One flat record per grid cell (the CSV)."""
    scalar = ("max_work", "min_work", "avg_work", "max_over_min", "max_over_avg", "max_times_n", "comm_volume_mib",
              "max_comm_mib", "avg_comm_mib", "max_over_avg_comm", "max_recv_mib", "cut_nets", "max_memory_bytes",
              "max_over_avg_memory")
    rows = []
    for r in cmp.results:
        d: dict[str, Any] = {"model": cmp.model, "method": r.method, "grain": r.grain, "label": r.label, "k": r.k,
                             "epsilon": "" if r.epsilon is None else r.epsilon, "status": r.status,
                             "reason": r.reason, "backend": r.backend, "seconds": round(r.seconds, 4)}
        for key in scalar:
            d[key] = "" if r.metrics is None else getattr(r.metrics, key)
        for key in ("max_over_avg", "comm_volume_mib", "max_comm_mib", "avg_comm_mib", "max_work"):
            cell = r.thesis.get(key)
            d[f"thesis_{key}"] = "" if cell is None else cell.value
        d["thesis_citation"] = "; ".join(sorted({c.citation for c in r.thesis.values()}))
        bound, gap = _proven(r)
        d["lower_bound_mib"] = "" if bound is None else bound / MIB
        d["gap"] = "" if gap is None else gap
        d["bound_status"] = "" if r.certificate is None else r.certificate.status
        d["placement"] = r.placement or ""
        rows.append(d)
    return rows


def write_report(cmp: StaticComparison, out_dir: str | Path, *, images: int = 64000,
                 batch_sizes: Sequence[int] = (16, 32, 64), plots: bool = True) -> dict[str, Path]:
    """Write results.csv, epoch.csv, comparison.json, report.md and the PNG plots into ``out_dir``."""
    out = Path(out_dir)
    tables = build_tables(cmp, images=images, batch_sizes=batch_sizes)
    epochs = epoch_rows(cmp, images=images, batch_sizes=batch_sizes)
    paths = {
        "csv": atomic_write_text(out / "results.csv", _csv(result_rows(cmp))),
        "epoch_csv": atomic_write_text(out / "epoch.csv", _csv(epochs)),
        "json": write_json(out / "comparison.json", {**cmp.to_dict(), "epoch": epochs, "images": images,
                                                     "batch_sizes": list(batch_sizes)}),
        "markdown": atomic_write_text(out / "report.md", _markdown(cmp, tables)),
    }
    if plots:
        paths.update(_plots(cmp, out))
    return paths


# ----------------------------------------------------------------- plots


def pyplot_agg() -> Any:
    """matplotlib.pyplot on the Agg backend: plots are written to files, never shown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: Path, *, dpi: int = 110, tight: bool = True) -> Path:
    """Write ``fig`` as a PNG atomically and close it (also when writing fails)."""
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
        return atomic_write_bytes(path, buf.getvalue())
    finally:
        pyplot_agg().close(fig)


def _series(cmp: StaticComparison, col: str) -> list[tuple[str, list[int], list[float], list[float | None]]]:
    out = []
    for label, rs in _groups(cmp):
        ok = [r for r in rs if r.status == "ok" and r.metrics is not None]
        if ok:
            out.append((label, [r.k for r in ok], [r.metrics.scalar(col) for r in ok if r.metrics is not None],
                        [r.thesis[col].value if col in r.thesis else None for r in ok]))
    return out


def _n_axis(ax: Any, ks: Sequence[int]) -> None:
    """Log2 N axis labelled with the N values themselves."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(ks)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())


def _line_plot(cmp: StaticComparison, col: str, ylabel: str, title: str, path: Path, *, logy: bool) -> Path:
    plt = pyplot_agg()

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, ks, ys, th) in enumerate(_series(cmp, col)):
        color = f"C{i % 10}"
        ax.plot(ks, ys, marker="o", color=color, label=label)
        tk = [k for k, t in zip(ks, th, strict=True) if t is not None]
        tv = [t for t in th if t is not None]
        if tv:
            ax.plot(tk, tv, marker="x", linestyle="--", color=color, alpha=0.6, label=f"{label} (thesis)")
    _n_axis(ax, cmp.ks)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("N (parts)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save_png(fig, path)


def _memory_plot(cmp: StaticComparison, path: Path) -> Path:
    plt = pyplot_agg()

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, ks, ys, _) in enumerate(_series(cmp, "max_memory_bytes")):
        ax.plot(ks, [y / GIB for y in ys], marker="o", color=f"C{i % 10}", label=f"{label} (max part)")
    dp_k, dp_m = [], []
    for k in cmp.ks:
        if 2 <= k <= cmp.batch_size:
            dp = data_parallel(params=cmp.params, n=k, batch_size=cmp.batch_size, images=1,
                               activation_bytes=cmp.activation_bytes, activation_batch=cmp.batch_size)
            dp_k.append(k)
            dp_m.append(dp.memory_bytes / GIB)
    if dp_k:
        ax.plot(dp_k, dp_m, marker="s", color="black", linestyle=":", label="data parallelism (per device)")
    _n_axis(ax, cmp.ks)
    ax.set_yscale("log")
    ax.set_xlabel("N (parts / devices)")
    ax.set_ylabel("GiB (params + Adam state + activations)")
    ax.set_title(f"Per-part memory, {cmp.model}, batch {cmp.batch_size}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save_png(fig, path)


def heatmap_choice(cmp: StaticComparison) -> StaticResult | None:
    """The placement shown in the heat-map: coarse hypergraph at the largest N <= 16, else any result."""
    eps = reference_epsilon(cmp)
    ok = [r for r in cmp.results if r.status == "ok" and r.parts is not None and r.k > 1]
    for pref in (lambda r: r.method == "hypergraph" and r.grain == "coarse" and r.epsilon == eps,
                 lambda r: r.method == "hypergraph", lambda r: True):
        cand = [r for r in ok if pref(r)]
        if cand:
            small = [r for r in cand if r.k <= 16]
            return max(small, key=lambda r: r.k) if small else min(cand, key=lambda r: r.k)
    return None


def layer_part_shares(cmp: StaticComparison, r: StaticResult) -> tuple[list[str], np.ndarray]:
    """(vertex-layer names, share of each layer's work on each part) for one placement."""
    from hgpart.partitioners._units import unit_names, vertex_units

    hg = cmp.hypergraph_objects[r.grain]
    units = vertex_units(hg)
    names = unit_names(hg)
    n, k = len(names), r.k
    w = np.bincount(units * k + np.asarray(r.parts, dtype=np.int64), weights=hg.vertex_weight,
                    minlength=n * k).reshape(n, k)
    tot = w.sum(axis=1, keepdims=True)
    return names, np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)


def _heatmap(cmp: StaticComparison, r: StaticResult, path: Path) -> Path:
    plt = pyplot_agg()

    names, share = layer_part_shares(cmp, r)
    fig, ax = plt.subplots(figsize=(max(5, 0.35 * r.k + 3), max(4, 0.28 * len(names) + 1.5)))
    im = ax.imshow(share, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=7)
    step = max(1, r.k // 16)
    ax.set_xticks(range(0, r.k, step))
    ax.set_xlabel("part")
    ax.set_title(f"{r.label}, N={r.k}: share of each layer's work per part", fontsize=9)
    fig.colorbar(im, ax=ax, label="share of layer work")
    return save_png(fig, path)


def _part_memory_plot(r: StaticResult, path: Path) -> Path:
    """Stacked per-part memory (parameters, optimizer state, activations) of one placement."""
    plt = pyplot_agg()

    m = r.metrics
    parts = np.arange(r.k)
    fig, ax = plt.subplots(figsize=(max(6, 0.3 * r.k + 3), 4.5))
    bottom = np.zeros(r.k)
    series = ((m.part_param_bytes, "parameters"), (m.part_optimizer_bytes, "optimizer state (Adam)"),
              (m.part_activation_bytes, "activations")) if m is not None else ()
    for values, name in series:
        vals = np.asarray(values, dtype=float) / GIB
        ax.bar(parts, vals, bottom=bottom, label=name)
        bottom += vals
    ax.set_xlabel("part")
    ax.set_ylabel("GiB")
    ax.set_title(f"{r.label}, N={r.k}: memory per part", fontsize=9)
    ax.legend(fontsize=8)
    return save_png(fig, path)


def _plots(cmp: StaticComparison, out: Path) -> dict[str, Path]:
    paths = {
        "plot_comm": _line_plot(cmp, "comm_volume_mib", "Comm. Vol (MiB per forward pass)",
                                f"Communication volume vs N, {cmp.model}, batch {cmp.batch_size}",
                                out / "comm_volume.png", logy=True),
        "plot_balance": _line_plot(cmp, "max_over_avg", "Max/Avg work", f"Load imbalance vs N, {cmp.model}",
                                   out / "max_over_avg_work.png", logy=False),
        "plot_memory": _memory_plot(cmp, out / "memory.png"),
    }
    r = heatmap_choice(cmp)
    if r is not None:
        paths["plot_heatmap"] = _heatmap(cmp, r, out / "heatmap.png")
        paths["plot_part_memory"] = _part_memory_plot(r, out / "part_memory.png")
    return paths


def dumps(cmp: StaticComparison) -> str:
    """The comparison as JSON text (for tests and piping)."""
    return json.dumps(cmp.to_dict())
