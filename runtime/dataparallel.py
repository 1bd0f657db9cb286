"""Data-parallel baselines as custom training loops (thesis §2.6.1, §5.2.3), on the same devices as the MP runtime.

Usage::

    from hgpart.runtime import open_devices
    from hgpart.runtime.dataparallel import make_strategy, run_slots
    ds = open_devices("logical", 2)
    s = make_strategy("async-dp-dps", keras_model, ds, OptimizerSpec("adam", 1e-3), batch_size=32)
    records = run_slots(s.slot_fns, tasks_x, tasks_y)  # s.task_batch images per task; one StepRecord each
    s.comm_bytes_per_step, s.evaluate(x_eval, y_eval)

Keras 3's ``model.fit`` fails under ParameterServerStrategy / MultiWorkerMirroredStrategy (TF 2.21), so every
strategy here is a custom loop. The model is run functionally with ``keras.Model.stateless_call`` on explicit
tensors, which lets each strategy put its parameter copies, gradient ops and updates on devices of its choosing
with ``tf.device``; ``tf.gradients`` inside one ``tf.function`` places every gradient op with its forward op.

Strategies (``batch_size`` is always the *global* batch: the images that one step of every strategy consumes):

* ``single`` - one replica on device 0: plain training (the reference).
* ``sync-dp`` - K replicas, one per device, each holding a full parameter copy. Each computes the gradient of its
  ``B / K`` shard, the gradients are summed by an explicit **ring all-reduce** (reduce-scatter then all-gather of K
  chunks, ``2 (K-1) P d`` bytes per step in total, thesis Table 5.14's convention), and every replica applies the
  same update. Works on logical devices and on local worker processes alike (it is placement only).
* ``sync-dp-mirrored`` - the same with ``tf.distribute.MirroredStrategy`` (``strategy.run`` + ``all_reduce`` +
  ``reduce``), in-process devices only. Its collective traffic is not visible in the graph; the report states the
  ring formula for it.
* ``async-dp-1ps`` - asynchronous data parallelism, one parameter server: the master parameters (and optimizer
  slots) live on device 0; K worker threads, worker ``w`` on device ``w``, each repeatedly pull every parameter,
  compute the gradient of their own ``B / K`` batch on their device and push it: the update runs on the
  parameter's device, with no lock and no waiting for the other workers (stale gradients are applied as they
  come, as in TensorFlow's ParameterServerStrategy).
* ``async-dp-dps`` - distributed parameter servers: every device is also a parameter server; parameters are
  assigned greedily by size (largest first, to the device with the fewest bytes so far; thesis §5.2.3), so a
  worker pulls and pushes only the parameters that other devices hold.

ParameterServerStrategy itself is not used: in TF 2.21 it needs a ``ClusterCoordinator`` with separate ``ps`` and
``worker`` server jobs and a chief, which neither logical devices nor hgpart's local worker set (a single
``worker`` job) provide; the explicit placement above is the same algorithm on the devices we have.

Bytes per step are read from each step's placed graph (every (tensor, consumer device) pair whose producer is on
another device; :func:`hgpart.runtime.traffic.graph_devices`), excluding the input feed, which every strategy
pays alike. A global step of the asynchronous strategies is K worker updates (``B`` images).
Non-trainable state (BatchNorm moving statistics, dropout seeds) is written back by whichever replica/worker
computed it last: replica 0 for the synchronous strategies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hgpart.runtime.pipeline import StepRecord, stacked_tasks
from hgpart.runtime.pipeline import run_slots as drive
from hgpart.runtime.strategy import STRATEGIES, Parallelism, ParamSync, Strategy

from hgpart.errors import BadOptionError

__all__ = ["DP_STRATEGIES", "DataParallel", "make_strategy", "greedy_assign", "run_slots", "cross_device_bytes",
           "ring_allreduce", "ring_bytes", "node_devices"]

#: the strategies :func:`make_strategy` compiles (names of :data:`hgpart.runtime.strategy.STRATEGIES`)
DP_STRATEGIES = tuple(name for name, s in STRATEGIES.items() if not s.is_model_parallel)


def greedy_assign(sizes: Sequence[int], k: int) -> list[int]:
    """Device of every parameter: largest first, each to the device with the fewest bytes so far (ties: lowest)."""
    load = [0] * k
    out = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda j: (-int(sizes[j]), j)):
        d = min(range(k), key=lambda p: (load[p], p))
        out[i] = d
        load[d] += int(sizes[i])
    return out


def ring_bytes(params: int, k: int, dtype_size: int = 4) -> int:
    """Bytes a ring all-reduce of ``params`` values moves in total over K devices: ``2 (K-1) P d``."""
    return 2 * (k - 1) * int(params) * dtype_size


def cross_device_bytes(concrete: Any, host: str) -> dict[str, int]:
    """Bytes crossing devices in a placed ``tf.function`` graph: ``{"comm": ..., "feed": ...}``.

    ``feed`` is what the host (the function's arguments) sends to the devices; ``comm`` is everything else.
    """
    from hgpart.runtime.traffic import cross_device_edges

    args = {t.op.name for t in concrete.inputs[: len(concrete.structured_input_signature[0])]}
    out = {"comm": 0, "feed": 0}
    for t, _, _, _, nbytes in cross_device_edges(concrete, host):
        out["feed" if _from_args(t, args) else "comm"] += nbytes
    return out


def _from_args(t: Any, args: set[str]) -> bool:
    """True if ``t`` is a function argument or computed only from arguments by shape ops (split/slice of x, y)."""
    op = t.op
    while True:
        if op.name in args:
            return True
        if op.type not in ("Split", "SplitV", "StridedSlice", "Identity", "Cast", "Slice") or not op.inputs:
            return False
        ins = [i for i in op.inputs if i.op.type != "Const"]
        if len(ins) != 1:
            return False
        op = ins[0].op


# ------------------------------------------------------------------------------------------ optimizer
class _Updates:
    """Optimizer slots beside each parameter copy and Keras 3's update formulas (as in hgpart.runtime.step)."""

    def __init__(self, opt: Any, variables: list[Any], devices: list[str]) -> None:
        import tensorflow as tf

        self.opt = opt
        self.slots: list[list[Any]] = []
        self.steps: list[Any] = []
        n = opt.kind.slot_count
        for v, d in zip(variables, devices, strict=True):
            with tf.device(d):
                self.slots.append([tf.Variable(tf.zeros_like(v), trainable=False) for _ in range(n)])
                self.steps.append(tf.Variable(0.0, trainable=False))

    @property
    def variables(self) -> list[Any]:
        """The slots and step counters (what :attr:`DataParallel.state` adds to the parameters)."""
        return [s for slots in self.slots for s in slots] + list(self.steps)

    def apply(self, i: int, w: Any, g: Any) -> None:
        from hgpart.runtime.step import apply_update

        t = self.steps[i].assign_add(1.0) if self.opt.name != "momentum" else None
        apply_update(self.opt, w, g, self.slots[i], t)


def _loss_sum(model: Any, tv: list[Any], nv: list[Any], x: Any, y: Any, logits_out: bool) -> tuple[Any, list[Any]]:
    """Sum of per-example cross-entropies (the caller divides by the global batch) and the new non-trainables."""
    import tensorflow as tf

    out, new_nv = model.stateless_call(tv, nv, x, training=True)
    if not logits_out and getattr(out, "op", None) is not None and out.op.type == "Softmax":
        # the softmax's input: the numerically stable loss, as the MP runtime and Keras itself use; clipped
        # probabilities would give a zero gradient once a prediction saturates (a diverged run never recovers)
        out, logits_out = out.op.inputs[0], True
    if logits_out:
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=out)
    else:
        p = tf.clip_by_value(out, 1e-7, 1.0 - 1e-7)
        ce = -tf.math.log(tf.gather(p, y, axis=1, batch_dims=1))
    return tf.reduce_sum(ce), list(new_nv)


