"""Placement files (``hgpart.placement/1``): where every filter or (filter, channel) pair runs.

Usage::

    pl = Placement.from_vertex_parts(graph, hg, parts, k=4, method="hypergraph", ...)
    pl.save("partitions/vgg16_coarse_k4.json")
    pl = load_placement("partitions/vgg16_coarse_k4.json")
    pl.channel_parts()["block1_pool"]     # part owning each output channel
    pl.recompute_metrics()                 # from the file alone, no profile, no TensorFlow

The file is the only thing the compiler and the runtime share. It embeds the
whole layer graph (names, kinds, shapes, readers, configs), the work of every
layer and the bytes of its feature maps, so the metrics can be recomputed
independently, and the runtime can check it was given the right model. Its
``model.source`` (:class:`hgpart.models.ModelSource`) says which model that
is: a zoo name with its input and classes, a ``keras:<Application>``, or a
``.keras`` file with its SHA-256, so the runtime rebuilds exactly that model;
files written before it existed have none, which means the zoo model named
like the graph.

Part arrays are stored per layer at full resolution (never grouped):
``input`` (one part per input channel), ``filters`` (one per output channel
of a vertex layer; for a fine-grain Conv2D the part of the reduction vertex,
which owns the output map) and ``channels`` (fine-grain Conv2D only, filters x
input channels, row-major). Arrays are run-length encoded as
``"part*count part*count ..."`` when that is short, else as zlib-compressed
base64 of little-endian uint16 (``{"n": ..., "b64z": ...}``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.errors import HgpartError
from hgpart.fileio import read_json, write_json
from hgpart.hypergraph import Hypergraph, build_hypergraph
from hgpart.kinds import Role
from hgpart.layergraph import LayerGraph
from hgpart.metrics import PartitionMetrics, partition_metrics
from hgpart.models import ModelSource
from hgpart.schemas import load_schema, schema_validator

__all__ = [
    "PLACEMENT_FORMAT",
    "Placement",
    "load_placement",
    "encode_parts",
    "decode_parts",
    "default_placement_path",
    "pipeline_runs",
    "fresh_pieces",
    "inter_op_threads",
    "default_inflight",
    "schema",
]

PLACEMENT_FORMAT = "hgpart.placement/1"
GRAINS = ("coarse", "fine")


def encode_parts(arr: np.ndarray) -> str | dict[str, Any]:
    """Run-length text when short, compressed base64 otherwise."""
    flat = np.asarray(arr, dtype=np.int64).ravel()
    if flat.size == 0:
        return ""
    change = np.flatnonzero(np.diff(flat)) + 1
    starts = np.concatenate([[0], change])
    lengths = np.diff(np.concatenate([starts, [flat.size]]))
    if len(starts) <= max(64, flat.size // 16):
        return " ".join(f"{int(flat[s])}*{int(n)}" for s, n in zip(starts, lengths, strict=True))
    raw = flat.astype("<u2").tobytes()
    return {"n": int(flat.size), "b64z": base64.b64encode(zlib.compress(raw, 9)).decode("ascii")}


def decode_parts(value: Any, *, n: int, where: str) -> np.ndarray:
    """Inverse of :func:`encode_parts`, checking the length is ``n``."""
    try:
        if isinstance(value, dict):
            inflater = zlib.decompressobj()  # bounded: a tiny stream must not inflate to gigabytes
            raw = inflater.decompress(base64.b64decode(value["b64z"]), 2 * n + 2)
            if inflater.unconsumed_tail:
                raise ValueError(f"the compressed array holds more than {n} entries")
            out = np.frombuffer(raw, dtype="<u2").astype(np.int64)
        elif isinstance(value, str):
            if not value.strip():
                out = np.zeros(0, dtype=np.int64)
            else:
                runs = [tok.split("*") for tok in value.split()]
                vals = np.array([int(p) for p, _ in runs], dtype=np.int64)
                counts = [int(c) for _, c in runs]
                if min(counts) < 0 or sum(counts) != n:  # checked before np.repeat allocates the runs
                    raise ValueError(f"run lengths add up to {sum(counts)}, expected {n}")
                out = np.repeat(vals, np.asarray(counts, dtype=np.int64))
        elif isinstance(value, list):
            out = np.asarray(value, dtype=np.int64)
        else:
            raise ValueError(f"unexpected type {type(value).__name__}")
    except (ValueError, KeyError, TypeError, OverflowError, zlib.error, binascii.Error) as exc:
        raise HgpartError(f"cannot decode part array ({exc})", where=where, fix="regenerate the placement") from None
    if out.size != n:
        raise HgpartError(
            f"part array has {out.size} entries, expected {n}", where=where, fix="regenerate the placement"
        )
    return out


def default_placement_path(model: str, grain: str, k: int, method: str = "hypergraph",
                           folder: str | Path = "partitions") -> Path:
    """``partitions/<model>_<grain>_k<K>.json`` (method appended when not hypergraph)."""
    tag = grain if method == "hypergraph" else f"{grain}_{method}" if method != "layerwise" else "layerwise"
    return Path(folder) / f"{model}_{tag}_k{k}.json"


def schema() -> dict[str, Any]:
    """The JSON Schema shipped in the package (``hgpart/data/placement.schema.json``)."""
    return load_schema("placement")


@dataclass
class Placement:
    """A K-way placement of one model, with everything needed to check and run it."""

    graph: LayerGraph
    grain: str
    method: str
    k: int
    devices: list[str]
    layer_parts: dict[str, dict[str, np.ndarray]]
    work: dict[str, float]
    work_unit: str
    batch_size: int
    provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] | None = None
    #: the model compiled (None: a file from before sources were recorded, i.e. the zoo model of the graph's name)
    source: ModelSource | None = None

    # ---------------------------------------------------------------- building
    @staticmethod
    def layer_parts_from_vertices(hg: Hypergraph, parts: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """Expand per-vertex parts (possibly grouped) to full-resolution per-layer arrays."""
        parts = np.asarray(parts, dtype=np.int64)
        out: dict[str, dict[str, np.ndarray]] = {}
        for b in hg.blocks:
            key = {"input": "input", "filter": "filters", "reduce": "filters", "channel": "channels"}[b.role]
            out.setdefault(b.layer, {})[key] = b.expand(parts)
        return out

    @staticmethod
    def from_vertex_parts(
        graph: LayerGraph,
        hg: Hypergraph,
        parts: np.ndarray,
        *,
        k: int,
        method: str,
        work: dict[str, float],
        provenance: dict[str, Any] | None = None,
        devices: list[str] | None = None,
        source: ModelSource | None = None,
    ) -> Placement:
        """The placement of per-vertex ``parts`` of ``hg``; ``source`` records the model (see :meth:`model_source`)."""
        pl = Placement(
            graph=graph,
            grain=hg.grain,
            method=method,
            k=k,
            devices=devices or [f"part:{p}" for p in range(k)],
            layer_parts=Placement.layer_parts_from_vertices(hg, parts),
            work={name: float(w) for name, w in work.items()},
            work_unit=hg.work_unit,
            batch_size=hg.batch_size,
            provenance=dict(provenance or {}),
            source=source,
        )
        pl.validate()
        pl.metrics = pl.recompute_metrics().to_dict()
        return pl

    # ----------------------------------------------------------------- queries
    def model_source(self) -> ModelSource:
        """The model to build for this placement: the recorded source, else the zoo model of the graph's name."""
        return self.source if self.source is not None else ModelSource.zoo_default(self.graph)

    def hypergraph(self) -> Hypergraph:
        """The ungrouped hypergraph of this placement's grain, rebuilt from the embedded graph."""
        return build_hypergraph(
            self.graph, self.work, batch_size=self.batch_size, grain=self.grain,  # type: ignore[arg-type]
            work_unit=self.work_unit,
        )

    def vertex_parts(self, hg: Hypergraph | None = None) -> np.ndarray:
        """Per-vertex parts on the ungrouped hypergraph (inverse of :meth:`layer_parts_from_vertices`)."""
        hg = hg or self.hypergraph()
        out = np.full(hg.num_vertices, -1, dtype=np.int64)
        for b in hg.blocks:
            key = {"input": "input", "filter": "filters", "reduce": "filters", "channel": "channels"}[b.role]
            arr = self.layer_parts.get(b.layer, {}).get(key)
            if arr is None:
                raise HgpartError(f"layer {b.layer!r} has no {key!r} part array", where="placement",
                                  fix=f"a {self.grain}-grain placement needs it; regenerate the file")
            out[b.start : b.stop] = np.asarray(arr).ravel()
        return out

    def recompute_metrics(self, *, optimizer: str = "adam") -> PartitionMetrics:
        hg = self.hypergraph()
        return partition_metrics(hg, self.vertex_parts(hg), self.k, optimizer=optimizer)

    def stored_metrics(self) -> PartitionMetrics | None:
        """The metrics the file records (computed when it was made), typed; ``None`` if it records none."""
        return None if self.metrics is None else PartitionMetrics.from_dict(self.metrics)

    def channel_parts(self) -> dict[str, np.ndarray]:
        """The part that owns (computes and holds) every output channel of every layer.

        By the role its kind gives the layer (:mod:`hgpart.kinds`), the rule
        the hypergraph builder uses: the input and vertex layers own their
        channels (the ``input`` / ``filters`` arrays), fused layers and views
        follow their input, a concatenation concatenates.
        """
        owner: dict[str, np.ndarray] = {}
        for layer in self.graph.layers:
            lp = self.layer_parts.get(layer.name, {})
            role = layer.definition.role
            if role is Role.INPUT:
                owner[layer.name] = lp["input"]
            elif role is Role.VERTEX:
                owner[layer.name] = lp["filters"]
            elif role is Role.CONCAT:
                owner[layer.name] = np.concatenate([owner[s] for s in layer.inputs])
            else:
                owner[layer.name] = owner[layer.inputs[0]]
        return owner

    def loss_part(self, owner: dict[str, np.ndarray] | None = None) -> int:
        """The part that computes the loss: the one owning most of the output layer's channels (lowest on ties).
        ``owner``: :meth:`channel_parts`, when the caller has it already."""
        out = (owner if owner is not None else self.channel_parts())[self.graph.output_layer.name]
        return int(np.argmax(np.bincount(out, minlength=self.k)))

    def splits_piecewise(self, layer: Any) -> bool:
        """Whether ``layer``, split over parts, can run as one piece per part (one pipeline stage each): not a kind
        that reduces across parts inside the layer, nor a fine-grain (filter, channel) split."""
        return layer.definition.piecewise and not (self.grain == "fine" and layer.definition.fine_split)

    def pipeline_stages(self) -> int:
        """How many pipeline stages the runtime cuts this placement into (:func:`pipeline_runs`), or 0 when it
        cannot cut it: a layer split over parts that cannot run piecewise (a fine-grain convolution, a layer
        normalisation), so the steps run as one function. The simulator's default of async batches in flight."""
        owner = self.channel_parts()
        layers = []
        for layer in self.graph.layers:
            if layer.definition.role is Role.INPUT:
                continue
            parts = np.unique(owner[layer.name]).tolist()
            if len(parts) > 1 and not self.splits_piecewise(layer):
                return 0
            layers.append((layer.name, parts))
        return len(pipeline_runs(layers, self.loss_part(owner)))

    # ------------------------------------------------------------- validation
    def validate(self) -> None:
        """Lengths and ranges of every part array; grain and K consistent."""
        where = f"placement for {self.graph.name}"
        if self.grain not in GRAINS:
            raise HgpartError(f"unknown grain {self.grain!r}", where=where, fix=f"use one of {GRAINS}")
        if self.k < 1:
            raise HgpartError(f"K = {self.k} must be >= 1", where=where)
        if len(self.devices) != self.k:
            raise HgpartError(f"{len(self.devices)} devices listed for K = {self.k}", where=where)
        for layer in self.graph.layers:
            lp = self.layer_parts.get(layer.name, {})
            need: dict[str, tuple[int, ...]] = {}
            role = layer.definition.role
            if role is Role.INPUT:
                need["input"] = (layer.out_channels,)
            elif role is Role.VERTEX:
                need["filters"] = (layer.out_channels,)
                if self.grain == "fine" and layer.definition.fine_split:
                    need["channels"] = (layer.out_channels, layer.in_channels)
            for key, shape in need.items():
                if key not in lp:
                    raise HgpartError(f"layer {layer.name!r} lacks its {key!r} part array", where=where,
                                      fix="regenerate the placement")
                arr = np.asarray(lp[key])
                if arr.size != int(np.prod(shape)):
                    raise HgpartError(f"layer {layer.name!r} {key!r} has {arr.size} entries, expected "
                                      f"{int(np.prod(shape))}", where=where, fix="regenerate the placement")
                lp[key] = arr.reshape(shape)
                if arr.size and (arr.min() < 0 or arr.max() >= self.k):
                    bad = int(arr.max()) if arr.max() >= self.k else int(arr.min())
                    raise HgpartError(f"layer {layer.name!r} {key!r} has part id {bad}, outside 0..{self.k - 1}",
                                      where=where, fix="part ids must be below K; regenerate the placement")
        unknown = set(self.layer_parts) - {layer.name for layer in self.graph.layers}
        if unknown:
            raise HgpartError(f"part arrays for unknown layers {sorted(unknown)[:3]}", where=where)
        self._validate_source(where)

    def _validate_source(self, where: str) -> None:
        """The recorded source builds the graph's input shape and class count."""
        src = self.source
        if src is None:
            return
        if tuple(src.input_shape) != tuple(self.graph.input_shape) or src.num_classes != self.graph.num_classes:
            raise HgpartError(
                f"model source {src.spec!r} {list(src.input_shape)} with {src.num_classes} classes does not match "
                f"the layers' input {list(self.graph.input_shape)} with {self.graph.num_classes} classes",
                where=where, fix="the file was edited or is corrupt; regenerate it")

    def check_model(self, graph: LayerGraph, *, where: str = "placement") -> None:
        """Refuse to use this placement with another model."""
        if graph.fingerprint() != self.graph.fingerprint():
            raise HgpartError(
                f"placement is for model {self.graph.name!r} {list(self.graph.input_shape)} "
                f"(fingerprint {self.graph.fingerprint()}), not {graph.name!r} {list(graph.input_shape)} "
                f"(fingerprint {graph.fingerprint()})",
                where=where, fix="compile a placement for this model with `hgpart partition`",
            )

    # -------------------------------------------------------------- file I/O
    def to_dict(self) -> dict[str, Any]:
        consumers = self.graph.consumers()
        layers = []
        for layer in self.graph.layers:
            d = layer.to_dict()
            d["readers"] = consumers[layer.name]
            d["work"] = self.work.get(layer.name, 0.0)
            spatial = int(np.prod(layer.output_shape[:-1])) if len(layer.output_shape) > 1 else 1
            d["fmap_bytes"] = spatial * self.batch_size * 4
            d["parts"] = {key: encode_parts(arr) for key, arr in self.layer_parts.get(layer.name, {}).items()}
            layers.append(d)
        return {
            "format": PLACEMENT_FORMAT,
            "model": {
                "name": self.graph.name,
                "input_shape": list(self.graph.input_shape),
                "num_classes": self.graph.num_classes,
                "fingerprint": self.graph.fingerprint(),
                **({"source": self.source.to_dict()} if self.source is not None else {}),
            },
            "grain": self.grain,
            "method": self.method,
            "k": self.k,
            "devices": self.devices,
            "batch_size": self.batch_size,
            "work_unit": self.work_unit,
            "dtype_bytes": 4,
            "provenance": self.provenance,
            "metrics": self.metrics,
            "layers": layers,
        }

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), what="placement file")

    def content_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    @staticmethod
    def from_dict(d: Any, *, where: str = "placement") -> Placement:
        import jsonschema

        if not isinstance(d, dict) or d.get("format") != PLACEMENT_FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise HgpartError(f"not an hgpart placement file (format {got!r})", where=where,
                              fix=f"expected format {PLACEMENT_FORMAT!r}; make one with `hgpart partition`")
        try:
            error = jsonschema.exceptions.best_match(schema_validator("placement").iter_errors(d))
            if error is not None:
                raise error
        except jsonschema.ValidationError as exc:
            path = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
            raise HgpartError(f"placement file is malformed at {path}: {exc.message[:160]}", where=where,
                              fix="regenerate it with `hgpart partition`") from None
        model = d["model"]
        graph = LayerGraph.from_dict(
            {"name": model["name"], "input_shape": model["input_shape"],
             "num_classes": model.get("num_classes", 0), "layers": d["layers"]}
        )
        if graph.fingerprint() != model["fingerprint"]:
            raise HgpartError(
                f"the layers in the file have fingerprint {graph.fingerprint()}, the header says "
                f"{model['fingerprint']}", where=where, fix="the file was edited or is corrupt; regenerate it",
            )
        k = int(d["k"])
        bad_work = [(ld["name"], ld["work"]) for ld in d["layers"] if not math.isfinite(float(ld.get("work", 0.0)))]
        if bad_work:
            raise HgpartError(f"layer {bad_work[0][0]!r} has work {bad_work[0][1]}, not a finite number",
                              where=where, fix="the file was edited or is corrupt; regenerate it")
        layer_parts: dict[str, dict[str, np.ndarray]] = {}
        for ld in d["layers"]:
            for key, val in ld.get("parts", {}).items():
                n = ld["output_shape"][-1]
                if key == "input":
                    n = ld["output_shape"][-1]
                elif key == "channels":
                    n = ld["output_shape"][-1] * ld["input_shapes"][0][-1]
                layer_parts.setdefault(ld["name"], {})[key] = decode_parts(
                    val, n=int(n), where=f"{where}, layer {ld['name']!r} {key!r}"
                )
        pl = Placement(
            graph=graph,
            grain=d["grain"],
            method=d["method"],
            k=k,
            devices=list(d["devices"]),
            layer_parts=layer_parts,
            work={ld["name"]: float(ld.get("work", 0.0)) for ld in d["layers"]},
            work_unit=d.get("work_unit", "ms"),
            batch_size=int(d["batch_size"]),
            provenance=dict(d.get("provenance") or {}),
            metrics=d.get("metrics"),
            source=ModelSource.from_dict(model["source"]) if model.get("source") is not None else None,
        )
        try:
            pl.validate()
        except HgpartError as exc:
            raise HgpartError(exc.what, where=where, fix=exc.fix) from None
        return pl


