"""Training data for a placement's model: ``.npz`` arrays, image folders, digits or synthetic, batched by step index.

Usage::

    from hgpart.runtime.data import load_data
    data = load_data("digits", input_shape=(32, 32, 3), num_classes=10)   # or "x.npz", "photos/", "synthetic"
    train, val = data.split(0.2)                  # Keras's rule: the last 20 % of the samples validate
    feed = train.feed(batch_size=32, seed=0, start_step=0, steps=100)     # tf.data, prefetched
    x, y = feed(0)                                # the batch of step 0, then feed(1), ...
    for x, y in val.eval_batches(64): ...         # every sample once, in order

Every source is checked before any training: a missing or malformed file, images whose shape is not the
model's input, labels outside ``0 .. classes-1``, x and y of different lengths, an empty folder or an
unreadable image each raise one :class:`~hgpart.errors.HgpartError`.

The batch of training step ``i`` is a pure function of ``(seed, i)``: epoch ``e = i // steps_per_epoch`` visits
the samples in the seeded permutation ``default_rng([seed, e])`` and step ``i`` takes the next ``batch_size`` of
them (the last incomplete batch of an epoch is dropped, as the compiled step has a fixed batch size). A run
resumed at ``start_step`` therefore sees exactly the batches the uninterrupted run would have seen.

Streaming: batches are produced by a ``tf.data`` pipeline with prefetch. An uncompressed ``.npz``
(``np.savez``) is memory-mapped, so only the rows of the current batches are read; a compressed one is
loaded whole. An image folder is listed with Keras's ``image_dataset_from_directory`` (its class order,
labels and seeded shuffle, so a validation split takes the samples Keras's would); its images are decoded and
resized per batch, never loaded all at once, and every image is decoded once before training to find
unreadable ones. Pixels keep Keras's scale (0..255), as ``image_dataset_from_directory`` gives them.
"""

from __future__ import annotations

import struct
import threading
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from hgpart.errors import BadFileError, HgpartError

__all__ = ["DataKind", "DataSpec", "Data", "ArrayData", "ImageFolderData", "StepFeed", "load_data",
           "load_arrays", "DATASETS"]

#: the built-in data sets, by name
DATASETS = ("synthetic", "digits")
#: image channels -> Keras's colour mode
_COLOR_MODES = {1: "grayscale", 3: "rgb", 4: "rgba"}


class DataKind(Enum):
    """Where the samples come from."""

    NPZ = "npz"
    FOLDER = "folder"
    DIGITS = "digits"
    SYNTHETIC = "synthetic"


@dataclass(frozen=True)
class DataSpec:
    """A parsed ``--data`` value: a built-in name, an ``.npz`` file or a folder of class subfolders."""

    kind: DataKind
    path: Path | None = None

    @staticmethod
    def parse(value: str | Path, *, where: str = "--data") -> DataSpec:
        """The source ``value`` names; a missing file or folder is a :class:`BadFileError`."""
        text = str(value)
        if text in DATASETS:
            return DataSpec(DataKind(text))
        path = Path(text)
        if path.is_dir():
            return DataSpec(DataKind.FOLDER, path)
        if path.suffix == ".npz":
            if not path.is_file():
                raise BadFileError(f"no data file {str(path)!r}", where=where, path=str(path),
                                   fix="pass an existing .npz file with arrays x and y")
            return DataSpec(DataKind.NPZ, path)
        raise BadFileError(f"{text!r} is neither {' nor '.join(DATASETS)}, an .npz file nor a folder", where=where,
                           path=text, fix="pass digits, synthetic, an .npz file (x, y) or a folder of class folders")


