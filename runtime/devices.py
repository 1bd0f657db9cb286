"""Device sets: the K TensorFlow devices a placement's parts run on.

Usage::

    from hgpart.runtime import open_devices
    with open_devices("logical", 2) as ds:
        ds.devices        # ['/job:localhost/replica:0/task:0/device:CPU:0', '.../CPU:1']

Part ``p`` of a placement runs on ``ds.devices[p]``. The same placement file runs on every kind:

* ``logical`` - K logical CPU devices in this process (placement labels only; they share one thread pool).
  Must be opened before TensorFlow initialises its devices; a second call with the same or a smaller K reuses
  the existing logical devices.
* ``gpu`` - one device per visible GPU.
* ``local`` / ``cluster:PATH`` - worker processes, delegated to :mod:`hgpart.runtime.cluster`.

:class:`DeviceSet` lives in :mod:`hgpart.runtime.deviceset` (re-exported here); this module imports it and
the cluster module, and neither of them imports this one.
"""

from __future__ import annotations

from hgpart.runtime import cluster
from hgpart.runtime.deviceset import DeviceSet

from hgpart.errors import HgpartError

__all__ = ["DeviceSet", "open_devices", "DEVICE_KINDS"]

DEVICE_KINDS = ("logical", "local", "gpu", "cluster:SPEC")


def _logical(k: int, inter_op: int) -> DeviceSet:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * k)
        tf.config.threading.set_inter_op_parallelism_threads(max(int(inter_op), k))
    except RuntimeError:
        # TensorFlow already initialised its devices: reuse them if there are enough.
        pass
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(names) < k:
        raise HgpartError(
            f"{k} logical CPU devices requested but TensorFlow is already initialised with {len(names)}",
            where="devices 'logical'",
            fix="open the devices before any other TensorFlow call, in a fresh process",
        )
    return DeviceSet("logical", [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(k)])


def _gpu(k: int) -> DeviceSet:
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) < k:
        raise HgpartError(
            f"the placement needs {k} GPUs but {len(gpus)} are visible",
            where="devices 'gpu'", fix="use a placement with K <= the GPU count, or --devices logical|local",
        )
    return DeviceSet("gpu", [f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(k)])


def open_devices(spec: str, k: int, *, inter_op: int = 4) -> DeviceSet:
    """Open K devices of the given kind (see the module docstring)."""
    if k < 1:
        raise HgpartError(f"K = {k} devices requested", fix="K must be >= 1")
    if spec == "logical":
        return _logical(k, inter_op)
    if spec == "gpu":
        return _gpu(k)
    if spec == "local":
        return cluster.open_local(k, inter_op=inter_op)
    if spec.startswith("cluster"):
        path = spec.partition(":")[2] or "TF_CONFIG"
        return cluster.open_cluster(path, k)
    raise HgpartError(f"unknown device kind {spec!r}", where="--devices",
                      fix="use logical, local, gpu or cluster:SPEC_FILE")
