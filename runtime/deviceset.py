"""The device set: the K TensorFlow device strings a placement's parts run on, and what must be stopped.

Usage::

    from hgpart.runtime import open_devices
    with open_devices("local", 2) as ds:   # a DeviceSet
        ds.devices                          # ['/job:worker/replica:0/task:0/device:CPU:0', ...]
        ds.check()                          # raises the recorded HgpartError if a worker has died

This module is the base both :mod:`hgpart.runtime.devices` (which opens sets of every kind) and
:mod:`hgpart.runtime.cluster` (which starts and watches worker processes) import; it imports neither.
A set of worker processes holds its :class:`WorkerGroup` explicitly, so the cluster code finds what to
watch and stop from the set itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["DeviceSet", "WorkerGroup"]


class WorkerGroup(Protocol):
    """The worker processes (local) or servers (remote) behind a device set."""

    kind: str

    def check(self) -> None:
        """Raise the recorded :class:`~hgpart.errors.HgpartError` if a worker has died."""

    def stop(self) -> None:
        """Stop every worker this group started (idempotent)."""


@dataclass
class DeviceSet:
    """K TensorFlow device strings plus the worker group (if any) to watch and stop."""

    kind: str  # "logical" | "local" | "gpu" | "cluster"
    devices: list[str]
    #: the client-side device that feeds input batches and labels
    host: str = "/job:localhost/replica:0/task:0/device:CPU:0"
    #: the workers behind a "local" or "cluster" set; None for in-process devices
    workers: WorkerGroup | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)

    @property
    def k(self) -> int:
        return len(self.devices)

    def check(self) -> None:
        """Raise the recorded failure if a worker of this set has died (no-op for in-process devices)."""
        if self.workers is not None:
            self.workers.check()

    def close(self) -> None:
        """Stop anything this set started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.workers is not None:
            self.workers.stop()

    def __enter__(self) -> DeviceSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
