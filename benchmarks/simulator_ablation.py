"""The measured runs of a simulator validation, re-simulated with one rule of the simulator changed at a time.

Run (from the repository root)::

    python benchmarks/simulator_ablation.py benchmarks/results/simulator_validation/2026-11-27-epyc
    python benchmarks/simulator_ablation.py OUT --micro-batches-only   # that variant, transfers not holding devices
    python benchmarks/simulator_ablation.py OUT --per-tensor-us 55     # a folder calibrated before per_tensor_us


Reads ``OUT/measured/*.json``, ``OUT/placements/`` and ``OUT/cluster_this-machine.json`` as
``benchmarks/simulator_validation.py --skip-measure`` does, and prints the median and worst absolute error of:

* ``this simulator``: what ``report.md`` says;
* ``without the whole-step floor``: a profile's layers used as measured even where they add up to less than its
  whole step (:func:`hgpart.simulate.costs.step_floor` set to 1);
* ``model parallelism as graph``: every model-parallel run simulated as one function per step, whatever ran;
* ``async data parallelism taking turns``: the async data-parallel workers' calls run one at a time
  (``AsyncDataParallel.serial``, the simulator's rule until 2026-11-29) instead of overlapping; its rows are printed
  one by one;
* ``async data parallelism, its sends and updates taking turns``: the calls overlap, but each pull, push and
  parameter update of an async data-parallel worker also holds the client, so only the workers' forward and
  backward overlap other calls (a rule between the two above); its rows are printed one by one;
* ``compiled without the 1F1B gate``: the compiled pipeline's steps overlap as far as their data allow, without
  the runtime's :class:`~hgpart.runtime.partitioned.CrossGate` (a part's cross-part read waits for its previous
  backward); its compiled async rows are printed one by one;
* ``without the measured step calls``: every call costs ``call_overhead_us``, whatever it feeds and spans
  (the cluster file's ``device.step_calls`` ignored); the single device's and data parallelism's rows are printed;
* ``without the client's CPU``: no call pays the client's measured CPU time on the workers' cores (the cluster
  file's ``device.client_cpu`` ignored, the rule before 2026-11-29 night); the single device's and data
  parallelism's rows are printed;
* ``without the measured all-reduce``: sync data parallelism's all-reduce simulated as the ring's transfers
  (the link's ``allreduce`` ignored); its rows are printed;
* ``layers brought down to the whole step``: where a profile's layers add up to more than its own whole step
  (less the update), the excess taken off them in equal shares, none below zero (:func:`_down_to_step`: the
  profiler's fixed cost of timing a layer alone, which one graph of the whole step does not pay); today the
  simulator keeps them. Once for every strategy, once for the layer-wise placements only; the layer-wise rows
  are printed;
* ``every part pays a layer's fixed cost``: a layer's time over the profiles' batch sizes, ``a + b x B`` by least
  squares (:func:`_fixed_costs`), has a fixed part ``a`` that one call of the layer pays whatever its size. Today
  a part that runs a share of a layer's filters (coarse) or of its filter x channel pairs (fine) is charged that
  share of the layer's time, fixed part included; here each such part pays ``a`` in full and its share of the
  rest, since the runtime runs every part's piece as an op of its own. The coarse and fine rows are printed.
* ``one op at a time per worker``: each model-parallel run's workers run one task at a time, in the order they
  became ready, whatever the cluster file's ``device.ops_share_cores`` (the simulator's rule before 2026-11-30). With
  it, a worker runs as many ready tasks at once as the runtime gives it inter-op threads
  (:func:`hgpart.placement.inter_op_threads`), each at its share of the core (processor sharing), as a traced
  worker runs several ops at once (``benchmarks/results/trace_vs_simulated/``). The model-parallel rows are printed;
* ``sync model parallelism's layers brought down to the whole step``: as above, for the sync model-parallel runs
  only, since a worker traced there spent less than the layers' sum on two micro-batches at once;
* ``no fresh pieces``: the compiled async pipeline's pieces on the loss part read the weights the last step
  updated (:func:`hgpart.placement.fresh_pieces`), so their forward waits for the last step's backward of the same
  piece; here it does not (the simulator's rule before 2026-11-30). The async model-parallel rows are printed;
* ``a layer's excess over the whole step as a wait that holds no core``: in each model-parallel run, the layers
  brought down to the whole step (as above), and every piece of a layer on a part waits, before it computes, for
  that layer's shaved excess in full, without holding its device (:class:`_WaitingEngine`): the fixed cost of an
  op as a wait that other work may overlap, which a device running one op at a time pays in full. The
  model-parallel rows are printed;
* ``batches and micro-batches sharing a worker's core``: on a worker whose cores its ready tasks share
  (``device.ops_share_cores``), the ops of different micro-batches of a sync step, or of different batches in
  flight, run at once at their share of the core (the simulator's rule before 2026-12-03); with the rule, one
  (micro-)batch's ops share the core and another's wait for them (``Engine.one_flow``). The model-parallel rows are
  printed;
* ``without the split cost``: no placement is charged the cost of its split op structure that ``hgpart
  calibrate-split`` measured (the cluster file's ``device.split_costs`` ignored, the rule before 2026-12-04); the
  model-parallel rows are printed;
* ``without the call cost``: no device pays, per call of the step, what ``hgpart calibrate-split``'s unsplit step
  of the model measured beyond its layers and update (:func:`hgpart.simulate.costs.worker_call_cost` ignored, the
  rule before 2026-12-04 evening); every strategy's rows are printed;
* ``compiled calls of 64 steps``: every compiled run simulated with calls of
  :data:`hgpart.placement.STEPS_PER_CALL` steps, not the mean its stretches made
  (:func:`simulator_validation.steps_per_call`, the rule before 2026-12-06); the compiled rows are printed;
* ``the call cost from model-parallel runs' batches only``: the step-call cost read only from the unsplit steps
  timed at the batch sizes of async model-parallel runs, as the validation timed them before 2026-12-06 (none for
  vgg16, none at a data-parallel replica's own batch); the single device's and data parallelism's rows are printed;
* ``sync micro-batches at the runtime's measured cost``: a sync model-parallel run's micro-batches of B / n are
  charged what ``hgpart calibrate-split``'s unsplit step measured micro-batching to cost, not their profile at
  B / n: the layers at B plus the unsplit step at n micro-batches less the one at one (:func:`_micro_factor`; on
  minires at 16 on 2026-12-06 the runtime's step of two micro-batches of 8 took 15.4 ms against 15.2 in one, where
  the profile at 8 costs 1.38 times its per-sample time at 16). A rule tried on 2026-12-06 for minires's
  layer-wise sync rows, predicted too slow, and not adopted; the sync model-parallel rows are printed. With
  ``--micro-batches-only``, only this simulator, that variant, transfers that do not hold the devices
  (``holds_devices`` false: the simulated sends hold both devices 10-14 ms a step where minires's traced sends span
  less, ``results/measurement_noise/2026-12-06/traces/``) and both together are printed;
* ``async data-parallel calls not waiting for the client's work``: the client's CPU work of each async
  data-parallel worker's call is charged on a core and takes turns on the client's interpreter, but the call does
  not wait for it; its rows are printed;
* ``the client's work of two calls at once``: the client's work of the async data-parallel workers' calls does not
  hold the client's interpreter, so two step threads' work runs at once on two cores; its rows are printed;
* ``each further tensor paying the latency``: an async data-parallel pull or push pays the link's latency for every
  tensor it moves, the link's measured ``per_tensor_us`` ignored (the rule before 2026-12-06 evening); its rows
  are printed;
* ``8 jobs of async data parallelism``: async data parallelism simulated for as few jobs as the other strategies
  (8 on two workers), not :data:`hgpart.simulate.run.ASYNC_DP_JOBS` (the rule before 2026-12-06 evening); its rows
  are printed.

``--per-tensor-us X``, for a folder calibrated before ``hgpart calibrate`` measured ``per_tensor_us``: prints (and
does not write) this simulator with the link's per-tensor cost taken as X microseconds, the simulator before
2026-12-06 evening (every tensor paying the latency, 8 jobs of async data parallelism), and each of those two
changes alone.

Writes ``OUT/ablation.txt`` (with ``--micro-batches-only``, only prints). Nothing is measured; no figure of the
simulator is changed but the one named.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import simulator_validation as sv  # noqa: E402 - the benchmark next to this one

from hgpart import cluster as cluster_mod  # noqa: E402
from hgpart.cluster import DeviceSpec, SplitCost, load_cluster  # noqa: E402
from hgpart.placement import STEPS_PER_CALL  # noqa: E402
from hgpart.profile import Profile  # noqa: E402
from hgpart.simulate import costs, mpgraph, workloads  # noqa: E402
from hgpart.simulate import run as simrun  # noqa: E402
from hgpart.simulate.engine import Engine, Task, TaskKind  # noqa: E402


def _summary(rows: list[dict[str, Any]], label: str) -> str:
    e = [abs(r["error"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["error"]))
    by = ", ".join(f"{m} {100 * statistics.median(x):.1f} / {100 * max(x):.1f} %"
                   for m in sorted({r["model"] for r in rows})
                   for x in [[abs(r["error"]) for r in rows if r["model"] == m]])
    return (f"{label}: {len(rows)} rows, median {100 * statistics.median(e):.1f} %, worst {100 * max(e):.1f} % "
            f"({worst['model']} {worst['strategy']} B={worst['batch_size']}); median / worst by model: {by}")


def _rows(rows: list[dict[str, Any]], keep: Callable[[dict[str, Any]], bool]) -> list[str]:
    return [f"  {r['model']} {r['strategy']} B={r['batch_size']}: measured {r['measured_ips']:.1f}, predicted "
            f"{r['predicted_ips']:.1f} ({100 * r['error']:+.1f} %)" for r in rows if keep(r)]


class _OnClient:
    """A cluster's devices whose every transfer also holds the client."""

    def __init__(self, where: Any) -> None:
        self.where = where

    def transfer(self, src: int, dst: int, nbytes: float) -> tuple[float, tuple[str, ...]]:
        seconds, ports = self.where.transfer(src, dst, nbytes)
        return seconds, (*ports, workloads.CLIENT)

    def tensor_seconds(self, src: int, dst: int) -> float:
        return float(self.where.tensor_seconds(src, dst))

    def compute(self, d: int) -> str:
        return str(self.where.compute(d))


