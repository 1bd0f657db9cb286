"""Cluster files (``hgpart.cluster/1``): the devices and links a training run would use.

Usage::

    from hgpart.cluster import load_cluster
    c = load_cluster("thesis-cluster")        # a packaged preset, or a path to a JSON file
    c.num_devices, c.device.rate_flops        # 4, peak x efficiency in FLOP/s
    r = c.route(0, 1)                         # the ports a transfer from device 0 to device 1 holds
    r.seconds(2**20)                          # latency + bytes / bandwidth

A cluster is homogeneous: ``nodes`` x ``devices_per_node`` devices of one kind, device ``d`` on node
``d // devices_per_node``. A device's compute rate is a measured profile of that device kind (``profiles``, a folder
of ``hgpart profile`` files) for the models it holds, else its peak FLOP/s times an efficiency applied to the
layers' FLOP counts. Links are full-duplex ports: a transfer inside a node holds the sender's out-port and the
receiver's in-port of the ``intra_node`` link; a transfer between nodes holds the out- and in-ports of the
``inter_node`` link, owned by the node (one shared NIC) or by the device (one NIC per device). Two transfers that
need the same port take turns (see :mod:`hgpart.simulate`).

The JSON Schema is ``hgpart/data/cluster.schema.json``; ``docs/simulator.md`` describes every field. Presets are
packaged data files ``hgpart/data/cluster_<name>.json``; each figure in them names its source. The ``this-machine``
preset is the file ``hgpart calibrate`` writes (:func:`this_machine_path`, in the user's configuration folder),
because only a measurement of the machine at hand can describe it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hgpart.errors import BadFileError, BadOptionError
from hgpart.fileio import read_json
from hgpart.schemas import load_schema, schema_validator

__all__ = ["CLUSTER_FORMAT", "GIB", "PRESETS", "ClientCpuCost", "Cluster", "DeviceSpec", "Link", "PortOwner",
           "Route", "SplitCost", "split_cost_from_dict", "split_cost_to_dict", "load_cluster", "preset_path",
           "cluster_schema", "THIS_MACHINE", "this_machine_path"]

CLUSTER_FORMAT = "hgpart.cluster/1"
DATA = Path(__file__).resolve().parent / "data"
#: presets shipped as data files
PRESETS = ("thesis-cluster", "8gpu-nvlink")
#: the preset measured on the machine at hand by ``hgpart calibrate`` (a file in the user's configuration folder)
THIS_MACHINE = "this-machine"
GIB = 2**30


def this_machine_path() -> Path:
    """Where ``hgpart calibrate`` writes, and ``--cluster this-machine`` reads, this machine's cluster file.

    ``$XDG_CONFIG_HOME/hgpart/cluster_this-machine.json``, or ``~/.config/hgpart/...`` when the variable is unset or
    not an absolute path (the XDG Base Directory rule): a per-user setting, not part of any project folder.
    """
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "hgpart" / f"cluster_{THIS_MACHINE}.json"


class PortOwner(Enum):
    """Who owns the ports of a link: every device has its own, or the devices of a node share the node's."""

    DEVICE = "device"
    NODE = "node"


@dataclass(frozen=True)
class CallCost:
    """The wall seconds of one step call of the runtime that feeds ``bytes`` from its client and spans ``devices``
    devices (the input split over them, the loss back): ``fixed + bytes / feed_bandwidth``."""

    devices: int
    fixed: float  # s
    feed_bandwidth: float  # bytes/s

    def seconds(self, nbytes: float) -> float:
        return self.fixed + float(nbytes) / self.feed_bandwidth


@dataclass(frozen=True)
class ClientCpuCost:
    """The runtime client's CPU seconds per step call of one model at one batch size, where the client runs on the
    devices' own cores (local workers): the single device's step of ``batch_size`` images (also the cost of a
    sync data-parallel step), and an async data-parallel worker's of ``batch_size / 2``."""

    model: str
    input_shape: tuple[int, ...]
    batch_size: int
    step: float  # s
    async_call: float  # s


@dataclass(frozen=True)
class SplitCost:
    """The measured cost of one placement's split op structure on this device kind: its training step with every
    part on one device (no transfer: the smaller ops of split layers, the channel selections, concatenations and
    partial sums the runtime adds) against the same model's unsplit step, at one batch size and number of
    micro-batches, timed side by side by ``hgpart calibrate-split``. ``factor`` scales the placement's layer times;
    ``whole_ms`` at one micro-batch is the runtime's own step of the model on one device, whose excess over the
    layers the simulator charges per call (:func:`hgpart.simulate.costs.worker_call_cost`)."""

    placement: str  # Placement.content_hash() of the placement measured
    model: str
    batch_size: int
    micro_batches: int
    whole_ms: float  # the unsplit step (one part), same batch and micro-batches
    split_ms: float  # the placement's step, every part on the one device
    input_shape: tuple[int, ...] | None = None  # the model's input (None: a file written before it was recorded)

    @property
    def factor(self) -> float:
        return self.split_ms / self.whole_ms


