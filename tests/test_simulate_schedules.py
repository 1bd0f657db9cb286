"""The simulator against schedules computed by hand.

Rules the hand schedules follow (hgpart/simulate/engine.py): a task starts once its dependencies have ended and
every resource it names is free; among ready tasks the one ready first goes first, ties to the older batch, then to
the task added first. On a shared core (processor sharing) each of n tasks runs at 1 / n of its speed; with
``one_flow`` a compute task of another (micro-)batch than the running ones waits for them. Durations are binary
fractions so every sum is exact and the asserts use ``==``.
"""

from __future__ import annotations

import dataclasses

import pytest

from hgpart.cluster import cluster_from_dict
from hgpart.simulate.engine import Engine, Task, TaskKind
from hgpart.simulate.mpgraph import Message, MPTemplate, Unit
from hgpart.simulate.run import ClusterDevices
from hgpart.simulate.timeline import critical_path, device_times
from hgpart.simulate.workloads import (
    INTERPRETER,
    AsyncDataParallel,
    ClientWork,
    Mode,
    ModelParallel,
    RingDataParallel,
    SingleDevice,
    run_jobs,
)


class FixedLinks:
    """Every transfer takes ``latency + bytes / bandwidth`` on the sender's out-port and the receiver's in-port."""

    def __init__(self, latency: float, bandwidth: float, holds_devices: bool = False,
                 per_tensor: float | None = None) -> None:
        self.latency, self.bandwidth, self.holds_devices = latency, bandwidth, holds_devices
        self.per_tensor = latency if per_tensor is None else per_tensor

    def compute(self, device: int) -> str:
        return f"dev{device}"

    def transfer(self, src: int, dst: int, nbytes: float) -> tuple[float, tuple[str, ...]]:
        held = (self.compute(src), self.compute(dst)) if self.holds_devices else ()
        return self.latency + nbytes / self.bandwidth, (f"out{src}", f"in{dst}", *held)

    def tensor_seconds(self, src: int, dst: int) -> float:
        return self.per_tensor


def _by_name(eng: Engine) -> dict[str, Task]:
    return {t.name: t for t in eng.tasks}


def _two_stage() -> MPTemplate:
    # stage 0 on part 0, stage 1 on part 1: forward 1 s, backward 2 s each; one 32-byte map from stage 0 to 1
    units = [Unit("s0", "s0", 0, 1.0, 2.0, False), Unit("s1", "s1", 1, 1.0, 2.0, False)]
    return MPTemplate(k=2, micro_batch=8, units=units, messages=[Message(0, 1, 32.0, (1,))], local=[],
                      part_params=[0.0, 0.0])


def test_two_stage_pipeline_with_two_batches_in_flight() -> None:
    # transfer = 0.25 + 32 / 128 = 0.5 s each way; update 0.25 s per part
    # dev0: F0_0 [0,1]  F0_1 [1,2]                      B0_0 [6,8] (after G_0)  U0_0 [8,8.25]  B0_1 [8.25,10.25]
    #       U0_1 [10.25,10.5]
    # link: T_0 [1,1.5]  T_1 [2,2.5]  G_0 [5.5,6]  G_1 [7.5,8]
    # dev1: F1_0 [1.5,2.5]  F1_1 [2.5,3.5]  B1_0 [3.5,5.5]  B1_1 [5.5,7.5] (ready at 3.5, before U1_0 at 5.5)
    #       U1_0 [7.5,7.75]  U1_1 [7.75,8]
    # at t = 8, U0_0 (batch 0) and B0_1 (batch 1) are both ready: the older batch goes first
    wl = ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.ASYNC, inflight=2)
    eng = Engine()
    run = run_jobs(eng, wl, jobs=2)
    t = _by_name(eng)
    expect = {
        "fwd s0 b0": (0.0, 1.0), "fwd s0 b1": (1.0, 2.0), "map s0 b0": (1.0, 1.5), "map s0 b1": (2.0, 2.5),
        "fwd s1 b0": (1.5, 2.5), "fwd s1 b1": (2.5, 3.5), "bwd s1 b0": (3.5, 5.5), "bwd s1 b1": (5.5, 7.5),
        "grad s0 b0": (5.5, 6.0), "grad s0 b1": (7.5, 8.0), "bwd s0 b0": (6.0, 8.0), "bwd s0 b1": (8.25, 10.25),
        "update part 1 b0": (7.5, 7.75), "update part 1 b1": (7.75, 8.0), "update part 0 b0": (8.0, 8.25),
        "update part 0 b1": (10.25, 10.5),
    }
    assert {name: (t[name].start, t[name].end) for name in expect} == expect
    assert run.ends == [8.25, 10.5]
    assert run.images == [8, 8]
    # the critical path ends with part 0's last update, reached through its backward that waited for dev0
    path = critical_path(eng.tasks)
    assert [s.name for s in path[-2:]] == ["bwd s0 b1", "update part 0 b1"]
    assert sum(s.end_s - s.start_s for s in path) <= run.ends[-1]
    times = device_times(eng.tasks, 2)
    assert times[0].compute_s == 6.0 and times[0].update_s == 0.5 and times[0].idle_s == 10.5 - 6.5
    assert times[1].comm_s == 2.0  # four 0.5 s transfers, none overlapping