_REAL_SEND = workloads.AsyncDataParallel._send


def _send_on_client(self: Any, *args: Any) -> int:
    """An async data-parallel pull or push that also holds the client."""
    return int(_REAL_SEND(dataclasses.replace(self, where=_OnClient(self.where)), *args))


def _update_on_client(eng: Any, name: str, seconds: float, dev: int, res: str, job: int, deps: Any) -> int:
    """A parameter update on its owner's device that also holds the client."""
    return int(eng.add(Task(name, TaskKind.UPDATE, seconds, (res, workloads.CLIENT), device=dev, batch=job,
                            deps=tuple(deps))))


def _shave(values: dict[Any, float], excess: float) -> dict[Any, float]:
    """``values`` less ``excess`` in total: equal shares of what is left, none below zero."""
    out = dict(values)
    live = [k for k, v in out.items() if v > 0]
    while excess > 1e-12 and live:
        cut = min(excess / len(live), min(out[k] for k in live))
        for k in live:
            out[k] -= cut
        excess -= cut * len(live)
        live = [k for k in live if out[k] > 1e-12]
    return out


def _down_to_step(real: Callable[..., Any]) -> Callable[..., Any]:
    """``costs.layer_times`` with a measured profile's layers brought down to its whole step where they exceed it."""

    def layer_times(graph: Any, device: Any, *, batch: int) -> Any:
        t = real(graph, device, batch=batch)
        if device.profiles is None:
            return t
        prof = costs._matching_profile(graph, device.profiles, batch, cores=device.profile_cores)
        target = costs.step_without_update_ms(prof, device) if prof is not None else None
        if prof is None or target is None or prof.layer_sum_ms <= target:
            return t
        ms = _shave({**{("f", c.name): c.forward_ms for c in prof.layers},
                     **{("b", c.name): c.backward_ms for c in prof.layers}}, prof.layer_sum_ms - target)
        scale = batch / prof.batch_size / 1000.0
        return costs.LayerTimes({c.name: ms[("f", c.name)] * scale for c in prof.layers},
                                {c.name: ms[("b", c.name)] * scale for c in prof.layers}, batch,
                                t.source + ", brought down to its whole step", t.update)

    return layer_times


