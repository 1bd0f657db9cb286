"""Model sources: zoo names, ``keras:<Application>`` names and ``.keras`` files.

Usage::

    from hgpart.models import ModelSource, load_graph, parse_input
    graph = load_graph("vgg16", input_shape=parse_input("224"))
    graph = load_graph("keras:ResNet50", input_shape=(224, 224, 3), num_classes=10)
    graph = load_graph("my_model.keras")
    src = ModelSource.from_spec("my_model.keras", graph)   # kind, name, shape, classes, path, sha256
    model = src.load()                                      # the same Keras model again, anywhere

One function per job: :func:`parse_input` reads the ``--input`` option,
:func:`load_keras_model` returns a Keras model, :func:`load_graph` converts it,
and :class:`ModelSource` records which model a placement was compiled from,
so the runtime rebuilds exactly that model (a ``.keras`` file with its
weights). Keras is imported lazily, inside the loaders.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from hgpart.errors import BadFileError, HgpartError
from hgpart.layergraph import LayerGraph
from hgpart.notes import HgpartNote

__all__ = ["parse_input", "load_keras_model", "load_graph", "model_name", "ModelSource", "SourceKind",
           "file_sha256"]

KERAS_PREFIX = "keras:"
#: largest input height, width or channel count accepted: Keras builds real weights, and a dense layer after
#: a flatten grows with the input area (lenet5 at 4096 x 4096 already needs 8 GB)
MAX_SIDE = 8192


def parse_input(text: str | int | tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``"224"`` -> (224, 224, 3); ``"32x32x1"`` -> (32, 32, 1); ``"28x28"`` -> (28, 28, 3)."""
    if text is None or isinstance(text, tuple):
        return text
    raw = str(text).strip().lower()
    try:
        parts = [int(p) for p in raw.replace("*", "x").replace(",", "x").split("x") if p]
    except ValueError:
        parts = []
    if len(parts) == 1:
        parts = [parts[0], parts[0], 3]
    elif len(parts) == 2:
        parts = [parts[0], parts[1], 3]
    if len(parts) != 3 or min(parts) < 1:
        raise HgpartError(
            f"cannot read input size {text!r}", where="--input",
            fix="write e.g. 224 (224x224x3), 32x32x1 or 28x28",
        )
    if max(parts) > MAX_SIDE:
        raise HgpartError(
            f"input size {text!r} has a side above {MAX_SIDE}", where="--input",
            fix="Keras allocates the model's weights, which grow with the input; use a smaller input",
        )
    return tuple(parts)


def model_name(spec: str) -> str:
    """The graph name for a model spec: zoo name, application name, or the file stem."""
    if spec.startswith(KERAS_PREFIX):
        return spec[len(KERAS_PREFIX):].lower()
    if spec.endswith(".keras"):
        return Path(spec).stem
    return spec


def _is_file_spec(spec: str) -> bool:
    """A model spec that names a file rather than a zoo model (the rule :func:`load_keras_model` follows)."""
    return spec.endswith(".keras") or "/" in spec or bool(Path(spec).suffix)


def load_keras_model(spec: str, input_shape: tuple[int, ...] | None = None, num_classes: int | None = None) -> Any:
    """Build or load the Keras model named by ``spec``; running out of memory doing so is one HgpartError."""
    import tensorflow as tf

    try:
        if spec.startswith(KERAS_PREFIX):
            return _application(spec[len(KERAS_PREFIX):], input_shape, num_classes)
        if _is_file_spec(spec):
            return _from_file(spec, input_shape, num_classes)
        from hgpart.zoo import build_model

        return build_model(spec, input_shape=input_shape, num_classes=num_classes)
    except (MemoryError, tf.errors.ResourceExhaustedError):
        shape = "its own input" if input_shape is None else f"input {list(input_shape)}"
        raise HgpartError(f"not enough memory to build model {spec!r} at {shape}", where="--model",
                          fix="use a smaller --input or fewer --classes") from None


def load_graph(
    spec: str, input_shape: tuple[int, ...] | None = None, num_classes: int | None = None
) -> LayerGraph:
    """The layer graph of ``spec``, named after the model."""
    from hgpart.frontend import layer_graph_from_keras

    model = load_keras_model(spec, input_shape=input_shape, num_classes=num_classes)
    return layer_graph_from_keras(model, name=model_name(spec))


def _application(app: str, input_shape: tuple[int, ...] | None, num_classes: int | None) -> Any:
    import keras

    ctor = getattr(keras.applications, app, None)
    if ctor is None or not callable(ctor) or app[:1].islower():
        names = sorted(n for n in dir(keras.applications) if n[:1].isupper())
        raise HgpartError(
            f"keras.applications has no model {app!r}", where="--model",
            fix="choose one of " + ", ".join(names),
        )
    # Keras numbers unnamed layers per process (input_layer, input_layer_1, ...) and the layer names are part of
    # the fingerprint: start from fresh counters, Keras's documented way, so every build of one application (the
    # compiler's, the runtime's) names its layers alike. This also resets Keras's other global settings.
    keras.backend.clear_session(free_memory=False)
    kwargs: dict[str, Any] = {"weights": None, "include_top": True}
    if input_shape is not None:
        kwargs["input_shape"] = tuple(input_shape)
    if num_classes is not None:
        kwargs["classes"] = int(num_classes)
    try:
        return ctor(**kwargs)
    except ValueError as exc:
        raise HgpartError(
            f"keras.applications.{app} refused input {input_shape} / classes {num_classes}: "
            f"{str(exc).splitlines()[0]}",
            where="--model", fix="use an input size the application accepts (often at least 32x32)",
        ) from None