def test_compiled_pipeline_calls_drain_their_window_and_cost_one_call_each() -> None:
    # steps_per_call 2, call 0.25: call 0 [0, 0.25], then jobs 0 and 1 run as in the two-stage test above shifted
    # by 0.25 (ends 8.5, 10.75); call 1 waits for both, [10.75, 11], and jobs 2 and 3 repeat them from 11
    wl = ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.ASYNC, inflight=2,
                       call_s=0.25, steps_per_call=2)
    eng = Engine()
    run = run_jobs(eng, wl, jobs=4)
    t = _by_name(eng)
    assert (t["call 0 (b0..)"].start, t["call 0 (b0..)"].end) == (0.0, 0.25)
    assert (t["call 1 (b2..)"].start, t["call 1 (b2..)"].end) == (10.75, 11.0)
    assert (t["fwd s0 b1"].start, t["fwd s0 b3"].start) == (1.25, 12.0)
    assert run.ends == [8.5, 10.75, 19.25, 21.5]
    assert sum(task.kind is TaskKind.CALL for task in eng.tasks) == 2


def test_the_compiled_pipelines_1f1b_gate_holds_a_cross_part_read_until_the_previous_backward() -> None:
    # as the test above with the runtime's CrossGate: within a call, part 1 reads job 1's map only after its
    # backward of job 0. call 0 [0, 0.25]; dev0: F s0 b0 [0.25, 1.25], F s0 b1 [1.25, 2.25] (part 0 reads nothing
    # across parts); dev1: F s1 b0 [1.75, 2.75], B s1 b0 [2.75, 4.75]; at 4.75 both part 1's update of b0 and
    # F s1 b1 (gated) are ready, the older batch first: U1_0 [4.75, 5], F s1 b1 [5, 6], B s1 b1 [6, 8], U1_1 [8, 8.25];
    # dev0: G_0 [4.75, 5.25], B s0 b0 [5.25, 7.25], U0_0 [7.25, 7.5], G_1 [8, 8.5], B s0 b1 [8.5, 10.5], U0_1
    # [10.5, 10.75]. Call 1 [10.75, 11] starts with no gate: jobs 2 and 3 repeat jobs 0 and 1 from 10.75
    wl = ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.ASYNC, inflight=2,
                       call_s=0.25, steps_per_call=2, gated=True)
    eng = Engine()
    run = run_jobs(eng, wl, jobs=4)
    t = _by_name(eng)
    expect = {
        "fwd s0 b1": (1.25, 2.25), "fwd s1 b0": (1.75, 2.75), "bwd s1 b0": (2.75, 4.75),
        "update part 1 b0": (4.75, 5.0), "fwd s1 b1": (5.0, 6.0), "bwd s1 b1": (6.0, 8.0),
        "bwd s0 b0": (5.25, 7.25), "bwd s0 b1": (8.5, 10.5), "fwd s1 b2": (12.5, 13.5), "fwd s1 b3": (15.75, 16.75),
    }
    assert {name: (t[name].start, t[name].end) for name in expect} == expect
    assert run.ends == [7.5, 10.75, 18.25, 21.5]


def test_a_single_device_with_several_steps_per_call_pays_one_call_per_call() -> None:
    wl = SingleDevice(1.0, 2.0, 0.5, 8, FixedLinks(0.25, 128.0), call_s=0.25, steps_per_call=2)
    eng = Engine()
    run = run_jobs(eng, wl, jobs=4)
    assert run.ends == [3.75, 7.25, 11.0, 14.5]
    assert [task.name for task in eng.tasks if task.kind is TaskKind.CALL] == ["call b0", "call b2"]


