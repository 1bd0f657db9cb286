"""TensorFlow's CPU allocator for every process hgpart trains or measures in: BFC, which keeps and reuses memory.

TensorFlow's default CPU allocator hands each tensor to ``malloc``. glibc maps a big block (above its mmap
threshold, at most 32 MiB) fresh from the kernel and unmaps it when the tensor dies, so every step pays a page
fault per 4 KiB of each big tensor again: VGG16's gradients, the ring all-reduce's flattened copies, the dense
layers' activations. On a virtual machine a page fault can trap to the host, and what it costs changes with the
host's state, so the same step's time drifts between runs for a reason neither the profiles nor ``hgpart
calibrate`` can see. TensorFlow's BFC allocator (``TF_CPU_ALLOCATOR_USE_BFC``, the allocator its GPUs use) keeps
the regions it has grown and hands them out again: after the first step the step touches no new memory.

:func:`use_bfc` sets it in the environment of this process (the ``hgpart`` command line, before any tensor is
made) and :func:`bfc_environment` in that of each local worker it starts, unless the user set the variable
already (``TF_CPU_ALLOCATOR_USE_BFC=false`` restores TensorFlow's default). TensorFlow caps the BFC pool at
64 GiB; on a machine with more, hgpart raises the cap to the machine's memory (``TF_CPU_BFC_MEM_LIMIT_IN_MB``), so
a model that fits in memory is not refused. Workers of a user's own cluster (``--devices cluster:...``) are
processes the user starts: they need the variable in their own environment. The measured effect:
``benchmarks/cpu_allocator.py``.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["BFC_LIMIT_MB", "TF_DEFAULT_LIMIT_MB", "USE_BFC", "bfc_environment", "physical_memory_bytes", "use_bfc"]

#: TensorFlow's switch between its malloc-based CPU allocator (false, its default) and BFC (true)
USE_BFC = "TF_CPU_ALLOCATOR_USE_BFC"
#: the BFC pool's limit in MiB
BFC_LIMIT_MB = "TF_CPU_BFC_MEM_LIMIT_IN_MB"
#: TensorFlow's default for it (``tensorflow/core/common_runtime/process_state.cc``)
TF_DEFAULT_LIMIT_MB = 2**16


def physical_memory_bytes() -> int | None:
    """This machine's RAM in bytes: ``MemTotal`` of /proc/meminfo, else the page count times the page size (None
    where the platform says neither). The one reader of it: the BFC cap here, ``hgpart calibrate``'s device memory
    and the comparison's machine record."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def _machine_mb() -> int | None:
    """This machine's physical memory in MiB (None where the platform does not say)."""
    got = physical_memory_bytes()
    return None if got is None else got // 2**20


def bfc_environment(environ: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``environ`` with the BFC CPU allocator on and its limit at the machine's memory, where neither is set
    already; returns ``environ``, changed in place."""
    environ.setdefault(USE_BFC, "true")
    if environ[USE_BFC].strip().lower() in ("1", "true") and BFC_LIMIT_MB not in environ:
        mb = _machine_mb()
        if mb and mb > TF_DEFAULT_LIMIT_MB:  # a machine with more memory than TensorFlow's cap may use all of it
            environ[BFC_LIMIT_MB] = str(mb)
    return environ


def use_bfc() -> None:
    """The BFC CPU allocator for this process (see the module): call before TensorFlow makes its first tensor."""
    bfc_environment(os.environ)
