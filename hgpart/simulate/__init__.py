"""Predict training time on a cluster before buying it: a discrete-event simulation of training steps.

Usage::

    from hgpart.cluster import load_cluster
    from hgpart.placement import load_placement
    from hgpart.simulate import Mode, SimOptions, SimStrategy, simulate
    res = simulate(load_placement("partitions/vgg16_coarse_k4.json"), load_cluster("thesis-cluster"),
                   SimOptions(batch_size=32, mode=Mode.ASYNC, inflight=4))
    res.images_per_s, res.epoch_s, [m.fits for m in res.memory], res.path_seconds()
    res.write_trace("trace/")

Modules, in the order the data flows: :mod:`~hgpart.simulate.costs` (layer and update seconds on a device kind),
:mod:`~hgpart.simulate.mpgraph` (one model-parallel batch as tasks), :mod:`~hgpart.simulate.workloads` (every
strategy as jobs), :mod:`~hgpart.simulate.engine` (the event loop), :mod:`~hgpart.simulate.timeline` (busy time,
critical path, trace), :mod:`~hgpart.simulate.run` (the entry point) and :mod:`~hgpart.simulate.paradl` (ParaDL's
closed-form equations, for comparison). ``docs/simulator.md`` states the model and its limits.
"""

from hgpart.simulate.run import DeviceMemory, SimOptions, SimPipeline, SimResult, SimStrategy, simulate
from hgpart.simulate.workloads import Mode

__all__ = ["DeviceMemory", "Mode", "SimOptions", "SimPipeline", "SimResult", "SimStrategy", "simulate"]