def pipeline_runs(layers: list[tuple[str, list[int]]], loss_part: int) -> list[tuple[int, list[str]]]:
    """The pipeline stages of placed layers: ``(part, layer names)`` runs, in order.

    ``layers``: every layer after the input, in topological order, with the parts holding a piece of it. A
    stage is a maximal run of consecutive pieces on one part; a layer split over parts continues on the current
    part first, then starts a stage on each other part. A last stage on the loss part computes the loss when the
    runs end elsewhere. One rule for the runtime (:func:`hgpart.runtime.stages.plan_stages`) and the simulator
    (:meth:`Placement.pipeline_stages`).
    """
    runs: list[tuple[int, list[str]]] = []
    for name, parts in layers:
        cur = runs[-1][0] if runs else None
        for p in sorted(parts, key=lambda q: (q != cur, q)):
            if not runs or runs[-1][0] != p:
                runs.append((p, []))
            runs[-1][1].append(name)
    if not runs or runs[-1][0] != loss_part:
        runs.append((loss_part, []))
    return runs


def fresh_pieces(graph: LayerGraph, layout: Mapping[str, Collection[int]], pieces: Iterable[tuple[str, int]],
                 loss_part: int) -> set[tuple[str, int]]:
    """The (layer, part) pieces whose update follows each step's gradients at once in the compiled async pipeline:
    those on the loss part, except a whole layer there whose output reaches another part (it runs ahead of the
    loss, as the first parts do). A split layer's piece on the loss part stays fresh. Their forward of step ``i``
    reads the weights step ``i - 1`` updated, so it waits for that step's backward of the same piece.

    ``layout``: the parts holding columns of each layer's output; ``pieces``: every (layer, part) holding
    variables. One rule for the runtime (:func:`hgpart.runtime.multistep.fresh_pieces`, which says why) and the
    simulator (:meth:`hgpart.simulate.mpgraph.MPTemplate`'s ``fresh`` units).
    """
    readers = graph.consumers()
    reaches: dict[str, bool] = {}  # whether a layer's output reaches a piece off the loss part
    for layer in reversed(graph.layers):
        reaches[layer.name] = any(set(layout[r]) - {loss_part} or reaches[r] for r in readers[layer.name])
    return {(name, p) for name, p in pieces
            if p == loss_part and (set(layout[name]) != {loss_part} or not reaches[name])}