def test_sync_micro_batches_wait_for_each_other_before_the_update() -> None:
    # 2 micro-batches, one step; same template (its times are per micro-batch)
    # dev0: F0_a [0,1] F0_b [1,2]; dev1: F1_a [1.5,2.5] F1_b [2.5,3.5] B1_a [3.5,5.5] B1_b [5.5,7.5]
    # dev0: B0_a [6,8] B0_b [8,10] (G_b [7.5,8]); updates once per part after both: U1 [7.5,7.75], U0 [10,10.25]
    wl = ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.SYNC, inflight=2)
    eng = Engine()
    run = run_jobs(eng, wl, jobs=1)
    t = _by_name(eng)
    assert (t["bwd s0 b0.1"].start, t["bwd s0 b0.1"].end) == (8.0, 10.0)
    assert (t["update part 1 b0"].start, t["update part 0 b0"].start) == (7.5, 10.0)
    assert run.ends == [10.25] and run.images == [16]


def test_on_shared_cores_a_sync_steps_micro_batches_take_turns_and_so_pipeline() -> None:
    """The sync step above on cores of 2 threads each. Sharing them between micro-batches, both forwards of stage 0
    run side by side at half speed and end together at 2: maps [2, 2.5] and [2.5, 3]; stage 1: F_a [2.5, 4] (half
    speed from 3 beside F_b), F_b [3, 5], B_a [4, 8] (beside F_b, then B_b), B_b [5, 8.5]; grads [8, 8.5] and
    [8.5, 9]; stage 0: B_a [8.5, 12], B_b [9, 12.5]; updates U1 [8.5, 8.75], U0 [12.5, 12.75]. With one flow at a
    time (``one_flow``), a micro-batch's op waits while the other's runs, and the schedule is the exclusive one
    above: F0_a [0, 1], F0_b [1, 2], ..., U0 [10, 10.25]."""

    def step() -> ModelParallel:
        return ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.SYNC, inflight=2)

    for one_flow, expect, end in ((False, {"fwd s0 b0.0": (0.0, 2.0), "fwd s0 b0.1": (0.0, 2.0),
                                           "fwd s1 b0.0": (2.5, 4.0), "bwd s1 b0.1": (5.0, 8.5),
                                           "bwd s0 b0.0": (8.5, 12.0), "bwd s0 b0.1": (9.0, 12.5)}, 12.75),
                                  (True, {"fwd s0 b0.0": (0.0, 1.0), "fwd s0 b0.1": (1.0, 2.0),
                                          "fwd s1 b0.0": (1.5, 2.5), "bwd s1 b0.1": (5.5, 7.5),
                                          "bwd s0 b0.0": (6.0, 8.0), "bwd s0 b0.1": (8.0, 10.0)}, 10.25)):
        eng = Engine(shared={"dev0": 2, "dev1": 2}, one_flow=one_flow)
        run = run_jobs(eng, step(), jobs=1)
        t = _by_name(eng)
        assert {name: (t[name].start, t[name].end) for name in expect} == expect
        assert run.ends == [end]
    exclusive = Engine()
    run_jobs(exclusive, step(), jobs=1)
    assert [(x.name, x.start, x.end) for x in eng.tasks] == [(x.name, x.start, x.end) for x in exclusive.tasks]


def test_ring_all_reduce() -> None:
    # 3 replicas: forward 1, backward 2; gradient 288 bytes -> chunks of 96; a round = 0.125 + 96 / 64 = 1.625 s;
    # 2 (N - 1) = 4 rounds, all three sends of a round at once (each on its own ports): 3 + 4 x 1.625 = 9.5;
    # update 0.5: the step ends at 10; the next step starts then.
    wl = RingDataParallel(3, 1.0, 2.0, 0.5, 288.0, 24, FixedLinks(0.125, 64.0))
    eng = Engine()
    run = run_jobs(eng, wl, jobs=2)
    sends = [t for t in eng.tasks if t.kind is TaskKind.SEND and t.batch == 0]
    assert len(sends) == 12
    for r in range(4):
        rnd = [t for t in sends if t.name.split()[1] == str(r)]
        assert [(t.start, t.end) for t in rnd] == [(3.0 + 1.625 * r, 3.0 + 1.625 * (r + 1))] * 3
    assert all(t.nbytes == 96.0 for t in sends)
    assert run.ends == [10.0, 20.0]


