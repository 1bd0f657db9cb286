"""Training steps without a full garbage collection in their midst: :func:`quiet_heap`.

Why: tracing and placing a step function leaves many Python objects in reference cycles
(the graphs of traced functions, their operations and shapes). Python's cyclic collector frees them in a
full (generation 2) collection, which it starts in whichever thread happens to allocate when its counters say so,
and which holds the GIL for as long as it walks every tracked object and deletes the dead graphs
(``benchmarks/results/gc_pauses/`` measures such pauses after a comparison's strategies were compiled in one
process). When that thread is one of the step threads, no other thread issues a call meanwhile and every worker
idles: a short timed run then comes out far slower than the same run without it (the asynchronous data-parallel
baselines' "slow passes").

So training collects once before its first timed step, while nothing is timed, and then freezes what survived
(``gc.freeze``: the survivors move to a permanent generation that later collections do not walk). A collection
during training then walks only the objects made since, and every object stays collectable by reference counting
as before. On leaving, the survivors are handed back to the collector (``gc.unfreeze``), so a model or function
dropped afterwards is freed as usual. Nested or concurrent uses freeze once and unfreeze when the last one leaves.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["quiet_heap"]

_lock = threading.Lock()
_depth = 0


@contextmanager
def quiet_heap() -> Iterator[None]:
    """Collect garbage now, then keep the objects that survived out of every collection inside the block."""
    global _depth
    with _lock:
        if _depth == 0:
            gc.collect()
            gc.freeze()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.unfreeze()