def _fixed_costs(folder: Path) -> dict[tuple[str, tuple[int, ...]], dict[str, tuple[float, float]]]:
    """Per (model, input) with measured profiles at two or more batch sizes in ``folder``: per layer, the fixed
    seconds of its forward and backward, the intercepts of least-squares lines through its times over the batch
    sizes, each clipped to [0, the time at the smallest batch]."""
    by: dict[tuple[str, tuple[int, ...]], list[Profile]] = {}
    for prof in costs.measured_profiles(folder):
        by.setdefault((prof.model, tuple(prof.input_shape)), []).append(prof)
    out: dict[tuple[str, tuple[int, ...]], dict[str, tuple[float, float]]] = {}
    for key, profs in by.items():
        if len({p.batch_size for p in profs}) < 2:
            continue
        profs.sort(key=lambda p: p.batch_size)
        b = np.array([p.batch_size for p in profs], dtype=float)
        fixed = {}
        for i, layer in enumerate(profs[0].layers):
            pair = []
            for attr in ("forward_ms", "backward_ms"):
                t = np.array([getattr(p.layers[i], attr) for p in profs]) / 1000.0
                a = float(np.polyfit(b, t, 1)[1])
                pair.append(min(max(a, 0.0), float(t[0])))
            fixed[layer.name] = (pair[0], pair[1])
        out[key] = fixed
    return out


