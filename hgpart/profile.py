"""Profiles: the measured (or analytic) cost of every layer at one batch size.

Usage::

    prof = Profile.load("profiles/vgg16_224_b32.json")
    prof.check(graph)                 # refuses a profile made for another model
    work = prof.work()                # {layer name: forward+backward (+ update) cost per step}

A profile is plain data; producing one (timing layers in TensorFlow) lives in
:mod:`hgpart.profiler`, so reading a profile never imports TensorFlow.
Measured profiles give work in milliseconds (forward + backward, plus the optimizer
update of the layer's weights where it was measured); analytic ones
give work in MFLOP (forward FLOPs x 3 for forward plus backward, times the
batch size).

A measured profile is the cost on one kind of device: :class:`ProfileSetup`
records the cores, thread pools, pinning and timing method it was made with
(files written before it existed get the defaults they were made with), and
:class:`ProfileQuality` how well it is pinned down: each layer's spread, and
the sum of the layers against a measured whole training step.
:mod:`hgpart.profile_compare` puts profiles side by side.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hgpart.errors import HgpartError
from hgpart.fileio import read_json, write_json
from hgpart.layergraph import LayerGraph

__all__ = ["LayerCost", "Profile", "ProfileSetup", "ProfileQuality", "PROFILE_FORMAT", "SPREAD_TARGET",
           "analytic_profile", "default_profile_path"]

PROFILE_FORMAT = "hgpart.profile/1"
MODES = ("measured", "analytic")
#: largest accepted per-layer figures: beyond them sums lose precision or overflow (ms, and FLOPs / bytes)
MAX_MS = 1e12
MAX_COUNT = 2**62
BACKWARD_FLOP_FACTOR = 2.0  # backward costs about twice the forward pass (input + weight gradients)
SPREAD_TARGET = 0.05  # a layer's relative 95 % confidence half-width the profiler aims for


@dataclass
class LayerCost:
    """Cost of one layer at the profile's batch size."""

    name: str
    forward_ms: float
    backward_ms: float
    flops: int
    params: int
    activation_bytes: int
    spread: float | None = None  # relative 95 % confidence half-width of forward+backward (None: not recorded)
    samples: int | None = None  # timed forward+backward samples taken (None: not recorded)
    #: one optimizer update of the layer's trainable weights, as the runtime's per-device optimizer runs it (the
    #: fused Adam kernel); None: not measured (analytic profiles, files written before it was recorded)
    update_ms: float | None = None

    @property
    def total_ms(self) -> float:
        return self.forward_ms + self.backward_ms

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: v for k, v in d.items() if v is not None or k not in ("spread", "samples", "update_ms")}


@dataclass(frozen=True)
class ProfileSetup:
    """The device a measured profile stands for and how it was timed.

    ``cores`` is the number of CPU cores the process could run on, ``pinned``
    whether it was pinned to them (as a local runtime worker is), the thread
    counts those of TensorFlow's pools (0: TensorFlow's default, one per
    core). ``clock`` is ``wall`` or ``process_cpu``; ``statistic`` how the
    samples of a layer became its cost (``median``, ``min``, ``low_half``);
    ``interleaved`` whether samples were taken in rounds over all layers.
    """

    cores: int
    pinned: bool = False
    affinity: tuple[int, ...] = ()
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    clock: str = "wall"
    statistic: str = "median"
    interleaved: bool = False
    min_rounds: int = 0
    max_rounds: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["affinity"] = list(self.affinity)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ProfileSetup:
        if not isinstance(d, dict):
            raise TypeError(f"setup is a {type(d).__name__}, not an object")
        return ProfileSetup(
            cores=int(d["cores"]), pinned=bool(d.get("pinned", False)),
            affinity=tuple(int(c) for c in d.get("affinity", ())),
            intra_op_threads=int(d.get("intra_op_threads", 0)), inter_op_threads=int(d.get("inter_op_threads", 0)),
            clock=str(d.get("clock", "wall")), statistic=str(d.get("statistic", "median")),
            interleaved=bool(d.get("interleaved", False)), min_rounds=int(d.get("min_rounds", 0)),
            max_rounds=int(d.get("max_rounds", 0)),
        )

    @staticmethod
    def inferred(machine: dict[str, Any], repeats: int) -> ProfileSetup:
        """What a profile written before setups were recorded was made with: every core, median wall time."""
        cores = int(machine.get("usable_cores") or machine.get("logical_cores") or 0)
        return ProfileSetup(cores=cores, intra_op_threads=int(machine.get("intra_op_threads") or 0),
                            inter_op_threads=int(machine.get("inter_op_threads") or 0),
                            min_rounds=repeats, max_rounds=repeats)

    def describe(self) -> str:
        pin = f"pinned to cores {','.join(map(str, self.affinity))}" if self.pinned else "unpinned"
        threads = "/".join(str(t) if t else "default" for t in (self.intra_op_threads, self.inter_op_threads))
        order = "interleaved rounds" if self.interleaved else "layer by layer"
        timing = f"{self.statistic} {self.clock} time"
        return f"{self.cores} core(s) {pin}, intra/inter-op threads {threads}, {timing}, {order}"


