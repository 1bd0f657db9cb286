"""hgpart runtime: train a placement file's partitioned model on K TensorFlow devices (thesis chapter 4).

Usage::

    from hgpart.runtime import open_devices, train
    result = train("partitions/minivgg_coarse_k2.json", devices="logical", steps=20, mode="async")

Importing this package does not import TensorFlow; the functions do, when called.
"""

from __future__ import annotations

from hgpart.runtime.devices import DeviceSet, open_devices
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.step import OptimizerSpec, TrainStep
from hgpart.runtime.traffic import Traffic, measure_traffic
from hgpart.runtime.train import TrainResult, train

__all__ = ["DeviceSet", "open_devices", "PlacedModel", "OptimizerSpec", "TrainStep", "Traffic",
           "measure_traffic", "TrainResult", "train"]
