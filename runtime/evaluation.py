"""Loss and accuracy of a partitioned model: a training step that also counts hits, and inference over batches.

Usage::

    step = MeteredStep(pm, OptimizerSpec("adam"), batch_size=32)
    loss, acc = step.run(x, y)             # one training step; acc = hits / batch size before the update
    ev = Evaluator(pm)
    ev.evaluate(val.eval_batches(64))      # Metrics(loss=..., accuracy=...) in inference mode
    ev.predict(batches)                    # probabilities (or logits when the model has no final softmax)

The metered step is :class:`~hgpart.runtime.step.TrainStep` whose compiled function also returns the fraction of
the batch whose arg-max equals the label (every micro-batch's logits), computed on the loss device beside the
cross-entropy.
Keras's ``accuracy`` in ``fit`` is the same figure (mean over the epoch's batches).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from hgpart.runtime.partitioned import PlacedModel
from hgpart.runtime.settle import settle
from hgpart.runtime.step import Forward, TrainStep

__all__ = ["Metrics", "MeteredStep", "Evaluator"]


@dataclass(frozen=True)
class Metrics:
    """Mean cross-entropy and accuracy over some samples."""

    loss: float
    accuracy: float


class MeteredStep(TrainStep):
    """A training step returning ``(loss, accuracy)`` of the batch (see the module docstring)."""

    def _step(self, x: Any, y: Any) -> Any:
        import tensorflow as tf

        f = self.forward_loss(x, y)
        self.update(tf.gradients(f.loss, [pv.var for pv in self.pm.trainable]), f.stats)
        return f.loss, self.accuracy(f)

    def accuracy(self, f: Forward) -> Any:
        """The graph of the fraction of the batch of ``f`` whose arg-max equals the label, on the loss device."""
        import tensorflow as tf

        with tf.device(self.pm.devices[self.pm.loss_part]), tf.name_scope("loss/accuracy"):
            hits = [tf.reduce_sum(tf.cast(tf.equal(tf.argmax(lg, axis=-1, output_type=tf.int32), yy), tf.float32))
                    for lg, yy in zip(f.logits, f.labels, strict=True)]
            return tf.add_n(hits) / float(self.batch_size)

    def run(self, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        """One training step on ``x, y``: the batch's loss and accuracy (both before the update)."""
        import tensorflow as tf

        with tf.device(self.pm.host):
            xt = tf.constant(np.asarray(x, np.float32))
            yt = tf.constant(np.asarray(y, np.int32))
        loss, acc = self.concrete(xt, yt)
        return float(loss.numpy()), float(acc.numpy())

    def __call__(self, x: np.ndarray, y: np.ndarray) -> float:
        return self.run(x, y)[0]

    def adopt(self, other: MeteredStep) -> None:
        """Take ``other``'s optimizer slots and step counters (same placed model, another batch size or mode)."""
        for i, slots in self.slots.items():
            for mine, theirs in zip(slots, other.slots[i], strict=True):
                mine.assign(theirs)
        for dev, c in self.counters.items():
            c.assign(other.counters[dev])
        settle()


class Evaluator:
    """Inference-mode loss, accuracy and outputs of a placed model, batch by batch."""

    def __init__(self, pm: PlacedModel) -> None:
        import tensorflow as tf

        self.pm = pm

        @tf.function(reduce_retracing=True)
        def run(x: Any, y: Any) -> tuple[Any, Any, Any]:
            logits = pm.forward(x, training=False)
            with tf.device(pm.devices[pm.loss_part]), tf.name_scope("eval"):
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y), tf.float32)
                out = tf.nn.softmax(logits) if pm.final_softmax else logits
                return tf.reduce_sum(ce), tf.reduce_sum(hits), out

        self._run = run

    def _call(self, x: np.ndarray, y: np.ndarray) -> tuple[float, float, np.ndarray]:
        import tensorflow as tf

        with tf.device(self.pm.host):
            xt = tf.constant(np.asarray(x, np.float32))
            yt = tf.constant(np.asarray(y, np.int32))
        ce, hits, out = self._run(xt, yt)
        return float(ce.numpy()), float(hits.numpy()), out.numpy()

    def evaluate(self, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> Metrics:
        """Mean loss and accuracy over every sample of ``batches``."""
        total_ce = total_hits = 0.0
        n = 0
        for x, y in batches:
            ce, hits, _ = self._call(x, y)
            total_ce, total_hits, n = total_ce + ce, total_hits + hits, n + len(y)
        return Metrics(loss=total_ce / max(n, 1), accuracy=total_hits / max(n, 1))

    def predict(self, batches: Iterable[np.ndarray]) -> np.ndarray:
        """The model's outputs for every sample of ``batches``, in order."""
        outs = [self._call(x, np.zeros(len(x), np.int32))[2] for x in batches]
        return np.concatenate(outs) if outs else np.zeros((0, self.pm.graph.num_classes or 0), np.float32)