def test_a_measured_all_reduce_replaces_the_rings_transfers() -> None:
    # 2 replicas, the second's backward 1 s longer: forward 1, backward 2 and 3; the measured all-reduce (4 s)
    # starts when the slower replica's gradient is in (4) and holds both replicas until 8; updates 0.5: step ends
    # at 8.5. No ring transfer is simulated.
    wl = RingDataParallel(2, 1.0, 2.0, 0.5, 288.0, 24, FixedLinks(0.125, 64.0), allreduce_s=4.0)
    eng = Engine()
    bwd1 = eng.add(Task("slow", TaskKind.COMPUTE, 1.0, ("dev1",)))  # device 1 is busy for 1 s first
    run = run_jobs(eng, wl, jobs=1)
    t = _by_name(eng)
    assert (t["bwd r0 b0"].end, t["bwd r1 b0"].end, eng.tasks[bwd1].end) == (3.0, 4.0, 1.0)
    assert [(t[f"all-reduce r{i}->r{1 - i} b0"].start, t[f"all-reduce r{i}->r{1 - i} b0"].end) for i in (0, 1)] == \
        [(4.0, 8.0), (4.0, 8.0)]
    assert t["all-reduce r0->r1 b0"].resources == ("dev0",) and t["all-reduce r0->r1 b0"].nbytes == 288.0
    assert (t["update r0 b0"].end, t["update r1 b0"].end) == (8.5, 8.5) and run.ends == [8.5]
    assert not any(t.name.startswith(("reduce-scatter", "all-gather")) for t in eng.tasks)


def test_a_measured_step_call_costs_by_the_bytes_fed_and_the_devices_spanned() -> None:
    c = cluster_from_dict({
        "format": "hgpart.cluster/1", "name": "toy", "nodes": 1, "devices_per_node": 2,
        "device": {"kind": "toy", "peak_TFLOPs": 1.0, "efficiency": 1.0, "memory_GiB": 1, "memory_bandwidth_GBps": 1,
                   "call_overhead_us": 1000.0,
                   "step_calls": [{"devices": 1, "fixed_us": 1000.0, "feed_GBps": 1.0},
                                  {"devices": 2, "fixed_us": 3000.0, "feed_GBps": 0.5}]},
        "links": {"intra_node": {"bandwidth_GBps": 1.0, "latency_us": 0.0,
                                 "allreduce": {"replicas": 2, "fixed_us": 100.0, "bandwidth_GBps": 2.0,
                                               "per_tensor_us": 10.0}}}})
    d = c.device
    assert d.call_seconds(1e6, 1) == pytest.approx(2e-3) and d.call_seconds(1e6, 2) == pytest.approx(5e-3)
    assert d.call_seconds(1e6, 8) == pytest.approx(5e-3)  # the call spanning the most devices measured
    assert dataclasses.replace(d, step_calls=()).call_seconds(1e6, 2) == 1e-3  # not measured: the fixed overhead
    assert c.intra is not None and c.intra.allreduce is not None
    assert c.intra.allreduce.seconds(2e6, 3) == pytest.approx(100e-6 + 1e-3 + 30e-6)


def test_model_times_data_parallelism_all_reduces_each_part_over_its_replicas() -> None:
    # the two-stage template on 2 replicas (devices 0,1 and 2,3), sync, one micro-batch each; transfer
    # 0.25 + bytes / 128. Each replica: F0 [0,1], map [1,1.5], F1 [1.5,2.5], B1 [2.5,4.5], grad [4.5,5], B0 [5,7].
    # Part 1 (devices 1 and 3, 128 gradient bytes -> chunks of 64, 0.75 s a round) is ready at 4.5, but each
    # device's out-port is sending the replica's map gradient until 5: rounds [5,5.75] and [5.75,6.5], update
    # [6.5,6.75]. Part 0 (devices 0 and 2, 256 bytes -> 128, 1.25 s a round): rounds [7,8.25] and [8.25,9.5],
    # update [9.5,9.75], the end of the step, which trained 2 x 8 images.
    wl = ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.SYNC, inflight=1,
                       replicas=2, grad_bytes=[256.0, 128.0])
    eng = Engine()
    run = run_jobs(eng, wl, jobs=1)
    t = _by_name(eng)
    expect = {}
    for r in (0, 1):
        expect |= {f"fwd s0 r{r} b0": (0.0, 1.0), f"map s0 r{r} b0": (1.0, 1.5), f"fwd s1 r{r} b0": (1.5, 2.5),
                   f"bwd s1 r{r} b0": (2.5, 4.5), f"grad s0 r{r} b0": (4.5, 5.0), f"bwd s0 r{r} b0": (5.0, 7.0),
                   f"update part 1 r{r} b0": (6.5, 6.75), f"update part 0 r{r} b0": (9.5, 9.75)}
    for a, b in ((0, 1), (1, 0)):
        expect |= {f"part 1 reduce-scatter 0 r{a}->r{b} b0": (5.0, 5.75),
                   f"part 1 all-gather 1 r{a}->r{b} b0": (5.75, 6.5),
                   f"part 0 reduce-scatter 0 r{a}->r{b} b0": (7.0, 8.25),
                   f"part 0 all-gather 1 r{a}->r{b} b0": (8.25, 9.5)}
    assert {name: (t[name].start, t[name].end) for name in expect} == expect
    assert t["part 0 reduce-scatter 0 r1->r0 b0"].device == 2 and t["part 0 reduce-scatter 0 r1->r0 b0"].peer == 0
    assert t["update part 1 r1 b0"].device == 3
    assert run.ends == [9.75] and run.images == [16]