@dataclass
class DataParallel:
    """A compiled data-parallel strategy: per-slot step functions, bytes per step, evaluation."""

    name: str
    k: int
    batch_size: int
    task_batch: int  # images per call of a slot function
    slot_fns: list[Callable[[np.ndarray, np.ndarray], float]]
    comm_bytes_per_step: float
    feed_bytes_per_step: float
    bytes_source: str
    params: int
    evaluate: Callable[[np.ndarray, np.ndarray], tuple[float, float]]
    slot_devices: list[str] = field(default_factory=list)
    notes: str = ""
    #: the current trainable parameters of the reference copy (replica 0, or the parameter servers), as numpy
    weights: Callable[[], list[np.ndarray]] = field(default=lambda: [], repr=False)
    #: every replica's trainable parameters (synchronous strategies; one list for the others)
    replica_weights: Callable[[], list[list[np.ndarray]]] = field(default=lambda: [], repr=False)
    #: the placed concrete function behind each slot function (read by :func:`node_devices` for device traces)
    concretes: list[Any] = field(default_factory=list, repr=False)
    host: str = ""
    #: every variable a step writes (parameter copies, optimizer slots and step counters, non-trainable state)
    state: list[Any] = field(default_factory=list, repr=False)

    def warm_up(self, x: np.ndarray, y: np.ndarray) -> None:
        """One call of each distinct slot function on the first :attr:`task_batch` images, then every variable put
        back (:func:`hgpart.runtime.step.restoring`): the first calls' set-up is paid, no update is made."""
        from hgpart.runtime.step import restoring

        seen: set[int] = set()
        with restoring(self.state):
            for fn in self.slot_fns:
                if id(fn) not in seen:
                    seen.add(id(fn))
                    fn(x[: self.task_batch], y[: self.task_batch])


