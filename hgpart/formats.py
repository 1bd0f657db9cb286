"""Hypergraph file writers: hMetis ``.hgr`` (fmt 11) and PaToH (thesis Figure 3.5).

Usage::

    from hgpart.formats import write_hmetis, write_patoh
    sh = scale_hypergraph(hg, k=4, epsilon=0.1)    # integer weights
    write_hmetis(sh, "vgg16_fine.hgr")
    write_patoh(sh, "vgg16_fine.patoh")

So users can run other partitioners (hMetis, PaToH, KaHyPar's binary) on our
models, and so our KaHyPar backends can read the graph from a file instead
of from millions of Python lists. The text is produced with numpy: every
integer is turned into ASCII digits in a handful of whole-array passes
(one pass per decimal digit), never by per-pin Python formatting, so a
graph with millions of pins is written in whole-array time (measured sizes and
times: benchmarks/results/README.md).

hMetis (fmt 11)::

    <nets> <vertices> 11
    <cost> <pin> <pin> ...        one line per net, pins 1-based
    <weight>                      one line per vertex

PaToH (thesis Figure 3.5, weight scheme 3 = vertex and net weights)::

    0 <vertices> <nets> <pins> 3
    <cost> <pin> <pin> ...        one line per net, pins 0-based
    <w0> <w1> ...                 all vertex weights on the last line
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hgpart.fileio import atomic_write_bytes
from hgpart.partitioners.scaling import ScaledHypergraph

__all__ = ["hmetis_bytes", "patoh_bytes", "write_hmetis", "write_patoh", "format_int_rows", "FORMATS"]

FORMATS = ("hmetis", "patoh")
_SPACE, _NL = ord(" "), ord("\n")


def format_int_rows(values: np.ndarray, seps: np.ndarray) -> bytes:
    """ASCII text of non-negative integers, each followed by its separator byte.

    ``values`` and ``seps`` have one entry per token; ``seps`` holds the byte
    written after the token (space or newline). Vectorised: digit counts,
    offsets by cumulative sum, then one scatter per decimal digit.
    """
    v = np.asarray(values, dtype=np.int64).ravel()
    if v.size == 0:
        return b""
    if v.min() < 0:
        raise ValueError("only non-negative integers can be formatted")
    ndig = np.ones(v.size, dtype=np.int64)
    p = 10
    while True:
        more = v >= p
        if not more.any():
            break
        ndig += more
        p *= 10
    ends = np.cumsum(ndig + 1)  # position just after each separator
    buf = np.empty(int(ends[-1]), dtype=np.uint8)
    buf[ends - 1] = np.asarray(seps, dtype=np.uint8)
    last = ends - 2  # position of the last digit
    rest = v.copy()
    for d in range(int(ndig.max())):
        sel = ndig > d
        idx = np.flatnonzero(sel)
        buf[last[idx] - d] = (rest[idx] % 10 + 48).astype(np.uint8)
        rest[idx] //= 10
    return buf.tobytes()


def _net_block(sh: ScaledHypergraph, *, base: int) -> bytes:
    """One line per net: cost then pins (``base``-indexed)."""
    nn = sh.num_nets
    sizes = np.diff(sh.net_ptr)
    line_len = sizes + 1
    starts = np.zeros(nn + 1, dtype=np.int64)
    np.cumsum(line_len, out=starts[1:])
    tokens = np.empty(int(starts[-1]), dtype=np.int64)
    is_cost = np.zeros(tokens.size, dtype=bool)
    is_cost[starts[:-1]] = True
    tokens[starts[:-1]] = sh.net_cost
    tokens[~is_cost] = sh.net_pins + base
    seps = np.full(tokens.size, _SPACE, dtype=np.uint8)
    seps[starts[1:] - 1] = _NL
    return format_int_rows(tokens, seps)


def hmetis_bytes(sh: ScaledHypergraph) -> bytes:
    """The hMetis fmt-11 text of ``sh`` (net costs and vertex weights)."""
    head = f"{sh.num_nets} {sh.num_vertices} 11\n".encode()
    vw = format_int_rows(sh.vertex_weight, np.full(sh.num_vertices, _NL, dtype=np.uint8))
    return head + _net_block(sh, base=1) + vw


def patoh_bytes(sh: ScaledHypergraph) -> bytes:
    """The PaToH text of ``sh`` as in thesis Figure 3.5 (0-based, weight scheme 3)."""
    head = f"0 {sh.num_vertices} {sh.num_nets} {sh.num_pins} 3\n".encode()
    seps = np.full(sh.num_vertices, _SPACE, dtype=np.uint8)
    seps[-1] = _NL
    return head + _net_block(sh, base=0) + format_int_rows(sh.vertex_weight, seps)


def write_hmetis(sh: ScaledHypergraph, path: str | os.PathLike[str]) -> Path:
    return atomic_write_bytes(path, hmetis_bytes(sh))


def write_patoh(sh: ScaledHypergraph, path: str | os.PathLike[str]) -> Path:
    return atomic_write_bytes(path, patoh_bytes(sh))