def _parts_pay_fixed(real: Callable[..., Any], fixed: dict[tuple[str, tuple[int, ...]], dict[str, tuple[float, float]]]
                     ) -> Callable[..., Any]:
    """``mp_template`` with every part that runs a piece of a layer paying the layer's whole fixed cost."""

    def mp_template(placement: Any, times: Any, *, micro_batch: int) -> Any:
        tpl = real(placement, times, micro_batch=micro_batch)
        graph = placement.graph
        layer_fixed = fixed.get((graph.name, tuple(graph.input_shape)))
        if not layer_fixed:
            return tpl
        totals: dict[str, list[float]] = {}
        for u in tpl.units:
            totals.setdefault(u.label, [0.0, 0.0])
            totals[u.label][0] += u.forward
            totals[u.label][1] += u.backward
        # a layer's fixed cost rides on its largest block (fine layers have a pairs block and a reduction block)
        carrier: dict[str, str] = {}
        for label, (f, _) in totals.items():
            layer = label.split("/")[0]
            if layer not in carrier or f > totals[carrier[layer]][0]:
                carrier[layer] = label
        units = []
        for u in tpl.units:
            layer = u.label.split("/")[0]
            if u.is_input or carrier.get(layer) != u.label or layer not in layer_fixed:
                units.append(u)
                continue
            (fa, ba), (ft, bt) = layer_fixed[layer], totals[u.label]
            fwd = u.forward + fa * (1.0 - u.forward / ft) if ft > 0 else u.forward
            bwd = u.backward + ba * (1.0 - u.backward / bt) if bt > 0 else u.backward
            units.append(dataclasses.replace(u, forward=fwd, backward=bwd))
        return dataclasses.replace(tpl, units=units)
    return mp_template


def _one_op(real: Callable[..., float]) -> Callable[..., float]:
    """``simulate_run`` with every worker running one task at a time, whatever the cluster file's
    ``ops_share_cores``."""

    def sim(run: dict[str, Any], placement: str, cl: Any, k: int) -> float:
        with mock.patch.object(simrun, "Engine", lambda shared=None, one_flow=False: Engine()):
            return real(run, placement, cl, k)

    return sim


def _sync_lowered(real: Callable[..., float], lowered: Callable[..., Any]) -> Callable[..., float]:
    """``simulate_run`` with the sync model-parallel runs' layer times from ``lowered``."""

    def sim(run: dict[str, Any], placement: str, cl: Any, k: int) -> float:
        if run["method"] in sv.BASELINES or run["method"].endswith("-async"):
            return real(run, placement, cl, k)
        with mock.patch.object(costs, "layer_times", lowered), mock.patch.object(simrun, "layer_times", lowered):
            return real(run, placement, cl, k)

    return sim