def node_devices(s: DataParallel) -> dict[str, str]:
    """Node name -> device of every op of the strategy's step graphs (what a profiler trace's kernels map to).

    The asynchronous strategies have one graph per worker; a node name that two graphs place on different devices
    is left out (its kernel events could not be attributed), the rest are merged.
    """
    from hgpart.runtime.traffic import graph_devices

    out: dict[str, str] = {}
    clash: set[str] = set()
    for cf in s.concretes:
        for name, dev in graph_devices(cf.graph, s.host).items():
            if out.setdefault(name, dev) != dev:
                clash.add(name)
    for name in clash:
        del out[name]
    return out


def _softmax_out(model: Any) -> bool:
    act = getattr(model.layers[-1], "activation", None)
    return getattr(act, "__name__", "") == "softmax"


def _evaluator(model: Any, tv: list[Any], nv: list[Any], host: str) -> Callable[[np.ndarray, np.ndarray],
                                                                               tuple[float, float]]:
    """Accuracy and mean loss of the given parameter copies on a fixed set (inference mode)."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def fn(x: Any) -> Any:
        out, _ = model.stateless_call([v.read_value() for v in tv], [v.read_value() for v in nv], x, training=False)
        return out

    soft = _softmax_out(model)

    def evaluate(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        with tf.device(host):
            out = fn(tf.constant(np.asarray(x, np.float32))).numpy()
        p = out if soft else _np_softmax(out)
        loss = float(np.mean(-np.log(np.clip(p[np.arange(len(y)), y], 1e-7, 1.0))))
        return float(np.mean(np.argmax(out, axis=1) == y)), loss

    return evaluate


def _np_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _copy(values: list[np.ndarray], device: str) -> list[Any]:
    import tensorflow as tf

    with tf.device(device):
        return [tf.Variable(v, trainable=False) for v in values]


def _input_shape(model: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in model.inputs[0].shape[1:])


# ---------------------------------------------------------------------------------------- sync (ring)
def ring_allreduce(grads: list[list[Any]], devices: list[str]) -> list[list[Any]]:
    """Sum replica gradients: reduce-scatter then all-gather of K chunks around the ring; one list per replica."""
    import tensorflow as tf

    k = len(devices)
    if k == 1:
        return grads
    shapes = [g.shape for g in grads[0]]
    sizes = [int(np.prod(s.as_list())) for s in shapes]
    total = sum(sizes)
    bounds = np.linspace(0, total, k + 1).astype(int)
    chunk_sizes = [int(b - a) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    flats, chunks = [], []
    for r, d in enumerate(devices):
        with tf.device(d), tf.name_scope(f"allreduce/flatten{r}"):
            flats.append(tf.concat([tf.reshape(g, [-1]) for g in grads[r]], 0))
            chunks.append(tf.split(flats[r], chunk_sizes))
    full: dict[tuple[int, int], Any] = {}  # (chunk, device) -> the summed chunk on that device
    for c in range(k):
        acc = None
        for hop in range(1, k + 1):  # start at c+1, end on c
            r = (c + hop) % k
            with tf.device(devices[r]), tf.name_scope(f"allreduce/reduce_c{c}"):
                acc = chunks[r][c] if acc is None else acc + chunks[r][c]
        full[(c, c)] = acc
        for hop in range(1, k):  # all-gather: c -> c+1 -> ... -> c+K-1, forwarding
            r = (c + hop) % k
            with tf.device(devices[r]), tf.name_scope(f"allreduce/gather_c{c}"):
                acc = tf.identity(acc)
            full[(c, r)] = acc
    out = []
    for r, d in enumerate(devices):
        with tf.device(d), tf.name_scope(f"allreduce/unflatten{r}"):
            flat = tf.concat([full[(c, r)] for c in range(k)], 0)
            out.append([tf.reshape(p, s) for p, s in zip(tf.split(flat, sizes), shapes, strict=True)])
    return out


def _sync(model: Any, devices: list[str], host: str, opt: Any, batch_size: int, name: str) -> DataParallel:
    import tensorflow as tf

    k = len(devices)
    if batch_size % k:
        raise BadOptionError(f"batch size {batch_size} is not divisible by K = {k} replicas", where=name,
                             fix="use a batch size that is a multiple of K", option="batch_size", value=batch_size)
    t0 = [v.numpy() for v in model.trainable_variables]
    n0 = [v.numpy() for v in model.non_trainable_variables]
    reps = [(_copy(t0, d), _copy(n0, d)) for d in devices]
    upd = [_Updates(opt, reps[r][0], [d] * len(t0)) for r, d in enumerate(devices)]
    logits = not _softmax_out(model)
    shape = (batch_size, *_input_shape(model))

    def step(x: Any, y: Any) -> Any:
        with tf.device(host), tf.name_scope("feed/split"):
            xs, ys = tf.split(x, k), tf.split(y, k)
        losses, grads, new_nv = [], [], []
        for r, d in enumerate(devices):
            tv, nv = reps[r]
            with tf.device(d), tf.name_scope(f"replica{r}"):
                reads = [v.read_value() for v in tv]
                s, nnv = _loss_sum(model, reads, [v.read_value() for v in nv], xs[r], ys[r], logits)
                loss = s / float(batch_size)
                grads.append(tf.gradients(loss, reads))
                losses.append(loss)
                new_nv.append(nnv)
        summed = ring_allreduce(grads, devices)
        for r, d in enumerate(devices):
            with tf.device(d), tf.name_scope(f"update{r}"):
                for i, (w, g) in enumerate(zip(reps[r][0], summed[r], strict=True)):
                    upd[r].apply(i, w, g)
                for v, nv in zip(reps[r][1], new_nv[0], strict=True):
                    v.assign(nv)
        with tf.device(host):
            return tf.add_n(losses)

    fn = tf.function(step, autograph=False)
    cf = fn.get_concrete_function(tf.TensorSpec(shape, tf.float32), tf.TensorSpec((batch_size,), tf.int32))
    b = cross_device_bytes(cf, host)
    call = _caller(cf, host)
    params = sum(int(v.size) for v in t0)
    return DataParallel(name, k, batch_size, batch_size, [call], b["comm"], b["feed"], "graph", params,
                        _evaluator(model, reps[0][0], reps[0][1], host), slot_devices=[devices[0]],
                        weights=lambda: [v.numpy() for v in reps[0][0]],
                        replica_weights=lambda: [[v.numpy() for v in r[0]] for r in reps], concretes=[cf], host=host,
                        state=[v for tv, nv in reps for v in tv + nv] + [v for u in upd for v in u.variables],
                        notes=(f"ring all-reduce over {k} replicas; expected 2(K-1)Pd = {ring_bytes(params, k)} B"
                               if k > 1 else "one device, no communication"))


def _caller(cf: Any, host: str) -> Callable[[np.ndarray, np.ndarray], float]:
    import tensorflow as tf

    def call(x: np.ndarray, y: np.ndarray) -> float:
        with tf.device(host):
            xt = tf.constant(np.asarray(x, np.float32))
            yt = tf.constant(np.asarray(y, np.int32))
        return float(cf(xt, yt).numpy())

    return call


# ------------------------------------------------------------------------------------ sync (mirrored)
def _mirrored(model: Any, devices: list[str], host: str, opt: Any, batch_size: int) -> DataParallel:
    import tensorflow as tf

    k = len(devices)
    if any("/job:localhost" not in d for d in devices):
        raise BadOptionError("MirroredStrategy runs on this process's own devices only", where="sync-dp-mirrored",
                             fix="use --devices logical, or sync-dp (explicit ring all-reduce) on worker processes",
                             option="--devices", value=devices)
    if batch_size % k:
        raise BadOptionError(f"batch size {batch_size} is not divisible by K = {k} replicas", where="sync-dp-mirrored",
                             option="batch_size", value=batch_size)
    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice(host))
    t0 = [v.numpy() for v in model.trainable_variables]
    n0 = [v.numpy() for v in model.non_trainable_variables]
    with strategy.scope():
        tv = [tf.Variable(v, trainable=False) for v in t0]
        nv = [tf.Variable(v, trainable=False,
                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA) for v in n0]
        upd = _Updates(opt, tv, [""] * len(tv))
    logits = not _softmax_out(model)
    shard = batch_size // k

    def replica_fn(x: Any, y: Any) -> Any:
        ctx = tf.distribute.get_replica_context()
        reads = [v.read_value() for v in tv]
        s, _ = _loss_sum(model, reads, [v.read_value() for v in nv], x, y, logits)
        loss = s / float(batch_size)
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.gradients(loss, reads))

        def apply(_: Any, gs: list[Any]) -> None:
            for i, (w, g) in enumerate(zip(tv, gs, strict=True)):
                strategy.extended.update(w, lambda var, grad, i=i: upd.apply(i, var, grad), args=(g,), group=False)

        ctx.merge_call(apply, args=(grads,))
        return loss

    @tf.function(autograph=False)  # no tensor-dependent Python control flow; AutoGraph only adds risk here
    def step(x: Any, y: Any) -> Any:
        def shard_x(ctx: Any) -> Any:
            return x[ctx.replica_id_in_sync_group * shard:(ctx.replica_id_in_sync_group + 1) * shard]

        def shard_y(ctx: Any) -> Any:
            return y[ctx.replica_id_in_sync_group * shard:(ctx.replica_id_in_sync_group + 1) * shard]

        xd = strategy.experimental_distribute_values_from_function(shard_x)
        yd = strategy.experimental_distribute_values_from_function(shard_y)
        per = strategy.run(replica_fn, args=(xd, yd))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)

    shape = (batch_size, *_input_shape(model))
    cf = step.get_concrete_function(tf.TensorSpec(shape, tf.float32), tf.TensorSpec((batch_size,), tf.int32))
    params = sum(int(v.size) for v in t0)
    return DataParallel("sync-dp-mirrored", k, batch_size, batch_size, [_caller(cf, host)], ring_bytes(params, k), 0.0,
                        "formula", params, _evaluator(model, tv, nv, host), slot_devices=[devices[0]],
                        weights=lambda: [v.numpy() for v in tv],
                        replica_weights=lambda: [[np.asarray(v.values[r]) for v in tv] for r in range(k)],
                        concretes=[cf], host=host, state=tv + nv + upd.variables,
                        notes="tf.distribute.MirroredStrategy custom loop (strategy.run, all_reduce, reduce); "
                              "collective bytes not visible in the graph: 2(K-1)Pd stated")


# ----------------------------------------------------------------------------------- async (PS)
def _async_ps(model: Any, devices: list[str], host: str, opt: Any, batch_size: int, strategy: Strategy) -> DataParallel:
    import tensorflow as tf

    k = len(devices)
    name = strategy.name
    if batch_size % k:
        raise BadOptionError(f"batch size {batch_size} is not divisible by K = {k} workers", where=name,
                             fix="use a batch size that is a multiple of K", option="batch_size", value=batch_size)
    t0 = [v.numpy() for v in model.trainable_variables]
    n0 = [v.numpy() for v in model.non_trainable_variables]
    one_ps = strategy.param_sync is ParamSync.ONE_PS
    if one_ps:
        t_dev = [devices[0]] * len(t0)
        n_dev = [devices[0]] * len(n0)
    else:
        t_dev = [devices[d] for d in greedy_assign([v.nbytes for v in t0], k)]
        n_dev = [devices[d] for d in greedy_assign([v.nbytes for v in n0], k)] if n0 else []
    with tf.device(host):
        tv = [_copy([v], d)[0] for v, d in zip(t0, t_dev, strict=True)]
        nv = [_copy([v], d)[0] for v, d in zip(n0, n_dev, strict=True)]
    upd = _Updates(opt, tv, t_dev)
    logits = not _softmax_out(model)
    wb = batch_size // k
    shape = (wb, *_input_shape(model))
    fns: list[Callable[[np.ndarray, np.ndarray], float]] = []
    cfs: list[Any] = []
    comm = feed = 0.0
    for w, d in enumerate(devices):
        def step(x: Any, y: Any, d: str = d, w: int = w) -> Any:
            # pull: each read runs on the parameter's device and its value is sent to the worker
            reads, nreads = [], []
            for v, vd in zip(tv, t_dev, strict=True):
                with tf.device(vd), tf.name_scope(f"pull{w}"):
                    reads.append(v.read_value())
            for v, vd in zip(nv, n_dev, strict=True):
                with tf.device(vd), tf.name_scope(f"pull{w}"):
                    nreads.append(v.read_value())
            with tf.device(d), tf.name_scope(f"worker{w}"):
                reads = [tf.identity(r) for r in reads]
                s, new_nv = _loss_sum(model, reads, [tf.identity(r) for r in nreads], x, y, logits)
                loss = s / float(wb)
                grads = tf.gradients(loss, reads)
            for i, (v, g, vd) in enumerate(zip(tv, grads, t_dev, strict=True)):
                with tf.device(vd), tf.name_scope(f"push{w}"):
                    upd.apply(i, v, g)
            for v, nn, vd in zip(nv, new_nv, n_dev, strict=True):
                with tf.device(vd):
                    v.assign(nn)
            return loss

        cf = tf.function(step, autograph=False).get_concrete_function(tf.TensorSpec(shape, tf.float32),
                                                                      tf.TensorSpec((wb,), tf.int32))
        b = cross_device_bytes(cf, host)
        comm += b["comm"]
        feed += b["feed"]
        fns.append(_caller(cf, host))
        cfs.append(cf)
    params = sum(int(v.size) for v in t0)
    loads = {dv: sum(v.nbytes for v, vd in zip(t0, t_dev, strict=True) if vd == dv) for dv in devices}
    return DataParallel(name, k, batch_size, wb, fns, comm, feed, "graph", params, _evaluator(model, tv, nv, host),
                        slot_devices=list(devices), weights=lambda: [v.numpy() for v in tv],
                        replica_weights=lambda: [[v.numpy() for v in tv]], concretes=cfs, host=host,
                        state=tv + nv + upd.variables,
                        notes=("one parameter server on device 0" if one_ps else
                               "parameters greedily by size: " + ", ".join(
                                   f"dev{i} {loads[dv] / 2**20:.2f} MiB" for i, dv in enumerate(devices)))
                        + f"; {k} asynchronous workers of {wb} images; a step = {k} worker updates")


def make_strategy(strategy: str | Strategy, keras_model: Any, device_set: Any, opt: Any, *,
                  batch_size: int) -> DataParallel:
    """Compile a data-parallel ``strategy`` (a :class:`~hgpart.runtime.strategy.Strategy` or its name; see the
    module docstring) for ``keras_model`` on ``device_set``."""
    devices = list(device_set.devices)
    host = getattr(device_set, "host", None) or devices[0]
    s = Strategy.parse(strategy, where="data-parallel strategy")
    if s.is_model_parallel:
        raise BadOptionError(f"{s.name} is model parallelism, not a data-parallel strategy", value=s.name,
                             fix=f"use one of {DP_STRATEGIES}")
    if s.param_sync is ParamSync.RING:  # "single" is the ring on one device: no communication
        return _sync(keras_model, devices if s.parallelism is Parallelism.DATA else devices[:1], host, opt, batch_size,
                     s.name)
    if s.param_sync is ParamSync.MIRRORED:
        return _mirrored(keras_model, devices, host, opt, batch_size)
    return _async_ps(keras_model, devices, host, opt, batch_size, s)


# ------------------------------------------------------------------------------------------- driver
def run_slots(fns: Sequence[Callable[[np.ndarray, np.ndarray], float]], xs: np.ndarray, ys: np.ndarray, *,
              on_step: Callable[[StepRecord], None] | None = None) -> list[StepRecord]:
    """Run tasks ``xs[i], ys[i]`` on the shared step driver (:func:`hgpart.runtime.pipeline.run_slots`).

    One thread per slot function; each takes the next task when free. Returns one
    :class:`~hgpart.runtime.pipeline.StepRecord` per task in finishing order.
    """
    return drive(fns, len(xs), stacked_tasks(xs, ys), images_per_task=int(xs.shape[1]) if xs.ndim > 1 else 0,
                 on_step=on_step, thread_name="hgpart-dp")
