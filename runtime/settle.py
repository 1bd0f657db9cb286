"""A barrier between eager writes and the next compiled call: :func:`settle`.

Why: on worker processes (``local`` and ``cluster:`` devices) an eager op on a remote variable, such as a
``tf.Variable``'s creation, an ``assign`` or a checkpoint's restore, is enqueued to that worker and the client
goes on. A later call of a multi-device ``tf.function`` runs its pieces on the workers by another path, which
is not ordered after those enqueued ops: it can run before a write has landed, or a write can land after it
(``benchmarks/results/eager_order/``; the compiled pipeline then drifted from sequential training,
``tests/test_multistep_local.py``). Eager ops after a compiled call (which returns once it has run) are ordered
after it.

So every piece of the runtime that writes variables eagerly calls :func:`settle` before handing them to a
compiled call: :func:`hgpart.runtime.step.restoring`, the variables' creation, optimizer-state adoption and
checkpoint restores.
"""

from __future__ import annotations

__all__ = ["settle"]


def settle() -> None:
    """Block until every op enqueued on any device, local or on a worker process, has run
    (``tf.test.experimental.sync_devices``: a ``SyncDevice`` op on each device, then a wait on every executor).
    Raises the error of a failed one, as the ops' own calls would."""
    import tensorflow as tf

    tf.test.experimental.sync_devices()
