"""The Keras model of a placement, rebuilt exactly as it was compiled, optionally from given weights.

Usage::

    from hgpart.runtime.modelsource import build_for_placement, check_init_weights
    init = check_init_weights("pretrained.weights.h5")    # before any TensorFlow work: exists, right suffix
    model = build_for_placement(pl, seed=0, init_weights=init)

The placement records its model source (:class:`hgpart.models.ModelSource`): a zoo name with its input and
classes, a ``keras:<Application>``, or a ``.keras`` file with its SHA-256. :func:`build_for_placement` builds that
model with a fixed seed (a ``.keras`` file keeps its saved weights), refuses one whose layers are not the
placement's (the fingerprint check), then loads ``init_weights`` when given. Every way the model or the weights
file can be wrong is one :class:`hgpart.errors.HgpartError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hgpart.runtime.partitioned import check_keras_model

from hgpart.errors import BadFileError, ModelMismatchError
from hgpart.placement import Placement

__all__ = ["build_for_placement", "check_init_weights", "load_init_weights", "WEIGHT_SUFFIXES"]

#: the weight files ``--init-weights`` reads: a whole saved model, or the weights Keras's ``save_weights`` writes
WEIGHT_SUFFIXES = (".keras", ".weights.h5")
_WHERE = "--init-weights"


def check_init_weights(path: str | os.PathLike[str] | None) -> Path | None:
    """Refuse a weights path that is missing, a folder, or not ``.keras`` / ``.weights.h5``; None passes through."""
    if path is None:
        return None
    p = Path(path)
    if not p.name.endswith(WEIGHT_SUFFIXES):
        raise BadFileError(f"weights file {str(p)!r} is neither a .keras nor a .weights.h5 file", where=_WHERE,
                           fix="pass model.save('m.keras') or model.save_weights('m.weights.h5') output", path=str(p))
    if not p.is_file():
        what = "is a directory" if p.is_dir() else "does not exist"
        raise BadFileError(f"weights file {str(p)!r} {what}", where=_WHERE, fix="check the path", path=str(p))
    return p


def load_init_weights(model: Any, path: str | os.PathLike[str]) -> None:
    """Set ``model``'s weights from a ``.keras`` or ``.weights.h5`` file made for the same layers.

    A ``.keras`` file is opened as a model and must have the same weight shapes in the same order; a
    ``.weights.h5`` file is read by Keras's ``load_weights``, which matches weights layer by layer. A file that
    cannot be read, or holds weights of other shapes, is one :class:`HgpartError`; nothing is half-loaded
    from a ``.keras`` file (its shapes are checked before any weight is set).
    """
    p = check_init_weights(path)
    assert p is not None
    if p.name.endswith(".keras"):
        _set_from_model(model, p)
        return
    try:
        model.load_weights(p)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a user-facing bad file
        raise BadFileError(f"cannot load weights file {str(p)!r} into model {model.name!r} "
                           f"({exc.__class__.__name__}: {_first_line(exc)})", where=_WHERE,
                           fix="pass weights saved from the placement's model (same layers and shapes)",
                           path=str(p)) from None


def _set_from_model(model: Any, path: Path) -> None:
    """Copy the weights of the model saved in ``path``, after checking every shape matches."""
    import keras

    try:
        saved = keras.models.load_model(path, compile=False)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a user-facing bad file
        raise BadFileError(f"cannot read weights file {str(path)!r} ({exc.__class__.__name__}: {_first_line(exc)})",
                           where=_WHERE, fix="the file is truncated, corrupt or needs custom objects; re-save it",
                           path=str(path)) from None
    have = [tuple(w.shape) for w in model.weights]
    got = [tuple(w.shape) for w in saved.weights]
    if have != got:
        first = next((i for i, (a, b) in enumerate(zip(have, got, strict=False)) if a != b), min(len(have), len(got)))
        detail = (f"weight {first}: {list(got[first])} vs {list(have[first])}" if first < min(len(have), len(got))
                  else f"{len(got)} weights vs {len(have)}")
        raise ModelMismatchError(f"weights file {str(path)!r} (model {saved.name!r}) does not fit model "
                                 f"{model.name!r}: {detail}", where=_WHERE,
                                 fix="pass weights saved from the placement's model (same layers and shapes)",
                                 expected=str(have[:1]), found=str(got[:1]))
    model.set_weights(saved.get_weights())


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


def build_for_placement(pl: Placement, *, seed: int = 0, init_weights: str | os.PathLike[str] | None = None) -> Any:
    """The Keras model the placement was compiled from, with a fixed seed, checked against the placement.

    Zoo and ``keras:<Application>`` sources are built with fresh weights from ``seed``; a ``.keras`` source is
    loaded with its saved weights. ``init_weights`` (``.keras`` or ``.weights.h5``) then replaces the weights.
    """
    import keras

    keras.utils.set_random_seed(seed)
    where = "placement vs Keras model"
    model = pl.model_source().load(where="placement model source")
    check_keras_model(pl, model, where=where)
    if init_weights is not None:
        load_init_weights(model, init_weights)
    return model