# ---------------------------------------------------------------------------------------------- base
class Data(ABC):
    """Samples addressable by index; subclasses say how a batch of indices is read."""

    where: str

    def __init__(self, index: np.ndarray, *, where: str) -> None:
        self.index = np.asarray(index, np.int64)
        self.where = where
        self._orders: dict[tuple[int, int], np.ndarray] = {}

    def __len__(self) -> int:
        return int(self.index.size)

    @abstractmethod
    def subset(self, index: np.ndarray) -> Data:
        """The samples at positions ``index`` of this data."""

    @abstractmethod
    def read(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Images (float32) and labels (int32) of the samples at positions ``rows``, in that order."""

    def split(self, fraction: float) -> tuple[Data, Data]:
        """(training, validation): the last ``fraction`` of the samples validate, as Keras's ``validation_split``."""
        if not 0.0 <= fraction < 1.0:
            raise HgpartError(f"validation split {fraction} is not in [0, 1)", where="--val-split",
                              fix="pass a fraction such as 0.2")
        n_val = int(len(self) * fraction)
        if fraction > 0 and (n_val == 0 or n_val == len(self)):
            raise HgpartError(f"a validation split of {fraction} leaves {n_val} of {len(self)} samples to validate",
                              where="--val-split", fix="use more data or another fraction")
        cut = len(self) - n_val
        return self.subset(np.arange(cut)), self.subset(np.arange(cut, len(self)))

    def steps_per_epoch(self, batch_size: int) -> int:
        """Full batches in one pass (the last incomplete batch of an epoch is dropped)."""
        if len(self) < batch_size:
            raise HgpartError(f"{len(self)} training samples are fewer than one batch of {batch_size}",
                              where=self.where, fix="use more data or a smaller --batch-size")
        return len(self) // batch_size

    def step_rows(self, step: int, batch_size: int, seed: int) -> np.ndarray:
        """Positions of the samples of training step ``step`` (see the module docstring)."""
        spe = self.steps_per_epoch(batch_size)
        epoch, k = divmod(int(step), spe)
        return self._order(int(seed), epoch)[k * batch_size:(k + 1) * batch_size]

    def _order(self, seed: int, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s permutation of the samples, kept for the epoch's next steps (a permutation of a large
        dataset per step would cost more than reading the step's batch)."""
        key = (seed, epoch)
        order = self._orders.get(key)
        if order is None:  # one dict swapped in whole: the feed's parallel reads may race, never see half of it
            order = np.random.default_rng([seed, epoch]).permutation(len(self))
            self._orders = {key: order}
        return order

    def rows_of(self, start: int, n: int, batch_size: int, seed: int) -> np.ndarray:
        """Positions of the samples of steps ``start .. start + n - 1``, in step order."""
        return np.concatenate([self.step_rows(i, batch_size, seed) for i in range(start, start + n)])

    def batch(self, step: int, batch_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """The batch of training step ``step``."""
        return self.read(self.step_rows(step, batch_size, seed))

    def feed(self, *, batch_size: int, seed: int, start_step: int, steps: int, host: str = "/CPU:0",
             group: int = 1) -> StepFeed:
        """Steps ``start_step .. start_step + steps - 1`` through a prefetching ``tf.data`` pipeline on ``host``,
        read ``group`` steps at a time (see :class:`StepFeed`)."""
        import tensorflow as tf

        def one(i: Any) -> tuple[np.ndarray, np.ndarray]:
            return self.batch(int(i), batch_size, seed)

        with tf.device(host):
            ds = tf.data.Dataset.range(start_step, start_step + steps).map(
                lambda i: tf.numpy_function(one, [i], (tf.float32, tf.int32), stateful=False),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            return StepFeed.grouped(ds, start_step, group, where=self.where)

    def eval_batches(self, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every sample once, in order, in batches of ``batch_size`` (the last one may be smaller)."""
        for lo in range(0, len(self), batch_size):
            yield self.read(np.arange(lo, min(lo + batch_size, len(self))))


class StepFeed:
    """The batches of consecutive steps, handed out by step index to the pipeline's threads (thread-safe).

    One reader thread takes the batches from the ``tf.data`` iterator, in order, and keeps up to ``ahead`` of them
    (and every batch up to the highest step asked for) ready. Why a thread of its own: ``next()`` on a ``tf.data``
    iterator runs in TensorFlow's synchronous mode, and entering that mode waits until every call already issued
    by this process has finished, on every worker (measured: ``benchmarks/feed_stall_probe.py``). A step thread
    that read its batch itself would therefore wait for the other threads' calls, and the pipeline would run one
    call at a time. The pipeline hands out step indices in order and each thread asks for its batch at once, so
    batches read ahead of their thread wait in the buffer.

    ``group`` > 1: each item of the iterator holds the batches of ``group`` consecutive steps (the last may hold
    fewer), stacked on a new first axis: one ``next()``, and one wait for the process's calls, per ``group`` steps,
    for the compiled pipeline, which runs that many steps per call (:mod:`hgpart.runtime.multistep`).
    """

    def __init__(self, batches: Iterator[Any], start_step: int, *, where: str = "--data", ahead: int = 4,
                 group: int = 1) -> None:
        self._it = batches
        self.where = where
        self._group = max(1, int(group))
        self._ahead = max(1, int(ahead), 2 * self._group)
        self._next = int(start_step)  # the next step the reader reads
        self._asked = int(start_step)  # one past the highest step asked for
        #: step -> (the read's stacked images, its stacked labels, the step's index in them)
        self._ready: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        self._error: HgpartError | None = None
        self._ended = False
        self._closed = False
        self._cond = threading.Condition()
        threading.Thread(target=self._read_ahead, daemon=True, name="hgpart-feed").start()

    def _read_ahead(self) -> None:
        while True:
            with self._cond:
                while not self._closed and len(self._ready) >= self._ahead and self._next >= self._asked:
                    self._cond.wait()
                if self._closed:
                    return
                step = self._next
            try:
                x, y = next(self._it)
            except StopIteration:
                with self._cond:
                    self._ended = True
                    self._cond.notify_all()
                return
            except Exception as exc:  # noqa: BLE001 - tf.data errors have no common type without TensorFlow
                msg = str(exc).strip()
                err = HgpartError(f"cannot read the batch of step {step}: {type(exc).__name__}: "
                                  f"{msg.splitlines()[0][:200] if msg else ''}", where=self.where,
                                  fix="check the data (were files changed or removed during training?)")
                with self._cond:
                    self._error = err
                    self._cond.notify_all()
                return
            with self._cond:
                xs, ys = (np.asarray(x), np.asarray(y)) if self._group > 1 else (np.asarray(x)[None],
                                                                                  np.asarray(y)[None])
                for j in range(len(ys)):
                    self._ready[step + j] = (xs, ys, j)
                self._next = step + len(ys)
                self._cond.notify_all()

    @classmethod
    def grouped(cls, ds: Any, start_step: int, group: int, *, where: str) -> StepFeed:
        """A feed of the ``tf.data`` dataset ``ds`` of one item per step, read ``group`` steps at a time."""
        import tensorflow as tf

        if group > 1:
            ds = ds.batch(group)
        return cls(iter(ds.prefetch(tf.data.AUTOTUNE)), start_step, where=where, group=group)

    def __call__(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        xs, ys, j = self._take(step)
        return xs[j], ys[j]

    def block(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The batches of steps ``start .. start + n - 1`` stacked, ``(n, B, ...)`` and ``(n, B)``: views of one read
        when they lie in one (a grouped feed and calls of the group's steps), else a copy."""
        got = [self._take(start + i) for i in range(n)]
        xs, ys, j0 = got[0]
        if all(g[0] is xs and g[2] == j0 + i for i, g in enumerate(got)):
            return xs[j0:j0 + n], ys[j0:j0 + n]
        return np.stack([g[0][g[2]] for g in got]), np.stack([g[1][g[2]] for g in got])

    def ready(self, step: int) -> None:
        """Wait until the batch of ``step`` is read (it stays for :meth:`__call__` or :meth:`block`). Why: the
        reader's ``next()`` waits for every call this process has issued (see the class docstring), so a feed
        made just before other work (the compiled pipeline's untimed warm-up) would read its first batches only
        after that work, on the clock of the first timed step."""
        self._await(step, take=False)

    def _take(self, step: int) -> tuple[np.ndarray, np.ndarray, int]:
        out = self._await(step, take=True)
        assert out is not None
        return out

    def _await(self, step: int, *, take: bool) -> tuple[np.ndarray, np.ndarray, int] | None:
        with self._cond:
            self._asked = max(self._asked, step + 1)
            self._cond.notify_all()
            while step not in self._ready:
                if step < self._next:
                    raise KeyError(f"batch of step {step} was already handed out")
                if self._error is not None:
                    raise self._error
                if self._ended or self._closed:
                    raise HgpartError(f"the data has no batch for step {step}", where=self.where,
                                      fix="ask only for the steps the feed was made for")
                self._cond.wait()
            if not take:
                return None
            out = self._ready.pop(step)
            self._cond.notify_all()
            return out

    def close(self) -> None:
        """Stop the reader (it ends by itself after the last step)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class ArrayData(Data):
    """Images ``x`` (N, H, W, C) and integer labels ``y`` (N,), in memory or memory-mapped."""

    def __init__(self, x: np.ndarray, y: np.ndarray, *, where: str, index: np.ndarray | None = None) -> None:
        super().__init__(np.arange(len(x)) if index is None else index, where=where)
        self.x, self.y = x, y

    def subset(self, index: np.ndarray) -> ArrayData:
        return ArrayData(self.x, self.y, where=self.where, index=self.index[index])

    def read(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = self.index[rows]
        order = np.argsort(idx, kind="stable")  # memory maps read fastest in file order
        x = np.empty((idx.size, *self.x.shape[1:]), np.float32)
        x[order] = self.x[idx[order]]
        return x, np.asarray(self.y[idx], np.int32)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All samples as two arrays (loads them)."""
        return self.read(np.arange(len(self)))


def check_arrays(x: np.ndarray, y: np.ndarray, input_shape: tuple[int, ...], num_classes: int, *,
                 where: str) -> tuple[np.ndarray, np.ndarray]:
    """``x, y`` checked against the model (shape, label range, lengths); a missing channel axis of 1 is added."""
    if input_shape[-1] == 1 and tuple(x.shape[1:]) == tuple(input_shape[:-1]):
        x = x.reshape(*x.shape, 1)
    if tuple(x.shape[1:]) != tuple(input_shape):
        raise HgpartError(f"images of shape {list(x.shape[1:])} do not fit the model's input {list(input_shape)}",
                          where=where, fix=f"store x as (N, {', '.join(map(str, input_shape))})")
    if not np.issubdtype(x.dtype, np.number):
        raise HgpartError(f"images of type {x.dtype} are not numbers", where=where, fix="store x as float32")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.reshape(-1)
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)):
        raise HgpartError(f"labels of shape {list(y.shape)} and type {y.dtype} are not class indices", where=where,
                          fix="store y as one integer class per image, shape (N,)")
    if len(x) != len(y):
        raise HgpartError(f"{len(x)} images but {len(y)} labels", where=where,
                          fix="store as many labels (y) as images (x)")
    if len(y) == 0:
        raise HgpartError("no samples", where=where, fix="store at least one batch of samples")
    lo, hi = int(np.min(y)), int(np.max(y))
    if lo < 0 or hi >= num_classes:
        raise HgpartError(f"labels range over {lo}..{hi} but the model has {num_classes} classes", where=where,
                          fix=f"use labels 0..{num_classes - 1} or a model with more classes")
    return x, y


def _npz_member(path: Path, zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """Array ``name`` of an ``.npz``: memory-mapped when stored uncompressed, else read whole."""
    info = zf.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        with zf.open(info) as fh:
            return np.lib.format.read_array(fh, allow_pickle=False)
    with path.open("rb") as fh:
        fh.seek(info.header_offset)
        n_name, n_extra = struct.unpack("<HH", fh.read(30)[26:30])  # the zip local header's two lengths
        fh.seek(info.header_offset + 30 + n_name + n_extra)
        version = np.lib.format.read_magic(fh)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(fh)
        offset = fh.tell()
    if dtype.hasobject:
        raise ValueError("object arrays are not supported")
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, offset=offset, order="F" if fortran else "C")


def load_arrays(path: Path, *, where: str = "--data") -> tuple[np.ndarray, np.ndarray]:
    """Arrays ``x`` and ``y`` of an ``.npz`` file (memory-mapped when uncompressed)."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = {n.removesuffix(".npy") for n in zf.namelist()}
            missing = [k for k in ("x", "y") if k not in names]
            if missing:
                raise BadFileError(f"{str(path)!r} has no array {' or '.join(missing)} (it has {sorted(names)})",
                                   where=where, path=str(path), fix="save it with np.savez(path, x=images, y=labels)")
            return _npz_member(path, zf, "x"), _npz_member(path, zf, "y")
    except (OSError, ValueError, zipfile.BadZipFile, struct.error) as exc:
        raise BadFileError(f"cannot read {str(path)!r} as .npz: {str(exc).splitlines()[0][:160]}", where=where,
                           path=str(path), fix="save it with np.savez(path, x=images, y=labels)") from None


# -------------------------------------------------------------------------------------------- folders
class ImageFolderData(Data):
    """Images in class subfolders, decoded and resized per batch (see the module docstring)."""

    def __init__(self, paths: np.ndarray, labels: np.ndarray, input_shape: tuple[int, ...], *, where: str,
                 index: np.ndarray | None = None) -> None:
        super().__init__(np.arange(len(paths)) if index is None else index, where=where)
        self.paths, self.labels = paths, labels
        self.input_shape = tuple(input_shape)

    def subset(self, index: np.ndarray) -> ImageFolderData:
        return ImageFolderData(self.paths, self.labels, self.input_shape, where=self.where, index=self.index[index])

    def _images(self, paths: Any) -> Any:
        """A ``tf.data`` pipeline of decoded, resized images, as ``image_dataset_from_directory`` loads them."""
        import tensorflow as tf

        h, w, c = self.input_shape

        def load(p: Any) -> Any:
            img = tf.image.decode_image(tf.io.read_file(p), channels=c, expand_animations=False)
            img = tf.image.resize(img, (h, w), method="bilinear")
            img.set_shape((h, w, c))
            return img

        return tf.data.Dataset.from_tensor_slices(paths).map(load, num_parallel_calls=tf.data.AUTOTUNE,
                                                             deterministic=True)

    def read(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = self.index[rows]
        x = np.stack([im.numpy() for im in self._images(self.paths[idx])]) if idx.size else np.zeros(
            (0, *self.input_shape), np.float32)
        return x.astype(np.float32), self.labels[idx].astype(np.int32)

    def feed(self, *, batch_size: int, seed: int, start_step: int, steps: int, host: str = "/CPU:0",
             group: int = 1) -> StepFeed:
        import tensorflow as tf

        rows = self.rows_of(start_step, steps, batch_size, seed)
        idx = self.index[rows]
        with tf.device(host):
            labels = tf.data.Dataset.from_tensor_slices(self.labels[idx].astype(np.int32))
            ds = tf.data.Dataset.zip((self._images(self.paths[idx]), labels)).batch(batch_size)
            return StepFeed.grouped(ds, start_step, group, where=self.where)

    def check_readable(self) -> None:
        """Decode every image once; the first that cannot be decoded is one HgpartError naming it."""
        import tensorflow as tf

        done = 0
        try:
            for _ in self._images(self.paths[self.index]).batch(64):
                done += 64
        except tf.errors.OpError:
            bad = self._first_bad(self.paths[self.index][done:done + 64])
            raise BadFileError(f"cannot decode the image {bad!r}", where=self.where, path=bad,
                               fix="remove or replace the file (JPEG, PNG, BMP or GIF)") from None

    def _first_bad(self, paths: np.ndarray) -> str:
        import tensorflow as tf

        for p in paths:
            try:
                next(iter(self._images(np.array([p]))))
            except tf.errors.OpError:
                return str(p)
        return str(paths[0])


def _list_folder(folder: Path, input_shape: tuple[int, ...], num_classes: int, *, seed: int,
                 where: str) -> ImageFolderData:
    """The images of ``folder``'s class subfolders, listed by Keras (class order = sorted subfolder names).

    The listing is Keras's shuffled one for ``seed``, so the last fraction of it (:meth:`Data.split`) is the
    ``subset="validation"`` that ``image_dataset_from_directory(validation_split=..., seed=seed)`` gives.
    """
    import keras

    subdirs = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if len(input_shape) != 3 or input_shape[-1] not in _COLOR_MODES:
        raise HgpartError(f"the model's input {list(input_shape)} is not an image of 1, 3 or 4 channels",
                          where=where, fix="pass an .npz file whose x has the model's input shape")
    if not subdirs:
        raise HgpartError(f"the folder {str(folder)!r} has no class subfolders", where=where,
                          fix="put the images of class i in the i-th subfolder (sorted by name)")
    if len(subdirs) > num_classes:
        raise HgpartError(f"{len(subdirs)} class subfolders but the model has {num_classes} classes", where=where,
                          fix="use a model with as many classes as subfolders")
    try:
        ds = keras.utils.image_dataset_from_directory(
            str(folder), labels="inferred", class_names=subdirs, color_mode=_COLOR_MODES[input_shape[-1]],
            batch_size=None, image_size=input_shape[:2], shuffle=True, seed=seed, verbose=False)
    except ValueError as exc:
        raise HgpartError(f"no images in {str(folder)!r}: {str(exc).splitlines()[0][:160]}", where=where,
                          fix="put .jpg, .png, .bmp or .gif images in class subfolders") from None
    paths = np.array(ds.file_paths)
    if paths.size == 0:
        raise HgpartError(f"the folder {str(folder)!r} holds no images", where=where,
                          fix="put .jpg, .png, .bmp or .gif images in class subfolders")
    names = {n: i for i, n in enumerate(ds.class_names)}
    labels = np.array([names[Path(p).parent.name] for p in paths], np.int32)
    return ImageFolderData(paths, labels, input_shape, where=where)


# -------------------------------------------------------------------------------------------- builtin
def _digits(input_shape: tuple[int, ...], host: str) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits (1797 images, 10 classes), resized to the model's input, in [0, 1]."""
    import tensorflow as tf
    from sklearn.datasets import load_digits

    d = load_digits()
    img = (d.images.astype(np.float32) / 16.0)[..., None]
    h, w, c = input_shape
    with tf.device(host):
        x = tf.image.resize(img, (h, w)).numpy()
    x = np.repeat(x, c, axis=-1) if c != 1 else x
    return x.astype(np.float32), d.target.astype(np.int32)


def load_data(spec: str | Path | DataSpec, *, input_shape: tuple[int, ...], num_classes: int, seed: int = 0,
              n_synthetic: int = 512, host: str = "/CPU:0", where: str = "--data") -> Data:
    """The checked samples ``spec`` names (see the module docstring).

    Args:
        spec: ``digits``, ``synthetic``, an ``.npz`` file with arrays ``x`` and ``y``, or a folder of class folders.
        input_shape: the model's input (H, W, C); images must have it (folders are resized to it).
        num_classes: the model's classes; every label must be below it.
        seed: the seed of the synthetic samples and of a folder's shuffled listing.
        n_synthetic: how many synthetic samples to make.
        host: the device that resizes the digits (open the model's devices first).
        where: the option named in errors.

    Raises:
        HgpartError: the data is missing, malformed or does not fit the model (see the module docstring).
    """
    ds = spec if isinstance(spec, DataSpec) else DataSpec.parse(spec, where=where)
    shape = tuple(int(s) for s in input_shape)
    if ds.kind is DataKind.SYNTHETIC:
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(n_synthetic, *shape)).astype(np.float32)
        return ArrayData(x, rng.integers(0, num_classes, n_synthetic).astype(np.int32), where=where)
    if ds.kind is DataKind.DIGITS:
        if num_classes < 10:
            raise HgpartError(f"the model has {num_classes} classes; digits has 10", where=f"{where} digits",
                              fix="use a model with >= 10 classes or synthetic data")
        return ArrayData(*_digits(shape, host), where=where)
    assert ds.path is not None
    if ds.kind is DataKind.NPZ:
        x, y = check_arrays(*load_arrays(ds.path, where=where), shape, num_classes, where=f"{where} {ds.path}")
        return ArrayData(x, y, where=where)
    folder = _list_folder(ds.path, shape, num_classes, seed=seed, where=f"{where} {ds.path}")
    folder.check_readable()
    return folder