@dataclasses.dataclass
class _WaitingEngine(Engine):
    """An engine in which every forward or backward piece of a layer first waits ``excess[(direction, layer)]``
    seconds, holding nothing (``_excess_as_wait``)."""

    excess: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)

    def add(self, task: Task) -> int:
        if task.kind is TaskKind.COMPUTE and task.name[:4] in ("fwd ", "bwd "):
            wait = self.excess.get((task.name[:3], task.name[4:].split(" ")[0].split("/")[0]), 0.0)
            if wait > 0:
                task.deps = (super().add(Task(f"{task.name} fixed", TaskKind.MARK, wait, (), batch=task.batch,
                                              deps=task.deps)),)
        return super().add(task)


def _excess_as_wait(real: Callable[..., float], lowered: Callable[..., Any]) -> Callable[..., float]:
    """``simulate_run`` with each model-parallel run's layers from ``lowered`` and what it shaved off each layer as a
    wait before every piece of that layer (:class:`_WaitingEngine`)."""

    excess: dict[tuple[str, str], float] = {}  # of the layer times the simulation asked for last

    def layer_times(graph: Any, device: Any, *, batch: int) -> Any:
        whole, low = costs.layer_times(graph, device, batch=batch), lowered(graph, device, batch=batch)
        excess.clear()
        excess.update({**{("fwd", n): whole.forward[n] - low.forward[n] for n in whole.forward},
                       **{("bwd", n): whole.backward[n] - low.backward[n] for n in whole.backward}})
        return low

    def sim(run: dict[str, Any], placement: str, cl: Any, k: int) -> float:
        if run["method"] in sv.BASELINES:
            return real(run, placement, cl, k)
        waiting = mock.patch.object(simrun, "Engine", lambda shared=None, one_flow=False: _WaitingEngine(
            shared=dict(shared or {}), one_flow=one_flow, excess=excess))
        with mock.patch.object(simrun, "layer_times", layer_times), waiting:
            return real(run, placement, cl, k)

    return sim


_client_add = workloads.ClientWork.add


def _client_beside(self: Any, *args: Any) -> None:
    """The client's work charged on a core, nothing waiting for it."""
    _client_add(self, *args)
    return None


def _client_any_thread(self: Any, eng: Engine, *args: Any) -> int | None:
    """The client's work, without the client's interpreter."""
    tid = _client_add(self, eng, *args)
    if tid is not None:
        eng.tasks[tid].resources = tuple(r for r in eng.tasks[tid].resources if r != workloads.INTERPRETER)
    return tid


def client_rule_before(self: Any, eng: Engine, *args: Any) -> None:
    """The simulator's rule before 2026-11-30 pm, a patch for ``ClientWork.add``: the client's work holds a core
    only (no interpreter), and nothing waits for it."""
    _client_any_thread(self, eng, *args)
    return None


def _with(sim: Callable[..., float], out: Path, cluster: Path) -> list[dict[str, Any]]:
    with mock.patch.object(sv, "simulate_run", sim):
        return sv.predict(out, cluster)


def _model_parallel_batches_only(out: Path) -> Callable[..., Any]:
    """``worker_call_cost`` from the unsplit steps the validation timed before 2026-12-06 only: at the batch sizes
    of async model-parallel runs, none for a model that ran none (vgg16), none at a data-parallel replica's own
    batch."""
    mp = {(model.rsplit("_", 1)[0], batch) for model, method, batch, _ in sv.measured_runs(out)
          if method not in sv.BASELINES and method.endswith("-async")}

    def cost(graph: Any, device: DeviceSpec, batch: int) -> Any:
        kept = tuple(c for c in device.split_costs if (c.model, c.batch_size) in mp)
        return costs.worker_call_cost(graph, dataclasses.replace(device, split_costs=kept), batch)

    return cost