@dataclass(frozen=True)
class DeviceSpec:
    """One device kind: compute rate, memory capacity and memory bandwidth (optimizer updates)."""

    kind: str
    memory_bytes: float
    memory_bandwidth: float  # bytes/s
    peak_flops: float | None = None  # FLOP/s
    efficiency: float | None = None
    profiles: Path | None = None  # folder of measured profiles of this device kind
    profile_cores: int | None = None  # only profiles measured with this many cores describe it (None: any)
    call_overhead: float = 0.0  # s: the fixed wall time of one step call of the runtime (client feed and fetch)
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: measured step calls that feed from the client, by devices spanned (empty: ``call_overhead`` for every call)
    step_calls: tuple[CallCost, ...] = ()
    #: measured client CPU per step call, by model and batch size (empty: the client has cores of its own)
    client_cpu: tuple[ClientCpuCost, ...] = ()
    #: the runtime's inter-op threads run several ops at once on the device's cores, sharing them (a CPU worker);
    #: False: one op at a time (a GPU's stream)
    ops_share_cores: bool = False
    #: measured costs of placements' split op structure (``hgpart calibrate-split``; empty: not charged)
    split_costs: tuple[SplitCost, ...] = ()

    def split_cost(self, placement: str, batch: int, micro_batches: int) -> SplitCost | None:
        """The measured split cost of the placement with content hash ``placement`` at ``micro_batches`` and the
        batch size nearest ``batch`` (by ratio), or ``None`` when it was not measured."""
        mine = [c for c in self.split_costs if c.placement == placement and c.micro_batches == micro_batches]
        if not mine:
            return None
        return min(mine, key=lambda c: (abs(math.log(c.batch_size / batch)), c.batch_size))

    def client_seconds(self, model: str, input_shape: Sequence[int], batch: int) -> ClientCpuCost | None:
        """The measured client CPU of ``model`` at ``input_shape`` and the batch size nearest ``batch`` (by ratio),
        or ``None`` when the cluster has none for this model."""
        mine = [c for c in self.client_cpu if c.model == model and c.input_shape == tuple(input_shape)]
        if not mine:
            return None
        return min(mine, key=lambda c: (abs(math.log(c.batch_size / batch)), c.batch_size))

    def call_seconds(self, nbytes: float, devices: int) -> float:
        """Wall seconds of a step call that feeds ``nbytes`` from the client to ``devices`` devices: the measured
        call spanning the most devices up to ``devices`` (the fewest, if none is that small), else
        ``call_overhead``."""
        if not self.step_calls:
            return self.call_overhead
        fit = [c for c in self.step_calls if c.devices <= devices]
        pick = max(fit, key=lambda c: c.devices) if fit else min(self.step_calls, key=lambda c: c.devices)
        return pick.seconds(nbytes)

    @property
    def rate_flops(self) -> float | None:
        """Sustained FLOP/s: peak x efficiency (``None`` when the kind is described by profiles only)."""
        if self.peak_flops is None:
            return None
        return self.peak_flops * (self.efficiency if self.efficiency is not None else 1.0)


@dataclass(frozen=True)
class RingCost:
    """A measured all-reduce over ``replicas`` devices joined by one link kind, as the runtime runs it:
    ``seconds = fixed + bytes / bandwidth + tensors x per_tensor`` for every replica's gradients of ``bytes`` in
    ``tensors`` tensors. It stands for the whole collective (transfers and the copies on the devices' own cores)."""

    replicas: int
    fixed: float  # s
    bandwidth: float  # gradient bytes per s
    per_tensor: float  # s

    def seconds(self, nbytes: float, tensors: int) -> float:
        return self.fixed + float(nbytes) / self.bandwidth + tensors * self.per_tensor


@dataclass(frozen=True)
class Link:
    """A link kind: bandwidth per direction (bytes/s), latency (s), who owns its ports."""

    bandwidth: float
    latency: float
    port_per: PortOwner
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: a transfer also holds both end devices: the copies are their own CPU work (local CPU worker processes)
    holds_devices: bool = False
    #: the runtime's ring all-reduce over this link, measured (None: the simulator builds it from transfers)
    allreduce: RingCost | None = None
    #: seconds each tensor beyond the first adds to a transfer of several tensors in one step function (their
    #: send/receive pairs run at once); None: the latency, as if each were sent alone
    per_tensor: float | None = None

    @property
    def tensor_seconds(self) -> float:
        """What each further tensor of one many-tensor transfer costs: ``per_tensor``, else the latency."""
        return self.latency if self.per_tensor is None else self.per_tensor