def _from_file(spec: str, input_shape: tuple[int, ...] | None, num_classes: int | None) -> Any:
    path = Path(spec)
    if not path.is_file():
        raise HgpartError(
            f"model file {spec!r} does not exist", where="--model",
            fix="pass a zoo name, keras:<Application>, or an existing .keras file",
        )
    if path.suffix != ".keras":
        raise HgpartError(f"model file {spec!r} is not a .keras file", where="--model",
                          fix="save the model with model.save('name.keras')")
    import keras

    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a user-facing bad file
        first = (str(exc).splitlines() or [exc.__class__.__name__])[0]
        raise HgpartError(
            f"cannot read model file {spec!r} ({exc.__class__.__name__}: {first[:200]})",
            where="--model", fix="the file is truncated, corrupt or needs custom objects; re-save it",
        ) from None
    if input_shape is not None:
        have = tuple(int(v) for v in model.inputs[0].shape[1:] if v is not None)
        if have != tuple(input_shape):
            raise HgpartError(
                f"model file {spec!r} has input shape {list(have)}, not {list(input_shape)}",
                where="--input", fix="omit --input for a .keras file",
            )
    if num_classes is not None and int(model.outputs[0].shape[-1]) != int(num_classes):
        raise HgpartError(
            f"model file {spec!r} has {int(model.outputs[0].shape[-1])} classes, not {num_classes}",
            where="--classes", fix="omit --classes for a .keras file",
        )
    return model


# ------------------------------------------------------------------------------------------- model source
class SourceKind(StrEnum):
    """Where a model comes from: the zoo, ``keras.applications``, or a saved ``.keras`` file."""

    ZOO = "zoo"
    KERAS_APP = "keras_app"
    FILE = "file"


def file_sha256(path: str | Path) -> str:
    """The SHA-256 (64 hex digits) of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class ModelSource:
    """The exact model a placement was compiled from, enough to build it again.

    ``name`` is the zoo name, the ``keras.applications`` class name (``MobileNetV2``) or the file's stem;
    ``input_shape`` and ``num_classes`` are the arguments it was built with. A ``.keras`` file is recorded by
    its absolute ``path`` and the ``sha256`` of its bytes: it is loaded with its weights, so training starts
    from them.
    """

    kind: SourceKind
    name: str
    input_shape: tuple[int, ...]
    num_classes: int
    path: str | None = None
    sha256: str | None = None

    @staticmethod
    def from_spec(spec: str, graph: LayerGraph) -> ModelSource:
        """The source of the model ``spec`` (a ``--model`` value) whose layer graph is ``graph``."""
        shape, classes = tuple(int(v) for v in graph.input_shape), int(graph.num_classes)
        if spec.startswith(KERAS_PREFIX):
            return ModelSource(SourceKind.KERAS_APP, spec[len(KERAS_PREFIX):], shape, classes)
        if _is_file_spec(spec):
            path = Path(spec).resolve()
            try:
                digest = file_sha256(path)
            except OSError as exc:
                raise BadFileError(f"cannot read model file {spec!r} ({exc.strerror or exc.__class__.__name__})",
                                   where="--model", fix="pass an existing, readable .keras file",
                                   path=str(path)) from None
            return ModelSource(SourceKind.FILE, path.stem, shape, classes, path=str(path), sha256=digest)
        return ModelSource(SourceKind.ZOO, spec, shape, classes)

    @staticmethod
    def zoo_default(graph: LayerGraph) -> ModelSource:
        """What a placement that records no source means: the zoo model named like its graph."""
        return ModelSource(SourceKind.ZOO, graph.name, tuple(int(v) for v in graph.input_shape),
                           int(graph.num_classes))

    @property
    def spec(self) -> str:
        """The ``--model`` value that names this source."""
        if self.kind is SourceKind.KERAS_APP:
            return KERAS_PREFIX + self.name
        if self.kind is SourceKind.FILE:
            return str(self.path)
        return self.name

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind.value, "name": self.name, "input_shape": list(self.input_shape),
                             "num_classes": self.num_classes}
        if self.kind is SourceKind.FILE:
            d.update(path=self.path, sha256=self.sha256)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ModelSource:
        """Inverse of :meth:`to_dict` (the placement schema has checked the types)."""
        return ModelSource(SourceKind(d["kind"]), str(d["name"]), tuple(int(v) for v in d["input_shape"]),
                           int(d["num_classes"]), path=d.get("path"), sha256=d.get("sha256"))

    def load(self, *, where: str = "placement") -> Any:
        """Build (zoo, application) or load (file, with its weights) the Keras model of this source.

        A recorded file that is gone is one :class:`BadFileError`. A file whose bytes changed since the
        placement was made (another SHA-256) is loaded with a note: a re-saved or further trained model keeps
        its placement as long as its layers are the same, which the caller checks with the placement's
        fingerprint (:func:`hgpart.runtime.partitioned.check_keras_model`).
        """
        if self.kind is not SourceKind.FILE:
            return load_keras_model(self.spec, input_shape=self.input_shape, num_classes=self.num_classes or None)
        path = Path(str(self.path))
        if not path.is_file():
            raise BadFileError(f"model file {str(path)!r} recorded in the placement does not exist", where=where,
                               fix="restore the file at that path, or compile a new placement with "
                                   "`hgpart partition --model FILE`", path=str(path))
        now = file_sha256(path)
        if now != self.sha256:
            warnings.warn(HgpartNote(
                f"model file {str(path)!r} changed since the placement was made (sha256 {str(self.sha256)[:12]} "
                f"-> {now[:12]}); training starts from its current weights if its layers still match"),
                stacklevel=2)
        return load_keras_model(self.spec)
