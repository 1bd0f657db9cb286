"""runtime.heap.quiet_heap: garbage made before the steps is collected on entry, survivors are frozen for the
block and handed back on leaving, nested and concurrent blocks freeze once."""

from __future__ import annotations

import gc
import threading
import weakref

from hgpart.runtime.heap import quiet_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _dead_cycle() -> weakref.ref[_Node]:
    """A reference cycle that nothing else holds (only the cyclic collector can free it)."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_collects_before_and_freezes_for_the_block_only() -> None:
    gc.unfreeze()
    dead = _dead_cycle()
    assert dead() is not None  # reference counting alone does not free a cycle
    kept = _Node()
    with quiet_heap():
        assert dead() is None  # collected on entry
        assert gc.get_freeze_count() > 0  # the survivors, ``kept`` among them, are out of every collection
        assert not gc.is_tracked(kept) or kept not in gc.get_objects(generation=2)
    assert gc.get_freeze_count() == 0  # handed back on leaving


def test_a_cycle_made_inside_is_still_collected() -> None:
    with quiet_heap():
        dead = _dead_cycle()
        gc.collect()
        assert dead() is None


def test_nested_and_concurrent_blocks_unfreeze_once_the_last_leaves() -> None:
    gc.unfreeze()
    inner_in = threading.Event()
    outer_may_leave = threading.Event()
    seen: list[int] = []

    def other() -> None:
        with quiet_heap():
            inner_in.set()
            outer_may_leave.wait(10)
        seen.append(gc.get_freeze_count())

    with quiet_heap():
        with quiet_heap():
            pass
        assert gc.get_freeze_count() > 0  # the inner block's exit did not unfreeze
        t = threading.Thread(target=other)
        t.start()
        assert inner_in.wait(10)
    assert gc.get_freeze_count() > 0  # the other thread's block is still open
    outer_may_leave.set()
    t.join(10)
    assert seen == [0]
    assert gc.get_freeze_count() == 0


def test_unfreezes_when_the_block_raises() -> None:
    gc.unfreeze()
    try:
        with quiet_heap():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.get_freeze_count() == 0