@dataclass(frozen=True)
class Route:
    """What a transfer between two devices holds (port names) and how long it takes."""

    ports: tuple[str, ...]
    link: Link

    def seconds(self, nbytes: float) -> float:
        """Latency + bytes / bandwidth (the alpha-beta model)."""
        return self.link.latency + float(nbytes) / self.link.bandwidth


@dataclass(frozen=True)
class Cluster:
    """A validated cluster file."""

    name: str
    nodes: int
    devices_per_node: int
    device: DeviceSpec
    intra: Link | None
    inter: Link | None
    description: str = ""
    path: str = ""

    @property
    def num_devices(self) -> int:
        return self.nodes * self.devices_per_node

    def node_of(self, device: int) -> int:
        return device // self.devices_per_node

    def route(self, src: int, dst: int) -> Route:
        """The ports held by a transfer from ``src`` to ``dst`` (two distinct devices of this cluster)."""
        if not (0 <= src < self.num_devices and 0 <= dst < self.num_devices) or src == dst:
            raise BadOptionError(f"no route from device {src} to device {dst}", where=f"cluster {self.name}",
                                 fix=f"devices are 0..{self.num_devices - 1} and must differ")
        same = self.node_of(src) == self.node_of(dst)
        link = self.intra if same else self.inter
        if link is None:  # checked at load time; kept for the type checker
            raise BadOptionError(f"cluster {self.name} has no {'intra' if same else 'inter'}-node link")
        if link.port_per is PortOwner.NODE:
            a, b = f"n{self.node_of(src)}", f"n{self.node_of(dst)}"
        else:
            a, b = f"d{src}", f"d{dst}"
        tag = "intra" if same else "inter"
        return Route((f"{tag}-out:{a}", f"{tag}-in:{b}"), link)

    def describe(self) -> str:
        d = self.device
        rate = f"{d.rate_flops / 1e12:.2f} TFLOP/s sustained" if d.rate_flops else f"profiles in {d.profiles}"
        links = []
        for tag, link in (("intra-node", self.intra), ("inter-node", self.inter)):
            if link is not None:
                links.append(f"{tag} {link.bandwidth / 1e9:g} GB/s, {link.latency * 1e6:g} us")
        return (f"{self.name}: {self.nodes} node(s) x {self.devices_per_node} {d.kind} ({rate}, "
                f"{d.memory_bytes / GIB:g} GiB); " + "; ".join(links))


def cluster_schema() -> dict[str, Any]:
    """The JSON Schema shipped in the package (``hgpart/data/cluster.schema.json``)."""
    return load_schema("cluster")


def preset_path(name: str) -> Path | None:
    """The packaged file of preset ``name``, or ``None`` if there is no such preset."""
    path = DATA / f"cluster_{name}.json"
    return path if name in PRESETS and path.is_file() else None


def load_cluster(name_or_path: str | Path) -> Cluster:
    """A preset by name (:data:`PRESETS`, :data:`THIS_MACHINE`) or a cluster file by path; any defect is one
    :class:`BadFileError`."""
    text = str(name_or_path)
    if text == THIS_MACHINE:
        mine = this_machine_path()
        if not mine.is_file():
            raise BadOptionError(f"no calibration of this machine at {str(mine)!r}: run `hgpart calibrate` first",
                                 where="--cluster", option="--cluster", value=text,
                                 fix=f"`hgpart calibrate` measures it and writes that file, or use one of "
                                     f"{', '.join(PRESETS)}")
        return cluster_from_dict(read_json(mine, what="cluster file"), where=str(mine), base=mine.parent)
    preset = preset_path(text)
    path = preset if preset is not None else Path(text)
    if preset is None:
        if not path.exists() and path.suffix != ".json" and "/" not in text:
            raise BadOptionError(f"unknown cluster {text!r}", where="--cluster", option="--cluster", value=text,
                                 fix=f"use a preset ({', '.join((*PRESETS, THIS_MACHINE))}) or the path of a "
                                     "cluster file")
    return cluster_from_dict(read_json(path, what="cluster file"), where=str(path), base=path.parent)