def test_model_times_data_parallelism_is_sync_only() -> None:
    with pytest.raises(ValueError, match="sync mode only"):
        ModelParallel(_two_stage(), [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.ASYNC, inflight=2,
                      replicas=2, grad_bytes=[256.0, 128.0])


def _cluster(port_per: str) -> ClusterDevices:
    return ClusterDevices(cluster_from_dict({
        "format": "hgpart.cluster/1", "name": "toy", "nodes": 3, "devices_per_node": 1,
        "device": {"kind": "toy", "peak_TFLOPs": 1.0, "efficiency": 1.0, "memory_GiB": 1, "memory_bandwidth_GBps": 1},
        "links": {"inter_node": {"bandwidth_GBps": 1.0, "latency_us": 0.0, "port_per": port_per}}}))


def test_every_call_starts_with_the_clients_call_cost() -> None:
    # call 0.25 on the client, then forward 1, backward 2, update 0.5; the next call starts when the step ends
    wl = SingleDevice(1.0, 2.0, 0.5, 8, FixedLinks(0.25, 128.0), call_s=0.25)
    eng = Engine()
    run = run_jobs(eng, wl, jobs=2)
    t = _by_name(eng)
    expect = {"call b0": (0.0, 0.25), "fwd b0": (0.25, 1.25), "bwd b0": (1.25, 3.25), "update b0": (3.25, 3.75),
              "call b1": (3.75, 4.0), "fwd b1": (4.0, 5.0), "bwd b1": (5.0, 7.0), "update b1": (7.0, 7.5)}
    assert {n: (t[n].start, t[n].end) for n in expect} == expect
    assert t["call b0"].kind is TaskKind.CALL and t["call b0"].resources == ("client",)
    assert run.images_per_s() == 8 / 3.75


def test_serial_async_data_parallel_workers_take_turns() -> None:
    # one parameter server (device 0) holds 16 parameters: a pull or push of 64 bytes takes 0.25 + 64 / 128 = 0.75
    # job 0, worker 0 (the server): call [0, .25], fwd [.25, 1.25], bwd [1.25, 2.25], update [2.25, 2.75]
    # job 1, worker 1: call [2.75, 3], pull [3, 3.75], fwd [3.75, 4.75], bwd [4.75, 5.75], push [5.75, 6.5],
    #                  update on the server [6.5, 7]
    def workers(serial: bool) -> tuple[Engine, dict[str, Task]]:
        wl = AsyncDataParallel(2, 1.0, 1.0, [16.0, 0.0], [0.5, 0.0], 4, FixedLinks(0.25, 128.0), call_s=0.25,
                               serial=serial)
        eng = Engine()
        run_jobs(eng, wl, jobs=2)
        return eng, _by_name(eng)

    _, t = workers(True)
    expect = {"call w0 j0": (0.0, 0.25), "fwd w0 j0": (0.25, 1.25), "bwd w0 j0": (1.25, 2.25),
              "update p0 from w0 j0": (2.25, 2.75), "call w1 j1": (2.75, 3.0), "pull p0->w1 j1": (3.0, 3.75),
              "fwd w1 j1": (3.75, 4.75), "bwd w1 j1": (4.75, 5.75), "push w1->p0 j1": (5.75, 6.5),
              "update p0 from w1 j1": (6.5, 7.0)}
    assert {n: (t[n].start, t[n].end) for n in expect} == expect
    # concurrent workers: the second call waits only for the client, then runs beside the first job
    _, c = workers(False)
    assert (c["call w0 j0"].start, c["call w1 j1"].start) == (0.0, 0.25)
    assert c["fwd w1 j1"].start == 0.25 + 0.25 + 0.75 < c["update p0 from w0 j0"].end


def test_concurrent_async_data_parallel_workers_pay_latency_per_tensor_and_a_link_can_hold_devices() -> None:
    # one parameter server (device 0) holds 16 parameters in 2 tensors: a pull or push of 64 bytes pays the latency
    # per tensor, 2 x 0.25 + 64 / 128 = 1.0 s. Both workers' calls start at once and take turns on the client only.
    # Free link: call w0 [0, .25], fwd w0 [.25, 1.25], bwd w0 [1.25, 2.25], update from w0 [2.25, 2.75];
    #            call w1 [.25, .5], pull [.5, 1.5], fwd w1 [1.5, 2.5], bwd w1 [2.5, 3.5], push [3.5, 4.5],
    #            update from w1 on the server [4.5, 5].
    # A link that holds both devices: the pull (ready at .5) waits for fwd w0 to free device 0 and runs
    # [1.25, 2.25], before bwd w0 (ready at 1.25, later), which runs [2.25, 3.25]; fwd w1 [2.25, 3.25], bwd w1
    # [3.25, 4.25], update from w0 [3.25, 3.75], push [4.25, 5.25], update from w1 [5.25, 5.75].
    def workers(holds: bool) -> dict[str, Task]:
        wl = AsyncDataParallel(2, 1.0, 1.0, [16.0, 0.0], [0.5, 0.0], 4, FixedLinks(0.25, 128.0, holds), call_s=0.25,
                               shard_tensors=[2, 0])
        eng = Engine()
        run_jobs(eng, wl, jobs=2)
        return _by_name(eng)

    names = ["call w0 j0", "fwd w0 j0", "bwd w0 j0", "update p0 from w0 j0", "call w1 j1", "pull p0->w1 j1",
             "fwd w1 j1", "bwd w1 j1", "push w1->p0 j1", "update p0 from w1 j1"]
    free = workers(False)
    assert [(free[n].start, free[n].end) for n in names] == [
        (0.0, 0.25), (0.25, 1.25), (1.25, 2.25), (2.25, 2.75), (0.25, 0.5), (0.5, 1.5), (1.5, 2.5), (2.5, 3.5),
        (3.5, 4.5), (4.5, 5.0)]
    held = workers(True)
    assert [(held[n].start, held[n].end) for n in names] == [
        (0.0, 0.25), (0.25, 1.25), (2.25, 3.25), (3.25, 3.75), (0.25, 0.5), (1.25, 2.25), (2.25, 3.25),
        (3.25, 4.25), (4.25, 5.25), (5.25, 5.75)]
    assert held["pull p0->w1 j1"].resources == ("out0", "in1", "dev0", "dev1")


def test_a_link_with_a_measured_cost_per_tensor_charges_it_for_each_tensor_beyond_the_first() -> None:
    # as above, free link, but each further tensor of a pull or push costs 0.05 s, not the latency 0.25 s:
    # 0.25 + 0.05 + 64 / 128 = 0.8 s. call w1 [.25, .5], pull [.5, 1.3], fwd w1 [1.3, 2.3], bwd w1 [2.3, 3.3],
    # push [3.3, 4.1], update from w1 [4.1, 4.6]; worker 0 as before.
    wl = AsyncDataParallel(2, 1.0, 1.0, [16.0, 0.0], [0.5, 0.0], 4, FixedLinks(0.25, 128.0, per_tensor=0.05),
                           call_s=0.25, shard_tensors=[2, 0])
    eng = Engine()
    run_jobs(eng, wl, jobs=2)
    t = _by_name(eng)
    names = ["call w1 j1", "pull p0->w1 j1", "fwd w1 j1", "bwd w1 j1", "push w1->p0 j1", "update p0 from w1 j1",
             "update p0 from w0 j0"]
    assert [v for n in names for v in (t[n].start, t[n].end)] == pytest.approx([
        0.25, 0.5, 0.5, 1.3, 1.3, 2.3, 2.3, 3.3, 3.3, 4.1, 4.1, 4.6, 2.25, 2.75])


def test_an_async_workers_call_waits_for_the_clients_work_which_takes_turns_and_a_free_core() -> None:
    # one parameter server (device 0) with 16 parameters: the pull and the push take 0.25 + 64 / 128 = 0.75 on a free
    # link; each call costs the client 0.5 s of CPU on one of the two cores, a spare one first, the caller's last,
    # holding the client's interpreter; a worker's call starts once its client work is done.
    # t=0: client w0 j0 takes dev1 [0, .5]; client w1 j1 waits for the interpreter, though dev0 is free
    # .5: call w0 j0; client w1 j1 (ready first) takes dev0 [.5, 1], so fwd w0 j0 waits for dev0: [1, 2]
    # 1: call w1 j1, pull [1, 1.75]; fwd w1 j1 on dev1 [1.75, 2.75]; bwd w0 j0 [2, 3]; its update [3, 3.5]
    # bwd w1 j1 [2.75, 3.75]; push [3.75, 4.5]; update from w1 on the server [4.5, 5]
    # Without the client's work: fwd w1 [.75, 1.75], bwd w1 [1.75, 2.75], push [2.75, 3.5], update [3.5, 4].
    cores = (("dev0", 0), ("dev1", 1))

    def workers(client: ClientWork | None) -> tuple[Engine, list[float]]:
        wl = AsyncDataParallel(2, 1.0, 1.0, [16.0, 0.0], [0.5, 0.0], 4, FixedLinks(0.25, 128.0), client=client)
        eng = Engine()
        return eng, run_jobs(eng, wl, jobs=2).ends

    eng, ends = workers(ClientWork(9.0, 0.5, cores))  # an async worker's call costs async_call_s, not step_s
    t = _by_name(eng)
    assert ends == [3.5, 5.0]
    assert [(t[n].start, t[n].end, t[n].device) for n in ("client w0 j0", "client w1 j1")] == [
        (0.0, 0.5, 1), (0.5, 1.0, 0)]
    assert t["client w1 j1"].waited_for == eng.tasks.index(t["client w0 j0"])  # the interpreter, not a core
    assert t["client w1 j1"].resources == (INTERPRETER, "dev0") and t["client w1 j1"].any_of == ()
    assert [(t[n].start, t[n].end) for n in ("call w1 j1", "pull p0->w1 j1", "fwd w1 j1", "fwd w0 j0")] == [
        (1.0, 1.0), (1.0, 1.75), (1.75, 2.75), (1.0, 2.0)]
    assert t["fwd w0 j0"].waited_for == eng.tasks.index(t["client w1 j1"])
    times = device_times(eng.tasks, 2)
    assert (times[0].client_s, times[1].client_s) == (0.5, 0.5)
    assert workers(None)[1] == [2.5, 4.0]


def test_a_single_devices_client_runs_on_a_spare_core_or_else_on_its_own() -> None:
    # fwd 1, bwd 2, update .5; the client's .25 s per call on the spare core costs nothing, on the device's own core
    # it comes before the forward: [0, .25], fwd [.25, 1.25], bwd [1.25, 3.25], update [3.25, 3.75]; then from 3.75
    def steps(cores: tuple[tuple[str, int], ...]) -> tuple[Engine, list[float]]:
        eng = Engine()
        wl = SingleDevice(1.0, 2.0, 0.5, 8, FixedLinks(0.25, 128.0), client=ClientWork(0.25, 9.0, cores))
        return eng, run_jobs(eng, wl, jobs=2).ends

    eng, spare = steps((("dev0", 0), ("dev1", -1)))
    assert spare == [3.5, 7.0] and device_times(eng.tasks, 1)[0].client_s == 0.0
    assert [t.device for t in eng.tasks if t.kind is TaskKind.CLIENT] == [-1, -1]
    eng, own = steps((("dev0", 0),))
    assert own == [3.75, 7.5] and device_times(eng.tasks, 1)[0].client_s == 0.5


def test_a_cluster_link_that_holds_devices_adds_them_to_every_transfer() -> None:
    doc = {"format": "hgpart.cluster/1", "name": "t", "nodes": 1, "devices_per_node": 2,
           "device": {"kind": "cpu", "peak_TFLOPs": 1.0, "efficiency": 1.0, "memory_GiB": 1,
                      "memory_bandwidth_GBps": 10},
           "links": {"intra_node": {"bandwidth_GBps": 1, "latency_us": 1}}}
    assert ClusterDevices(cluster_from_dict(doc)).transfer(0, 1, 8.0)[1] == ("intra-out:d0", "intra-in:d1")
    doc["links"]["intra_node"]["holds_devices"] = True
    assert ClusterDevices(cluster_from_dict(doc)).transfer(1, 0, 8.0)[1] == ("intra-out:d1", "intra-in:d0", "dev1",
                                                                             "dev0")


def test_a_link_shared_by_two_transfers() -> None:
    # device 0 sends 0.5 GB to device 1 and 0.5 GB to device 2 at t = 0 on one 1 GB/s out-port: 0 -> 1 holds it
    # [0, 0.5], 0 -> 2 waits and runs [0.5, 1.0]; 1 -> 2 uses other ports and runs [0, 0.5] alongside
    devs = _cluster("node")
    eng = Engine()
    names = []
    for src, dst in ((0, 1), (0, 2), (1, 2)):
        seconds, ports = devs.transfer(src, dst, 5e8)
        names.append(eng.add(Task(f"{src}->{dst}", TaskKind.SEND, seconds, ports, device=src, peer=dst)))
    eng.run()
    got = [(eng.tasks[i].start, eng.tasks[i].end) for i in names]
    assert got == [(0.0, 0.5), (0.5, 1.0), (0.0, 0.5)]
    assert eng.tasks[names[1]].waited_for == names[0]
    # device 2 receives from 1 then from 0: its in-port is free again at 0.5, so no further wait
    assert critical_path(eng.tasks)[0].name == "0->1"


@pytest.mark.parametrize(("src", "dst", "ports"), [(0, 1, ("inter-out:n0", "inter-in:n1")),
                                                   (2, 0, ("inter-out:n2", "inter-in:n0"))])
def test_routes_name_the_ports_of_their_nodes(src: int, dst: int, ports: tuple[str, ...]) -> None:
    assert _cluster("node").transfer(src, dst, 0.0)[1] == ports


def test_a_shared_core_runs_its_tasks_at_once_each_at_its_share_of_the_speed() -> None:
    """Processor sharing, computed by hand. A core shared by 2 threads: tasks of 1 s and 3 s start together at 0,
    each at half speed; the short one ends at 2 (1 s of work at 1/2), and the long one has 2 s left. A third task of
    1 s, ready at 0, waits for a thread: it starts at 2 beside the long one, both at half speed, and ends at 4; the
    long one then has 1 s left, alone at full speed, and ends at 5. A task that also holds an exclusive port keeps
    the port for its stretched time."""
    eng = Engine(shared={"core": 2})
    a = eng.add(Task("a", TaskKind.COMPUTE, 1.0, ("core",)))
    b = eng.add(Task("b", TaskKind.COMPUTE, 3.0, ("core",)))
    c = eng.add(Task("c", TaskKind.COMPUTE, 1.0, ("core",)))
    assert eng.run() == 5.0
    assert (eng.tasks[a].start, eng.tasks[a].end) == (0.0, 2.0)
    assert (eng.tasks[b].start, eng.tasks[b].end) == (0.0, 5.0)
    assert (eng.tasks[c].start, eng.tasks[c].end) == (2.0, 4.0)
    eng = Engine(shared={"core": 4})
    s = eng.add(Task("send", TaskKind.SEND, 1.0, ("port", "core")))
    w = eng.add(Task("work", TaskKind.COMPUTE, 1.0, ("core",)))
    late = eng.add(Task("next send", TaskKind.SEND, 0.5, ("port",)))
    eng.run()
    assert eng.tasks[s].end == 2.0 == eng.tasks[w].end  # both at half speed
    assert (eng.tasks[late].start, eng.tasks[late].end) == (2.0, 2.5)  # the port was held to the end


def test_a_shared_cores_busy_time_is_its_tasks_work_not_their_stretched_spans() -> None:
    """Two compute tasks of 1 s side by side on a core shared by 2 threads each end at 2 s. The core computed for
    2 s of the 2 s run: busy 100 %, idle 0, not the 4 s (200 %, idle -2 s) of the two spans added up."""
    eng = Engine(shared={"core": 2})
    eng.add(Task("a", TaskKind.COMPUTE, 1.0, ("core",), device=0))
    eng.add(Task("b", TaskKind.COMPUTE, 1.0, ("core",), device=0))
    assert eng.run() == 2.0
    (t,) = device_times(eng.tasks, 1)
    assert (t.compute_s, t.idle_s, t.busy) == (2.0, 0.0, 1.0)


def test_without_shared_resources_the_engine_is_exclusive() -> None:
    eng = Engine()
    a = eng.add(Task("a", TaskKind.COMPUTE, 1.0, ("core",)))
    b = eng.add(Task("b", TaskKind.COMPUTE, 3.0, ("core",)))
    assert eng.run() == 4.0 and eng.tasks[a].end == 1.0 and eng.tasks[b].start == 1.0


def test_a_fresh_piece_reads_the_weights_of_the_last_steps_update() -> None:
    # the compiled test above without the 1F1B gate, stage 1 (the loss part's) fresh: its forward of job 1 waits for
    # its backward of job 0, as the gate made it wait there. call 0 [0, 0.25]; dev1: F s1 b0 [1.75, 2.75],
    # B s1 b0 [2.75, 4.75]; at 4.75 U1_0 and F s1 b1 are ready, the older batch first: U1_0 [4.75, 5],
    # F s1 b1 [5, 6], B s1 b1 [6, 8]. Without it, F s1 b1 runs at 2.75, before B s1 b0
    fresh = dataclasses.replace(_two_stage(), fresh=frozenset({1}))
    for tpl, expect in ((fresh, {"fwd s1 b1": (5.0, 6.0), "bwd s1 b0": (2.75, 4.75), "bwd s1 b1": (6.0, 8.0)}),
                        (_two_stage(), {"fwd s1 b1": (2.75, 3.75), "bwd s1 b0": (3.75, 5.75)})):
        wl = ModelParallel(tpl, [0, 1], FixedLinks(0.25, 128.0), [0.25, 0.25], Mode.ASYNC, inflight=2,
                           call_s=0.25, steps_per_call=2)
        eng = Engine()
        run_jobs(eng, wl, jobs=4)
        t = _by_name(eng)
        assert {name: (t[name].start, t[name].end) for name in expect} == expect