def _micro_factor(graph: Any, device: DeviceSpec, batch: int, micro: int) -> float | None:
    """The factor that brings ``micro`` micro-batches' layers (each at its profile, ``costs.layer_times`` at
    B / micro) to the layers at B plus what the unsplit step measured at ``micro`` micro-batches beyond the one at
    one, at the batch nearest ``batch`` with both timed (None: one micro-batch, or not measured)."""
    mine = [c for c in device.split_costs if c.model == graph.name
            and (c.input_shape is None or c.input_shape == tuple(graph.input_shape))]
    both = ({c.batch_size for c in mine if c.micro_batches == micro} & {c.batch_size for c in mine
                                                                         if c.micro_batches == 1})
    both = {b for b in both if b % micro == 0}
    if micro < 2 or not both:
        return None
    near = min(both, key=lambda b: (abs(np.log(b / batch)), b))
    whole = {m: statistics.median(c.whole_ms for c in mine if c.batch_size == near and c.micro_batches == m)
             for m in (1, micro)}
    layers = 1000.0 * costs.layer_times(graph, device, batch=near).total()
    split = 1000.0 * micro * costs.layer_times(graph, device, batch=near // micro).total()
    return max(0.0, layers + whole[micro] - whole[1]) / split


def _micro_as_measured(real: Callable[..., Any]) -> Callable[..., Any]:
    """``run._split_cost`` whose factor also carries :func:`_micro_factor` (a placement's layer times are scaled
    by the split factor after they are read at the micro-batch)."""

    def split_cost(pl: Any, cluster: Any, batch: int, micro: int) -> Any:
        split = real(pl, cluster, batch, micro)
        f = _micro_factor(pl.graph, cluster.device, batch, micro)
        if f is None:
            return split
        if split is None:
            return SplitCost(pl.content_hash(), pl.graph.name, batch, micro, 1.0, f)
        return dataclasses.replace(split, split_ms=split.split_ms * f)

    return split_cost


def _no_holding(real: Callable[..., Any]) -> Callable[..., Any]:
    """``cluster._link`` whose link never holds the devices for a transfer (``holds_devices`` false)."""

    def link(d: Any, default: Any) -> Any:
        got = real(d, default)
        return None if got is None else dataclasses.replace(got, holds_devices=False)

    return link


def _latency_free_send(self: Any, name: str, src_part: int, dst_part: int, nbytes: float,
                       deps: Any) -> int:
    """``mpgraph._Builder._send`` as two tasks: the link's latency as a wait that holds nothing (the receiving
    op waits; both devices may compute meanwhile), then the bytes, holding the route's ports and, where the link
    says so, both devices (the copy's CPU). The measured traces of minires's sync placements show about one
    latency of waiting with no device computing per message (``idle_gaps.py --steps``)."""
    a, _ = self.place(src_part)
    b, _ = self.place(dst_part)
    seconds, ports = self.route(a, b, nbytes)
    latency = min(seconds, self.route(a, b, 0.0)[0])
    wait = self.eng.add(Task(f"{name} (latency)", TaskKind.SEND, latency, (), device=a, peer=b, batch=self.batch,
                             deps=tuple(deps)))
    return int(self.eng.add(Task(name, TaskKind.SEND, seconds - latency, ports, device=a, peer=b, batch=self.batch,
                                 deps=(wait,), nbytes=nbytes)))


def _moved(base: list[dict[str, Any]], rows: list[dict[str, Any]], by: float) -> list[str]:
    """The rows whose error a variant moves by more than ``by``: before -> after."""
    return [f"  {r['model']} {r['strategy']} B={r['batch_size']} {r.get('pipeline')}: {100 * b['error']:+.1f} -> "
            f"{100 * r['error']:+.1f} %" for b, r in zip(base, rows, strict=True) if abs(r["error"] - b["error"]) > by]


def _micro_only(out: Path, cluster: Path) -> int:
    """Prints this simulator, the ``sync micro-batches at the runtime's measured cost`` variant, transfers that do
    not hold the devices (the cluster file's ``holds_devices`` false), and both, on ``out``; and every row the
    variant moves, and every row beyond 25 % with both."""
    base = sv.predict(out, cluster)
    micro = mock.patch.object(simrun, "_split_cost", _micro_as_measured(simrun._split_cost))
    free = mock.patch.object(cluster_mod, "_link", _no_holding(cluster_mod._link))
    with micro:
        rows = sv.predict(out, cluster)
    with free:
        loose = sv.predict(out, cluster)
    with micro, free:
        both = sv.predict(out, cluster)
    lines = [f"$ python benchmarks/simulator_ablation.py {out} --micro-batches-only", _summary(base, "this simulator"),
             _summary(rows, "sync micro-batches at the runtime's measured cost")]
    lines += _moved(base, rows, 1e-4)
    lines.append(_summary(loose, "transfers not holding the devices"))
    lines.append(_summary(both, "both"))
    lines += [f"  {r['model']} {r['strategy']} B={r['batch_size']} {r.get('pipeline')}: {100 * r['error']:+.1f} %"
              for r in both if abs(r["error"]) > 0.25]
    lat = mock.patch.object(mpgraph._Builder, "_send", _latency_free_send)
    with lat:
        waits = sv.predict(out, cluster)
    with lat, micro:
        waits_micro = sv.predict(out, cluster)
    lines.append(_summary(waits, "model parallelism's transfer latency holding nothing"))
    lines.append(_summary(waits_micro, "that and the sync micro-batch rule"))
    lines += _moved(base, waits_micro, 0.05)
    print("\n".join(lines))
    return 0


def _latency_per_tensor() -> Any:
    """Every further tensor of a many-tensor transfer pays the link's latency, whatever it measured."""
    return mock.patch.object(cluster_mod.Link, "tensor_seconds", property(lambda self: self.latency))


def _per_tensor_only(out: Path, cluster: Path, us: float) -> int:
    """``--per-tensor-us``: this simulator with the link's per-tensor cost assumed, the simulator before it and
    before 64 async jobs, and each change alone; printed only."""
    assumed = mock.patch.object(cluster_mod.Link, "tensor_seconds", property(lambda self: us * 1e-6))
    lines = [f"$ python benchmarks/simulator_ablation.py {out} --per-tensor-us {us:g}"]
    with assumed:
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, f"this simulator, each further tensor {us:g} us"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))
    with _latency_per_tensor(), mock.patch.object(simrun, "ASYNC_DP_JOBS", 0):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "before: each further tensor paying the latency, 8 jobs of async data parallelism"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))
    with _latency_per_tensor():
        lines.append(_summary(sv.predict(out, cluster), "64 jobs only"))
    with assumed, mock.patch.object(simrun, "ASYNC_DP_JOBS", 0):
        lines.append(_summary(sv.predict(out, cluster), f"{us:g} us a further tensor only"))
    print("\n".join(lines))
    return 0


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    cluster = out / "cluster_this-machine.json"
    if "--micro-batches-only" in argv[1:]:
        return _micro_only(out, cluster)
    if "--per-tensor-us" in argv[1:]:
        return _per_tensor_only(out, cluster, float(argv[argv.index("--per-tensor-us") + 1]))
    real_sim = sv.simulate_run
    lines = [f"$ python benchmarks/simulator_ablation.py {out}"]
    lines.append(_summary(sv.predict(out, cluster), "this simulator"))
    with mock.patch.object(costs, "step_floor", lambda prof, device: 1.0):
        lines.append(_summary(sv.predict(out, cluster), "without the whole-step floor"))
    lines.append(_summary(_with(lambda run, pl, cl, k: real_sim({**run, "pipeline": ""}, pl, cl, k), out, cluster),
                          "model parallelism as graph"))

    real_adp = simrun.AsyncDataParallel
    with mock.patch.object(simrun, "AsyncDataParallel", lambda *a, **kw: real_adp(*a, **{**kw, "serial": True})):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "async data parallelism taking turns"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))

    def turns(run: dict[str, Any], placement: str, cl: Any, k: int) -> float:
        if not run["method"].startswith("async-dp"):
            return real_sim(run, placement, cl, k)
        with mock.patch.object(workloads.AsyncDataParallel, "_send", _send_on_client), \
                mock.patch.object(workloads, "_update", _update_on_client):
            return real_sim(run, placement, cl, k)

    rows = _with(turns, out, cluster)
    lines.append(_summary(rows, "async data parallelism, its sends and updates taking turns"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))
    real_mp = simrun.ModelParallel
    with mock.patch.object(simrun, "ModelParallel", lambda *a, **kw: real_mp(*a, **{**kw, "gated": False})):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "compiled without the 1F1B gate"))
    lines += _rows(rows, lambda r: r.get("pipeline") == "compiled" and r["strategy"].endswith("async"))
    with mock.patch.object(DeviceSpec, "call_seconds", lambda self, nbytes, devices: self.call_overhead):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "without the measured step calls"))
    lines += _rows(rows, lambda r: r["strategy"] == "single" or "dp" in r["strategy"])
    with mock.patch.object(simrun, "_client_work", lambda *a: None):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "without the client's CPU"))
    lines += _rows(rows, lambda r: r["strategy"] == "single" or "dp" in r["strategy"])
    with mock.patch.object(simrun, "_measured_allreduce", lambda *a: None):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "without the measured all-reduce"))
    lines += _rows(rows, lambda r: r["strategy"] == "sync-dp")
    lowered = _down_to_step(costs.layer_times)
    with mock.patch.object(costs, "layer_times", lowered), mock.patch.object(simrun, "layer_times", lowered):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "layers brought down to the whole step, every strategy"))

    def layerwise_lowered(run: dict[str, Any], placement: str, cl: Any, k: int) -> float:
        if not run["method"].startswith("layerwise"):
            return real_sim(run, placement, cl, k)
        with mock.patch.object(costs, "layer_times", lowered), mock.patch.object(simrun, "layer_times", lowered):
            return real_sim(run, placement, cl, k)

    rows = _with(layerwise_lowered, out, cluster)
    lines.append(_summary(rows, "layers brought down to the whole step, layer-wise placements only"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("layerwise"))
    profiles = load_cluster(cluster).device.profiles
    fixed = _fixed_costs(profiles) if profiles is not None else {}
    with mock.patch.object(simrun, "mp_template", _parts_pay_fixed(mpgraph.mp_template, fixed)):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "every part pays a layer's fixed cost"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(("coarse", "fine")))
    mp = ("coarse", "fine", "layerwise")
    rows = _with(_one_op(real_sim), out, cluster)
    lines.append(_summary(rows, "one op at a time per worker"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(mp))
    rows = _with(_sync_lowered(real_sim, lowered), out, cluster)
    lines.append(_summary(rows, "sync model parallelism's layers brought down to the whole step"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(mp))
    with mock.patch.object(mpgraph, "_fresh_units", lambda *a: frozenset()):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "no fresh pieces"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(mp) and r["strategy"].endswith("async"))
    rows = _with(_excess_as_wait(real_sim, lowered), out, cluster)
    lines.append(_summary(rows, "a layer's excess over the whole step as a wait that holds no core"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(mp))
    with mock.patch.object(simrun, "Engine", lambda **kw: Engine(**{**kw, "one_flow": False})):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "batches and micro-batches sharing a worker's core"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(mp))
    with mock.patch.object(simrun, "_split_cost", lambda *a: None):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "without the split cost"))
    lines += _rows(rows, lambda r: r["strategy"].startswith(mp))
    with mock.patch.object(simrun, "worker_call_cost", lambda *a: None):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "without the call cost"))
    lines += _rows(rows, lambda r: True)
    with mock.patch.object(sv, "steps_per_call", lambda run: STEPS_PER_CALL):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "compiled calls of 64 steps"))
    lines += _rows(rows, lambda r: r.get("pipeline") == "compiled")
    with mock.patch.object(simrun, "worker_call_cost", _model_parallel_batches_only(out)):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "the call cost from model-parallel runs' batches only"))
    lines += _rows(rows, lambda r: r["strategy"] in sv.BASELINES)
    with mock.patch.object(simrun, "_split_cost", _micro_as_measured(simrun._split_cost)):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "sync micro-batches at the runtime's measured cost"))
    lines += _rows(rows, lambda r: r["strategy"].endswith("-sync"))
    for patch, label in ((_client_beside, "async data-parallel calls not waiting for the client's work"),
                         (_client_any_thread, "the client's work of two calls at once")):
        with mock.patch.object(workloads.ClientWork, "add", patch):
            rows = sv.predict(out, cluster)
        lines.append(_summary(rows, label))
        lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))
    with _latency_per_tensor():
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "each further tensor paying the latency"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))
    with mock.patch.object(simrun, "ASYNC_DP_JOBS", 0):
        rows = sv.predict(out, cluster)
    lines.append(_summary(rows, "8 jobs of async data parallelism"))
    lines += _rows(rows, lambda r: r["strategy"].startswith("async-dp"))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (out / "ablation.txt").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
