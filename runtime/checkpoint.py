"""Partitioned checkpoints: atomic, the newest two kept, resumable under the same or another placement.

Usage::

    ck = CheckpointSettings.make("ckpts", every=20, resume=True)   # checked before any TensorFlow work
    keeper = Checkpointer(ck, pm, step, ds, key=ResumeKey(seed=0, batch_size=32, optimizer="adam", samples=512))
    start = guarded(ds, keeper.restore)       # 0, or the newest checkpoint's step (re-sharded if need be)
    guarded(ds, keeper.save, 40)              # after 40 steps, with no batch in flight
    newest_checkpoint("ckpts")                # (path, manifest) of the newest complete checkpoint, or None

What a checkpoint holds (folder ``D/ckpt-<step>``):

* ``state.*`` - a ``tf.train.Checkpoint`` of every part variable of the :class:`PlacedModel` (weights and
  BatchNorm statistics), every optimizer slot of the :class:`TrainStep` and every device's Adam step counter.
  TensorFlow reads each variable on the device that owns it.
* ``layout.npz`` - for every part variable, its index into the Keras weight (and the fine-grain mask), so the
  values can be put back in Keras layout without the placement that wrote them.
* ``manifest.json`` - step, epoch, data position (the step index: the next batch is batch ``step`` of the run's
  seeded order), the data seed, placement content hash and model fingerprint, optimizer, batch size, and the
  variable table. Written last; a folder without a complete manifest is not a checkpoint.

Atomicity: everything is written into ``D/tmp-<step>``, which is renamed to ``D/ckpt-<step>`` once complete. A
process killed mid-write leaves a ``tmp-`` folder that is ignored (and removed by the next save), so the previous
checkpoint stays the newest valid one. After each save only the newest two checkpoints are kept.

Resume: the same placement (content hash equal) restores every variable in place. Another placement of the same
model (other K, grain or method; the fingerprint must match) is *re-sharded*: every saved part value is scattered
into its Keras-layout tensor with the saved indices (the same ``scatter`` the layer kinds use for
``PlacedModel.keras_weights``), and every new part variable and slot is gathered from it through the new
placement's indices. All Adam step counters get the saved count.

Modes: :meth:`hgpart.runtime.api.PartitionedModel.fit` saves between segments of ``every`` steps, when every batch
in flight has finished (the pipeline is drained), so a checkpoint holds exactly the updates of its ``step`` batches.
In sync mode a resumed run is bit-identical to an uninterrupted one with the same seed (models without Dropout:
Dropout masks come from TensorFlow's unseeded global stream). In async mode the resumed run is correct (same state,
same batch order) but not bit-reproducible: which weights a batch reads depends on how the threads interleave, which
is true of any async run; the drain at each checkpoint also changes where the pipeline's bubbles fall.
"""

from __future__ import annotations

import io
import math
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hgpart.runtime.cluster import set_resume_hint
from hgpart.runtime.deviceset import DeviceSet
from hgpart.runtime.partitioned import PartVariable, PlacedModel
from hgpart.runtime.settle import settle
from hgpart.runtime.step import TrainStep

from hgpart.errors import BadFileError, BadOptionError, HgpartError, ModelMismatchError
from hgpart.fileio import atomic_write_bytes, check_writable, read_json, write_json
from hgpart.layergraph import LayerGraph

__all__ = ["CheckpointSettings", "Checkpointer", "Manifest", "ResumeKey", "VarEntry", "newest_checkpoint",
           "list_checkpoints", "keras_layout", "read_keras_layout", "checkpoint_line", "resume_line", "KEEP", "FORMAT"]

#: checkpoints kept after each save
KEEP = 2
#: version of the manifest's layout
FORMAT = 1
_CKPT = re.compile(r"^ckpt-(\d+)$")
_STATE = "state"