#: training steps per call of the runtime's ``compiled`` pipeline when none are asked for (the runtime's
#: :mod:`hgpart.runtime.multistep` and the simulator use it). A call drains the pipeline at its end, so longer calls
#: waste less (``benchmarks/results/steps_per_call/``: minivgg measured at 16, 32 and 64); a call never has more
#: steps than an epoch, and tracing one builds every step's graph (seconds for 64 steps of a small model).
STEPS_PER_CALL = 64


def default_inflight(k: int, stages: int, *, compiled: bool = False) -> int:
    """Async batches in flight when none are asked for: one per pipeline stage (``stages`` > 0), at most K + 1; K
    when steps run as one function per step (``stages`` = 0).

    Why: a batch holds its place in the window from its first stage's forward to its first stage's backward, so
    with fewer batches than stages some stage always waits (PipeDream's rule). The cap: a placement that splits
    layers over the parts has two or more stages per layer, while each device runs one call at a time, and more in
    flight means staler weights. Measured on minivgg's five-stage coarse placement on two devices
    (``benchmarks/results/async_stability/``): 3 in flight converged in 20 of 20 seeded runs, 4 in 19. One rule for
    the runtime (:func:`hgpart.runtime.pipechoice.choose_pipeline`) and the simulator.

    ``compiled``: the runtime's compiled pipeline (several steps per call) keeps K + 1 on K > 1 devices, whatever
    the stages: inside one call a part's next forward waits only for the weights, so one batch more than the
    devices covers the round trips between them (minivgg's two-stage layer-wise placement,
    ``benchmarks/results/steps_per_call/``: E 0.68 with 2 in flight, 0.76 with 3). One device: 1, exact
    sequential training.
    """
    if compiled:
        return k + 1 if k > 1 else 1
    return min(stages, k + 1) if stages > 0 else k


def inter_op_threads(k: int, inflight: int | None) -> int:
    """Inter-op threads of each device the runtime opens: one more than the batches in flight asked for, or than
    the most the default can be (K + 1, :func:`default_inflight`); at least 4. So many ops a worker runs at once,
    sharing its cores (the simulator's ``ops_share_cores`` devices). One rule for the runtime and the simulator."""
    return max(4, (inflight or k + 1) + 1)


def load_placement(path: str | Path) -> Placement:
    """Read and fully validate a placement file; any defect is one HgpartError."""
    return Placement.from_dict(read_json(path, what="placement file"), where=str(path))