def cluster_from_dict(d: Any, *, where: str = "cluster", base: Path | None = None) -> Cluster:
    """Validate a parsed cluster file (schema, then the rules the schema cannot say) and type it."""
    import jsonschema

    if not isinstance(d, dict) or d.get("format") != CLUSTER_FORMAT:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise BadFileError(f"not an hgpart cluster file (format {got!r})", where=where, path=where,
                           fix=f"expected format {CLUSTER_FORMAT!r}; see docs/simulator.md")
    error = jsonschema.exceptions.best_match(schema_validator("cluster").iter_errors(d))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise BadFileError(f"cluster file is malformed at {at}: {error.message[:160]}", where=where, path=where,
                           fix="see hgpart/data/cluster.schema.json and docs/simulator.md")
    dev = d["device"]
    has_peak = "peak_TFLOPs" in dev
    if not has_peak and "profiles" not in dev:
        raise BadFileError("the device has neither peak_TFLOPs (with efficiency) nor profiles", where=where,
                           path=where, fix="give device.peak_TFLOPs and device.efficiency, or a profiles folder")
    if has_peak != ("efficiency" in dev):
        raise BadFileError("device.peak_TFLOPs and device.efficiency go together", where=where, path=where,
                           fix="give both (efficiency: the fraction of peak a training step sustains)")
    profiles = None
    if "profiles" in dev:
        profiles = Path(dev["profiles"])
        profiles = profiles if profiles.is_absolute() else (base or Path(".")) / profiles
    device = DeviceSpec(kind=dev["kind"], memory_bytes=float(dev["memory_GiB"]) * GIB,
                        memory_bandwidth=float(dev["memory_bandwidth_GBps"]) * 1e9,
                        peak_flops=float(dev["peak_TFLOPs"]) * 1e12 if has_peak else None,
                        efficiency=float(dev["efficiency"]) if has_peak else None, profiles=profiles,
                        profile_cores=int(dev["profile_cores"]) if "profile_cores" in dev else None,
                        call_overhead=float(dev.get("call_overhead_us", 0.0)) * 1e-6,
                        sources=dict(dev.get("sources", {})),
                        step_calls=tuple(CallCost(int(c["devices"]), float(c["fixed_us"]) * 1e-6,
                                                  float(c["feed_GBps"]) * 1e9) for c in dev.get("step_calls", ())),
                        client_cpu=tuple(ClientCpuCost(str(c["model"]), tuple(int(v) for v in c["input"]),
                                                   int(c["batch_size"]), float(c["step_us"]) * 1e-6,
                                                   float(c["async_call_us"]) * 1e-6)
                                         for c in dev.get("client_cpu", ())),
                        ops_share_cores=bool(dev.get("ops_share_cores", False)),
                        split_costs=tuple(split_cost_from_dict(c) for c in dev.get("split_costs", ())))
    links = d["links"]
    intra = _link(links.get("intra_node"), PortOwner.DEVICE)
    inter = _link(links.get("inter_node"), PortOwner.NODE)
    if d["devices_per_node"] > 1 and intra is None:
        raise BadFileError(f"{d['devices_per_node']} devices per node but no links.intra_node", where=where,
                           path=where, fix="describe the link between devices of one node")
    if d["nodes"] > 1 and inter is None:
        raise BadFileError(f"{d['nodes']} nodes but no links.inter_node", where=where, path=where,
                           fix="describe the network between nodes")
    return Cluster(name=d["name"], nodes=int(d["nodes"]), devices_per_node=int(d["devices_per_node"]), device=device,
                   intra=intra, inter=inter, description=str(d.get("description", "")), path=where)


def split_cost_from_dict(c: dict[str, Any]) -> SplitCost:
    """A ``device.split_costs`` entry of a (schema-valid) cluster file."""
    shape = tuple(int(v) for v in c["input"]) if "input" in c else None
    return SplitCost(str(c["placement"]), str(c["model"]), int(c["batch_size"]), int(c["micro_batches"]),
                     float(c["whole_ms"]), float(c["split_ms"]), shape)


def split_cost_to_dict(c: SplitCost) -> dict[str, Any]:
    """The ``device.split_costs`` entry of ``c``, as :func:`split_cost_from_dict` reads it."""
    out = {"placement": c.placement, "model": c.model, "batch_size": c.batch_size,
           "micro_batches": c.micro_batches, "whole_ms": round(c.whole_ms, 4), "split_ms": round(c.split_ms, 4),
           "factor": round(c.factor, 4)}
    return out if c.input_shape is None else {**out, "input": list(c.input_shape)}


def _link(d: dict[str, Any] | None, default: PortOwner) -> Link | None:
    if d is None:
        return None
    ar = d.get("allreduce")
    ring = None if ar is None else RingCost(replicas=int(ar["replicas"]), fixed=float(ar["fixed_us"]) * 1e-6,
                                            bandwidth=float(ar["bandwidth_GBps"]) * 1e9,
                                            per_tensor=float(ar["per_tensor_us"]) * 1e-6)
    return Link(bandwidth=float(d["bandwidth_GBps"]) * 1e9, latency=float(d["latency_us"]) * 1e-6,
                port_per=PortOwner(d.get("port_per", default.value)), sources=dict(d.get("sources", {})),
                holds_devices=bool(d.get("holds_devices", False)), allreduce=ring,
                per_tensor=None if d.get("per_tensor_us") is None else float(d["per_tensor_us"]) * 1e-6)