# --------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class CheckpointSettings:
    """Where and how often to checkpoint, and whether to resume; ``folder`` None: no checkpoints."""

    folder: Path | None = None
    every: int = 0
    resume: bool = False

    @staticmethod
    def make(folder: str | Path | None, *, every: int = 0, resume: bool = False) -> CheckpointSettings:
        """Check the options before any TensorFlow work: one HgpartError if they cannot be used together."""
        if every < 0:
            raise BadOptionError(f"--checkpoint-every {every} is negative", where="--checkpoint-every",
                                 fix="pass a number of steps >= 1 (0: only at the end of the run)",
                                 option="--checkpoint-every", value=every)
        if folder is None:
            if every or resume:
                opt = "--resume" if resume else "--checkpoint-every"
                raise BadOptionError(f"{opt} needs a checkpoint folder", where=opt,
                                     fix="pass --checkpoint-dir DIR", option=opt, value=every or resume)
            return CheckpointSettings()
        path = check_writable(folder, what="checkpoint folder", folder=True, where="--checkpoint-dir")
        if resume and newest_checkpoint(path) is None:
            raise BadFileError(f"no complete checkpoint to resume from in {str(path)!r}", where="--resume",
                               fix="drop --resume to start from the beginning, or pass the folder a run "
                                   "wrote with --checkpoint-dir", path=str(path))
        return CheckpointSettings(path, int(every), bool(resume))

    @property
    def enabled(self) -> bool:
        return self.folder is not None


@dataclass(frozen=True)
class ResumeKey:
    """The run's settings a checkpoint must agree with to continue the same run (data order, slots)."""

    seed: int
    batch_size: int
    optimizer: str
    #: samples in the training data: turns a step index into an epoch
    samples: int = 0
    mode: str = ""


# --------------------------------------------------------------------------------------------- manifest
@dataclass(frozen=True)
class VarEntry:
    """One saved part variable: its checkpoint key, where it lives in the Keras weight, its slots' keys."""

    key: str
    layer: str
    weight: str
    part: int
    shape: list[int]
    trainable: bool
    slots: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Manifest:
    """What one checkpoint holds besides the tensors (``manifest.json``)."""

    step: int
    epoch: float
    #: the index of the next batch of the run's seeded order (a resumed run continues with it)
    data_position: int
    seed: int
    batch_size: int
    optimizer: str
    mode: str
    placement_hash: str
    placement: dict[str, Any]
    fingerprint: str
    #: Adam step counter per part
    counters: dict[str, float]
    variables: list[VarEntry]
    written_at: float = 0.0
    format: int = FORMAT
    complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: Any) -> Manifest:
        """Parse a manifest; ValueError/TypeError/KeyError if it is not a complete one of this format."""
        if not isinstance(d, dict) or d.get("format") != FORMAT or d.get("complete") is not True:
            raise ValueError("not a complete manifest of this format")
        return Manifest(**{**d, "variables": [VarEntry(**v) for v in d["variables"]]})


def list_checkpoints(folder: str | Path) -> list[tuple[Path, Manifest]]:
    """Every complete checkpoint in ``folder``, newest (highest step) first; incomplete folders are skipped."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found: list[tuple[Path, Manifest]] = []
    for sub in root.iterdir():
        m = _CKPT.match(sub.name)
        if m is None or not sub.is_dir():
            continue
        try:
            man = Manifest.from_dict(read_json(sub / "manifest.json", what="checkpoint manifest"))
        except (HgpartError, ValueError, TypeError, KeyError):
            continue
        if man.step == int(m.group(1)) and (sub / "layout.npz").is_file() and (sub / f"{_STATE}.index").is_file():
            found.append((sub, man))
    return sorted(found, key=lambda pm: pm[1].step, reverse=True)


def newest_checkpoint(folder: str | Path) -> tuple[Path, Manifest] | None:
    """The newest complete checkpoint in ``folder`` and its manifest, or None."""
    found = list_checkpoints(folder)
    return found[0] if found else None


def checkpoint_line(folder: str | Path) -> str:
    """The CLI's line after a run: the newest checkpoint (or that none was written)."""
    newest = newest_checkpoint(folder)
    if newest is None:
        return f"checkpoints: none in {folder}"
    return f"checkpoint: {newest[0]} (step {newest[1].step}, epoch {newest[1].epoch:.2f})"