@dataclass(frozen=True)
class ProfileQuality:
    """How well a measured profile is pinned down.

    ``step_ms`` is one measured training step of the whole model (forward,
    backward and an SGD update) at the profile's batch size, with the same
    threads, clock and statistic as the layers; ``step_spread`` its relative
    confidence half-width. ``rounds`` is the number of sampling rounds taken.
    """

    step_ms: float | None = None
    step_spread: float | None = None
    target: float = SPREAD_TARGET
    rounds: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ProfileQuality:
        if not isinstance(d, dict):
            raise TypeError(f"quality is a {type(d).__name__}, not an object")

        def opt(key: str) -> float | None:
            return None if d.get(key) is None else float(d[key])

        return ProfileQuality(step_ms=opt("step_ms"), step_spread=opt("step_spread"),
                              target=float(d.get("target", SPREAD_TARGET)), rounds=int(d.get("rounds", 0)),
                              seconds=float(d.get("seconds", 0.0)))


@dataclass
class Profile:
    """Per-layer costs of one model at one input size and batch size."""

    model: str
    input_shape: tuple[int, ...]
    batch_size: int
    mode: str  # "measured" | "analytic"
    fingerprint: str
    layers: list[LayerCost]
    machine: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    repeats: int = 0
    graph: dict[str, Any] | None = None  # the LayerGraph dict it was made for (optional, for downstream checks)
    recorded_setup: ProfileSetup | None = None  # None: a file written before setups were recorded
    quality: ProfileQuality | None = None

    @property
    def setup(self) -> ProfileSetup:
        """The recorded setup, or the one an older file was made with."""
        return self.recorded_setup or ProfileSetup.inferred(self.machine, self.repeats)

    @property
    def layer_sum_ms(self) -> float:
        return float(sum(c.total_ms for c in self.layers))

    @property
    def work_unit(self) -> str:
        return "ms" if self.mode == "measured" else "MFLOP"

    def work(self) -> dict[str, float]:
        """Work of every layer per training step in :attr:`work_unit`: forward + backward, plus the optimizer
        update of its weights where the profile measured it.

        The update belongs to the layer's work because each part updates the weights it holds (collocated
        gradients, one optimizer per device): a part holding a large fully connected layer also pays for its
        update, which partitioning by forward+backward alone does not see.
        """
        if self.mode == "measured":
            return {c.name: float(c.total_ms + (c.update_ms or 0.0)) for c in self.layers}
        scale = (1.0 + BACKWARD_FLOP_FACTOR) * self.batch_size / 1e6
        return {c.name: float(c.flops) * scale for c in self.layers}

    def check(self, graph: LayerGraph, *, path: str | None = None) -> None:
        """Refuse a profile that was made for another layer graph."""
        fp = graph.fingerprint()
        if self.fingerprint != fp:
            raise HgpartError(
                f"profile is for model {self.model!r} with fingerprint {self.fingerprint}, "
                f"but {graph.name!r} at input {list(graph.input_shape)} has fingerprint {fp}",
                where=path or "profile",
                fix=f"run `hgpart profile --model {graph.name}` to make a matching profile",
            )
        have = {c.name for c in self.layers}
        missing = [layer.name for layer in graph.layers if layer.name not in have]
        extra = sorted(have - {layer.name for layer in graph.layers})
        if missing or extra:
            raise HgpartError(
                f"profile layers differ from {graph.name!r}'s: "
                + (f"missing {missing[:3]}" if missing else f"unknown {extra[:3]}"),
                where=path or "profile", fix="the file was edited or is corrupt; regenerate it with `hgpart profile`",
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "model": self.model,
            "input_shape": list(self.input_shape),
            "batch_size": self.batch_size,
            "mode": self.mode,
            "work_unit": self.work_unit,
            "fingerprint": self.fingerprint,
            "created": self.created,
            "repeats": self.repeats,
            "machine": self.machine,
            **({"setup": self.recorded_setup.to_dict()} if self.recorded_setup is not None else {}),
            **({"quality": self.quality.to_dict()} if self.quality is not None else {}),
            "layers": [c.to_dict() for c in self.layers],
            **({"graph": self.graph} if self.graph is not None else {}),
        }

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), what="profile")

    @staticmethod
    def from_dict(d: dict[str, Any], *, where: str = "profile") -> Profile:
        if not isinstance(d, dict) or d.get("format") != PROFILE_FORMAT:
            raise HgpartError(
                f"not an hgpart profile (format {d.get('format') if isinstance(d, dict) else None!r})",
                where=where, fix=f"expected format {PROFILE_FORMAT!r}; make one with `hgpart profile`",
            )
        try:
            prof = Profile(
                model=_typed(d["model"], str, "model"),
                input_shape=tuple(_count(v, "input_shape", low=1) for v in _typed(d["input_shape"], list,
                                                                                     "input_shape")),
                batch_size=_count(d["batch_size"], "batch_size", low=1),
                mode=_typed(d["mode"], str, "mode"),
                fingerprint=_typed(d["fingerprint"], str, "fingerprint"),
                layers=[_layer_cost(c, i) for i, c in enumerate(_typed(d["layers"], list, "layers"))],
                machine=dict(_typed(d.get("machine", {}), dict, "machine")),
                created=str(d.get("created", "")),
                repeats=_count(d.get("repeats", 0), "repeats", low=0),
                graph=d.get("graph") if isinstance(d.get("graph"), dict) else None,
                recorded_setup=ProfileSetup.from_dict(d["setup"]) if d.get("setup") is not None else None,
                quality=ProfileQuality.from_dict(d["quality"]) if d.get("quality") is not None else None,
            )
        except KeyError as exc:
            raise HgpartError(f"malformed profile (no {exc} entry)", where=where, fix="regenerate it") from None
        except (TypeError, ValueError) as exc:
            raise HgpartError(f"malformed profile ({exc})", where=where, fix="regenerate it") from None
        if prof.mode not in MODES:
            raise HgpartError(f"malformed profile (mode {prof.mode!r}, not one of {MODES})", where=where,
                              fix="regenerate it")
        if not prof.input_shape:
            raise HgpartError("malformed profile (empty input_shape)", where=where, fix="regenerate it")
        names = [c.name for c in prof.layers]
        if len(set(names)) != len(names):
            raise HgpartError("malformed profile (a layer is listed twice)", where=where, fix="regenerate it")
        return prof

    @staticmethod
    def load(path: str | Path) -> Profile:
        return Profile.from_dict(read_json(path, what="profile"), where=str(path))


