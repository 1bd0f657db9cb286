"""hgpart runtime: train a placement file's partitioned model on K TensorFlow devices (thesis chapter 4).

Usage::

    from hgpart.runtime import PartitionedModel, load_data, train
    with PartitionedModel.from_placement("partitions/minivgg_coarse_k2.json", devices="local") as pm:
        pm.fit(x, y, epochs=3, batch_size=32, validation_split=0.2)     # Keras's verbs
        pm.save("minivgg.keras")
    result = train("partitions/minivgg_coarse_k2.json", devices="logical", steps=20, mode="async")  # as the CLI

Importing this package does not import TensorFlow; the functions do, when called.
"""

from __future__ import annotations

from hgpart.runtime.api import History, PartitionedModel
from hgpart.runtime.data import Data, load_data
from hgpart.runtime.devices import DeviceSet, open_devices
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.step import OptimizerSpec, TrainStep
from hgpart.runtime.traffic import Traffic, measure_traffic
from hgpart.runtime.train import TrainResult, train

__all__ = ["PartitionedModel", "History", "Data", "load_data", "DeviceSet", "open_devices", "PlacedModel",
           "OptimizerSpec", "TrainStep", "Traffic", "measure_traffic", "TrainResult", "train"]