def resume_line(folder: Path) -> str:
    """The hint a failed run prints: how to continue, naming the newest checkpoint."""
    newest = newest_checkpoint(folder)
    if newest is None:
        return f"no checkpoint in {folder} yet; start the run again"
    return f"continue with --resume (newest checkpoint {newest[0]}, step {newest[1].step})"


# --------------------------------------------------------------------------------------------- layout
def _keras_positions(pm: PlacedModel, pv: PartVariable) -> tuple[np.ndarray, np.ndarray]:
    """(flat positions in the part variable, flat positions in its Keras weight) of every entry it owns.

    Scatters the entry numbers of the part variable with the layer kind's own ``scatter`` (the inverse of
    how the variable was gathered), so every kind's layout, masks included, is followed exactly.
    """
    layer = pm.graph.layer(pv.layer)
    shape = tuple(int(s) for s in pv.var.shape)
    labels = {pv.weight: np.full(layer.definition.weight_shape(layer, pv.weight), -1.0)}
    layer.definition.scatter(layer, pv.weight, pv, np.arange(math.prod(shape), dtype=np.float64).reshape(shape),
                             labels)
    flat = labels[pv.weight].ravel()
    keras_pos = np.flatnonzero(flat >= 0)
    return flat[keras_pos].astype(np.int64), keras_pos


def keras_layout(graph: LayerGraph, values: dict[str, np.ndarray], entries: list[VarEntry],
                 layout: dict[str, np.ndarray]) -> dict[tuple[str, str, int], np.ndarray]:
    """Saved part values -> Keras-layout tensors keyed by (layer, weight, slot); slot -1 is the weight itself.

    Entries no saved part covers stay NaN (caught when they would be read).
    """
    full: dict[tuple[str, str, int], np.ndarray] = {}
    for e in entries:
        layer = graph.layer(e.layer)
        idx = tuple(layout[f"{e.key}.i{a}"] for a in range(int(layout[f"{e.key}.rank"])))
        mask = layout.get(f"{e.key}.mask")
        pv = PartVariable(None, e.part, e.layer, e.weight, idx, mask, e.trainable)
        for s, key in [(-1, e.key), *enumerate(e.slots)]:
            d = {e.weight: full.setdefault((e.layer, e.weight, s),
                                           np.full(layer.definition.weight_shape(layer, e.weight), np.nan,
                                                   np.float32))}
            layer.definition.scatter(layer, e.weight, pv, values[key], d)
    return full


def read_keras_layout(path: str | Path, graph: LayerGraph,
                      manifest: Manifest | None = None) -> dict[tuple[str, str, int], np.ndarray]:
    """A checkpoint's weights (slot -1) and optimizer slots (0, 1) in Keras layout, keyed (layer, weight, slot).

    ``graph`` is the layer graph of any placement of the checkpoint's model (the fingerprints must match).
    """
    import tensorflow as tf

    folder = Path(path)
    man = manifest or Manifest.from_dict(read_json(folder / "manifest.json", what="checkpoint manifest"))
    if man.fingerprint != graph.fingerprint():
        raise ModelMismatchError(f"checkpoint {folder} is for another model (fingerprint {man.fingerprint})",
                                 where=str(folder), fix="read it with the layer graph of its own model",
                                 expected=graph.fingerprint(), found=man.fingerprint)
    reader = tf.train.load_checkpoint(str(folder / _STATE))
    keys = [e.key for e in man.variables] + [s for e in man.variables for s in e.slots]
    values = {k: reader.get_tensor(f"{k}/.ATTRIBUTES/VARIABLE_VALUE") for k in keys}
    with np.load(folder / "layout.npz") as z:
        layout = {name: z[name] for name in z.files}
    return keras_layout(graph, values, man.variables, layout)