def default_profile_path(graph: LayerGraph, batch_size: int, folder: str | Path = "profiles", *,
                         cores: int | None = None) -> Path:
    """``profiles/<model>_<input>_b<batch>.json``, or ``..._b<batch>_c<cores>.json`` for a pinned profile."""
    suffix = f"_c{cores}" if cores is not None else ""
    return Path(folder) / f"{graph.name}_{graph.input_tag}_b{batch_size}{suffix}.json"


def analytic_profile(graph: LayerGraph, batch_size: int) -> Profile:
    """A profile from the layer graph's exact FLOP counts (no timing, no TensorFlow)."""
    d = 4
    layers = [
        LayerCost(
            name=layer.name,
            forward_ms=0.0,
            backward_ms=0.0,
            flops=int(layer.flops),
            params=int(layer.params),
            activation_bytes=int(batch_size * d * _prod(layer.output_shape)),
        )
        for layer in graph.layers
    ]
    return Profile(
        model=graph.name,
        input_shape=graph.input_shape,
        batch_size=batch_size,
        mode="analytic",
        fingerprint=graph.fingerprint(),
        layers=layers,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for v in shape:
        out *= int(v)
    return out


def _typed(value: Any, kind: type, key: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{key} is {type(value).__name__}, expected {kind.__name__}")
    return value


def _count(value: Any, key: str, *, low: int) -> int:
    """An integer entry in low..MAX_COUNT (JSON gives ints; booleans and floats are refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_COUNT:
        raise ValueError(f"{key} = {value!r} is not an integer in {low}..{MAX_COUNT}")
    return value


def _ms(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= MAX_MS:
        raise ValueError(f"{key} = {value!r} is not a time in 0..{MAX_MS:g} ms")
    return float(value)


def _layer_cost(c: Any, i: int) -> LayerCost:
    """One entry of ``layers``, every field checked (a wrong type would fail much later, far from the file)."""
    if not isinstance(c, dict):
        raise TypeError(f"layers[{i}] is {type(c).__name__}, expected an object")
    unknown = set(c) - set(LayerCost.__dataclass_fields__)
    if unknown:
        raise ValueError(f"layers[{i}] has unknown entries {sorted(unknown)[:3]}")
    key = f"layers[{i}]"
    return LayerCost(name=_typed(c["name"], str, f"{key}.name"), forward_ms=_ms(c["forward_ms"], f"{key}.forward_ms"),
                     backward_ms=_ms(c["backward_ms"], f"{key}.backward_ms"),
                     flops=_count(c["flops"], f"{key}.flops", low=0),
                     params=_count(c["params"], f"{key}.params", low=0),
                     activation_bytes=_count(c["activation_bytes"], f"{key}.activation_bytes", low=0),
                     spread=None if c.get("spread") is None else _ms(c["spread"], f"{key}.spread"),
                     samples=None if c.get("samples") is None else _count(c["samples"], f"{key}.samples", low=0),
                     update_ms=None if c.get("update_ms") is None else _ms(c["update_ms"], f"{key}.update_ms"))