def _gather(pm: PlacedModel, pv: PartVariable, current: np.ndarray, full: np.ndarray | None) -> np.ndarray:
    """The new part value: ``current`` with every entry it owns taken from the Keras-layout ``full``."""
    if full is None:
        raise BadFileError(f"the checkpoint has no {pv.weight!r} of layer {pv.layer!r}", where="--resume",
                           fix="resume with a placement of the model the checkpoint was written for")
    part_pos, keras_pos = _keras_positions(pm, pv)
    taken = full.ravel()[keras_pos]
    if np.isnan(taken).any():
        raise BadFileError(f"the checkpoint does not cover every entry of {pv.weight!r} of layer {pv.layer!r}",
                           where="--resume", fix="the checkpoint is damaged; resume from another one")
    out = np.array(current, dtype=np.float32, copy=True)
    out.ravel()[part_pos] = taken
    return out


# --------------------------------------------------------------------------------------------- keeper
class Checkpointer:
    """Saves and restores one run's partitioned state (see the module docstring)."""

    def __init__(self, settings: CheckpointSettings, pm: PlacedModel, step: TrainStep, ds: DeviceSet, *,
                 key: ResumeKey) -> None:
        self.settings, self.pm, self.step, self.ds, self.key = settings, pm, step, ds, key
        self.start = 0
        self.saved: list[Path] = []
        self._objects: dict[str, Any] = {}
        self._entries: list[VarEntry] = []
        self._collect()
        if settings.folder is not None:
            folder = settings.folder
            set_resume_hint(ds, lambda: resume_line(folder))

    def _collect(self) -> None:
        """Name every variable to save: part variables ``v<i>``, their slots ``v<i>_s<j>``, counters ``step_p<q>``."""
        slots = {id(pv): self.step.slots[i] for i, pv in enumerate(self.pm.trainable)}
        for i, pv in enumerate(self.pm.vars):
            key = f"v{i}"
            self._objects[key] = pv.var
            names = []
            for j, s in enumerate(slots.get(id(pv), [])):
                names.append(f"{key}_s{j}")
                self._objects[names[-1]] = s
            self._entries.append(VarEntry(key, pv.layer, pv.weight, pv.part, [int(d) for d in pv.var.shape],
                                          pv.trainable, names))
        for dev, c in self.step.counters.items():
            self._objects[f"step_p{self.pm.devices.index(dev)}"] = c

    # ------------------------------------------------------------------------------------- save
    def save(self, done: int) -> Path:
        """Write the state after ``done`` steps to ``D/ckpt-<done>`` atomically; keep the newest :data:`KEEP`."""
        import tensorflow as tf

        folder = self.settings.folder
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"tmp-{done}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        tf.train.Checkpoint(**self._objects).write(str(tmp / _STATE))
        atomic_write_bytes(tmp / "layout.npz", self._layout_bytes(), what="checkpoint layout")
        write_json(tmp / "manifest.json", self._manifest(done).to_dict())
        _fsync_dir(tmp)
        final = folder / f"ckpt-{done}"
        if final.exists():  # a run resumed from an older checkpoint passes the same step again
            old = folder / f"old-{done}"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(final, old)
        os.rename(tmp, final)
        _fsync_dir(folder)
        self.saved.append(final)
        self._prune(folder)
        return final

    def _layout_bytes(self) -> bytes:
        arrays: dict[str, np.ndarray] = {}
        for e, pv in zip(self._entries, self.pm.vars, strict=True):
            arrays[f"{e.key}.rank"] = np.array(len(pv.index))
            for a, idx in enumerate(pv.index):
                arrays[f"{e.key}.i{a}"] = np.asarray(idx, np.int64)
            if pv.mask is not None:
                arrays[f"{e.key}.mask"] = np.asarray(pv.mask, bool)
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        return buf.getvalue()

    def _manifest(self, done: int) -> Manifest:
        pl = self.pm.pl
        counters = {f"{self.pm.devices.index(dev)}": float(c.numpy()) for dev, c in self.step.counters.items()}
        return Manifest(step=done, epoch=done * self.key.batch_size / self.key.samples if self.key.samples else 0.0,
                        data_position=done, seed=self.key.seed, batch_size=self.key.batch_size,
                        optimizer=self.key.optimizer, mode=self.key.mode, placement_hash=pl.content_hash(),
                        placement={"model": pl.graph.name, "grain": pl.grain, "method": pl.method, "k": pl.k},
                        fingerprint=pl.graph.fingerprint(), counters=counters, variables=self._entries,
                        written_at=time.time())

    def _prune(self, folder: Path) -> None:
        """Keep the newest :data:`KEEP` complete checkpoints; drop older ones and leftovers of killed writes."""
        for sub, _ in list_checkpoints(folder)[KEEP:]:
            shutil.rmtree(sub, ignore_errors=True)
        for sub in folder.iterdir():
            if sub.is_dir() and sub.name.startswith(("tmp-", "old-")):
                shutil.rmtree(sub, ignore_errors=True)

    # ------------------------------------------------------------------------------------- restore
    def restore(self) -> int:
        """With ``resume``: load the newest checkpoint (re-sharding it if its placement differs); the step to
        continue from (0 without ``resume``)."""
        if not self.settings.resume or self.settings.folder is None:
            return 0
        newest = newest_checkpoint(self.settings.folder)
        if newest is None:
            raise BadFileError(f"no complete checkpoint in {str(self.settings.folder)!r}", where="--resume",
                               fix="drop --resume to start from the beginning", path=str(self.settings.folder))
        path, man = newest
        self._check(path, man)
        with _unreadable(path):
            if man.placement_hash == self.pm.pl.content_hash():
                self._restore_same(path)
            else:
                self._reshard(path, man)
        self.start = man.step
        return man.step

    def _check(self, path: Path, man: Manifest) -> None:
        """Refuse a checkpoint of another model, optimizer, batch size or data order: one HgpartError."""
        fp = self.pm.graph.fingerprint()
        if man.fingerprint != fp:
            raise ModelMismatchError(
                f"checkpoint {path} is for model {man.placement.get('model')!r} (fingerprint {man.fingerprint}), "
                f"not the placement's {self.pm.graph.name!r} (fingerprint {fp})", where="--resume",
                fix="resume with a placement of the checkpoint's model", expected=fp, found=man.fingerprint)
        for what, saved, now, opt in (("optimizer", man.optimizer, self.key.optimizer, "--optimizer"),
                                      ("batch size", man.batch_size, self.key.batch_size, "--batch-size"),
                                      ("seed", man.seed, self.key.seed, "--seed")):
            if saved != now:
                raise BadOptionError(f"checkpoint {path} was written with {what} {saved}, this run uses {now}",
                                     where="--resume", fix=f"pass {opt} {saved} to continue that run",
                                     option=opt, value=now)

    def _restore_same(self, path: Path) -> None:
        """The placement that wrote it: every variable, slot and counter restored in place, on its device."""
        import tensorflow as tf

        tf.train.Checkpoint(**self._objects).read(str(path / _STATE)).assert_consumed()
        settle()

    def _reshard(self, path: Path, man: Manifest) -> None:
        """Another placement: Keras-layout tensors from the saved parts, gathered into the new parts."""

        full = read_keras_layout(path, self.pm.graph, man)
        slots = {id(pv): self.step.slots[i] for i, pv in enumerate(self.pm.trainable)}
        for pv in self.pm.vars:
            pv.var.assign(_gather(self.pm, pv, pv.var.numpy(), full.get((pv.layer, pv.weight, -1))))
            for j, s in enumerate(slots.get(id(pv), [])):
                s.assign(_gather(self.pm, pv, s.numpy(), full.get((pv.layer, pv.weight, j))))
        count = max(man.counters.values(), default=0.0)
        for c in self.step.counters.values():
            c.assign(count)
        settle()


@contextmanager
def _unreadable(path: Path) -> Iterator[None]:
    """TensorFlow's and numpy's read errors of a damaged checkpoint (complete manifest, bad tensor files) as one
    HgpartError naming it."""
    import tensorflow as tf

    try:
        yield
    except (tf.errors.OpError, OSError, ValueError, KeyError, IndexError, AssertionError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise BadFileError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {first})", where="--resume",
                           fix=f"move {path} away to resume from the checkpoint before it", path=str(path)) from None


def _fsync_dir(path: Path) -> None:
    """Make a folder's entries (new files, a rename) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
