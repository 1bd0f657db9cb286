"""Partitions in which every part fits a memory limit (hgpart.partitioners.memory_fit, --memory-limit).

The toy is a chain whose early layers hold most of the activations and whose dense layers most of the work,
so the work-balanced placement of least volume piles the memory on one part: at B = 4 it needs
158,464 bytes on one part and 32,384 on the other (of 182,656 additive bytes plus received maps).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hgtoys import chain, unit_work

from hgpart.cli import main
from hgpart.hypergraph import build_hypergraph
from hgpart.memory import MemorySettings, part_memory, vertex_memory
from hgpart.metrics import balance_class
from hgpart.partitioners import partition
from hgpart.partitioners.memory_fit import Job as _Job
from hgpart.partitioners.memory_fit import MemoryLimit, NoFitError, partition_fitting

SETTINGS = MemorySettings(batch_size=4)


def Job(**kw):  # noqa: N802 - the job with the package's partition function
    return _Job(runner=partition, **kw)


@pytest.fixture(autouse=True)
def _threads(monkeypatch):
    monkeypatch.setenv("HGPART_MTKAHYPAR_THREADS", "2")
    monkeypatch.setenv("COLUMNS", "200")


def _toy():
    g = chain([3, 8, 8, 8], [16, 4], hw=8)
    return build_hypergraph(g, unit_work(g), batch_size=4, grain="coarse")


def _largest(hg, parts, k):
    return max(p.total for p in part_memory(hg, parts, k, SETTINGS))


def test_the_toy_needs_the_limit() -> None:
    hg = _toy()
    plain = partition(hg, k=2, backend="exact", epsilon=0.1, time_limit=10)
    assert _largest(hg, plain.parts, 2) == pytest.approx(158_464.0)
    assert float(vertex_memory(hg, SETTINGS).total.sum()) == pytest.approx(182_656.0)


@pytest.mark.parametrize("backend", ["exact", "auto"])
def test_exact_rows_force_a_balanced_memory_split(backend: str) -> None:
    hg = _toy()
    res = partition_fitting(hg, Job(k=2, backend=backend, time_limit=10), MemoryLimit(105_000.0, SETTINGS))
    mem = [p.total for p in part_memory(hg, res.parts, 2, SETTINGS)]
    # 158,464 bytes on one part before; now both near half of the ~203 KB the split needs, and the work
    # balance still holds (the program keeps both rows)
    assert max(mem) <= 105_000.0 and min(mem) >= 90_000.0
    assert balance_class(hg, res.parts, 2, 0.1) == 0
    assert res.info["memory"]["chosen"] == "exact with memory rows"
    assert res.info["memory"]["limit_bytes"] == 105_000.0
    assert [a["fits"] for a in res.info["memory"]["attempts"]] == [False, True]
    assert res.objective_bytes > 0


def test_the_program_drops_the_work_balance_before_the_memory() -> None:
    from hgpart.partitioners.memory_fit import _at_k

    hg = _toy()
    limit = MemoryLimit(100_000.0, SETTINGS)
    cands = _at_k(hg, Job(k=2, backend="exact", time_limit=10), limit, vertex_memory(hg, SETTINGS), first=True)
    # within 10 % work balance no split fits 100,000 bytes (HiGHS proves it); without it one does (99,888)
    assert [a.fits for a in cands.attempts] == [False, False, True]
    assert cands.attempts[2].how == "exact with memory rows, work balance dropped"
    assert cands.attempts[2].max_memory_bytes <= 100_000.0 and not cands.attempts[2].balanced
    # 60,000 bytes: both programs infeasible, a proof for this unsplit chain, so no heuristic run follows
    proof = _at_k(hg, Job(k=2, backend="exact", time_limit=10), MemoryLimit(60_000.0, SETTINGS),
                  vertex_memory(hg, SETTINGS), first=True)
    assert len(proof.attempts) == 3 and not any("vertex weight" in a.how for a in proof.attempts)


def test_heuristic_backends_reweight_by_memory() -> None:
    hg = _toy()
    res = partition_fitting(hg, Job(k=2, backend="kahypar"), MemoryLimit(105_000.0, SETTINGS))
    assert _largest(hg, res.parts, 2) <= 105_000.0
    assert "memory as vertex weight" in res.info["memory"]["chosen"]


def test_no_fit_names_the_smallest_k() -> None:
    hg = _toy()
    # 182,656 additive bytes over 60,000 per part: at least 4 parts, and a placement at K = 4 fits
    with pytest.raises(NoFitError) as info:
        partition_fitting(hg, Job(k=2, backend="exact", time_limit=10), MemoryLimit(60_000.0, SETTINGS))
    line = info.value.line()
    assert info.value.smallest_k == 4 and "\n" not in line
    assert "no placement fits 58.6 KiB per part at K = 2 (the exact program proves it)" in line
    assert "use --k 4, the smallest K that fits" in line
    res = partition_fitting(hg, Job(k=4, backend="exact", time_limit=10), MemoryLimit(60_000.0, SETTINGS))
    assert _largest(hg, res.parts, 4) <= 60_000.0
    # a caller that tries every K itself (hgpart plan) asks for no search: the same finding at K, no smallest K
    with pytest.raises(NoFitError) as at_k:
        partition_fitting(hg, Job(k=2, backend="exact", time_limit=10), MemoryLimit(60_000.0, SETTINGS),
                          search=False)
    assert at_k.value.smallest_k is None and "(the exact program proves it)" in at_k.value.what
    assert "K >= 4" in (at_k.value.fix or "")


def test_a_vertex_larger_than_the_limit_fits_nowhere() -> None:
    hg = _toy()
    biggest = float(vertex_memory(hg, SETTINGS).total.max())  # a row of d0: 8 KiB of weights, grads, slots
    with pytest.raises(NoFitError, match="alone needs") as info:
        partition_fitting(hg, Job(k=2, backend="exact"), MemoryLimit(biggest - 1, SETTINGS))
    assert info.value.smallest_k is None


def test_without_a_limit_nothing_changes() -> None:
    hg = _toy()
    a = partition_fitting(hg, Job(k=2, backend="exact", time_limit=10), None)
    b = partition(hg, k=2, backend="exact", epsilon=0.1, time_limit=10)
    np.testing.assert_array_equal(a.parts, b.parts)
    assert "memory" not in a.info


def _minivgg_total(batch: int) -> float:
    from hgpart.models import load_graph
    from hgpart.profile import analytic_profile

    g = load_graph("minivgg")
    hg = build_hypergraph(g, analytic_profile(g, batch).work(), batch_size=batch, grain="coarse")
    return float(vertex_memory(hg, MemorySettings(batch_size=batch, inflight=2)).total.sum())


def _cli(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_cli_places_within_the_limit_and_records_it(tmp_path, capsys) -> None:
    limit = int(0.7 * _minivgg_total(16))  # one device cannot hold it, two can
    base = ["partition", "--model", "minivgg", "--analytic", "--batch-size", "16", "--no-bound",
            "--memory-limit", str(limit), "--inflight", "2", "--time-limit", "20"]
    code, out, err = _cli([*base, "--k", "1", "--out", str(tmp_path / "k1.json")], capsys)
    assert code == 2 and "use --k 2, the smallest K that fits" in err and len(err.strip().splitlines()) == 1
    code, out, err = _cli([*base, "--k", "2", "--out", str(tmp_path / "k2.json")], capsys)
    assert code == 0, err
    assert "Memory per part in MiB, adam, 2 batch(es) in flight" in out
    d = json.loads((tmp_path / "k2.json").read_text())
    m = d["metrics"]
    assert m["memory_limit_bytes"] == limit and m["inflight"] == 2
    assert max(m["max_memory_bytes"], 0) <= limit
    assert d["provenance"]["backend_info"]["memory"]["limit_bytes"] == limit


def test_inflight_needs_a_limit() -> None:
    from hgpart.errors import BadOptionError
    from hgpart.partitioners.memory_fit import limit_from_options

    assert limit_from_options(None) is None
    with pytest.raises(BadOptionError, match="--inflight 2 counts memory only under a limit"):
        limit_from_options(None, inflight=2)
    assert limit_from_options("1KiB", inflight=2).settings.kept_batches == 2


@pytest.mark.parametrize(("text", "fix"), [("16 GiBs", "16GiB"), ("0", "at least one byte")])
def test_cli_refuses_a_bad_size_before_building(tmp_path, capsys, text: str, fix: str) -> None:
    code, _, err = _cli(["partition", "--model", "no-such-model", "--analytic", "--k", "2", "--memory-limit", text,
                         "--out", str(tmp_path / "p.json")], capsys)
    assert code == 2 and "--memory-limit" in err and fix in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_vgg16_at_batch_256_is_placed_within_16gib(tmp_path, capsys) -> None:
    """VGG16 224 at batch 256 needs 16.6 GiB with Adam (one batch kept): no single 16 GiB device holds it, and
    the smallest K is 2."""
    base = ["partition", "--model", "vgg16", "--input", "224", "--analytic", "--batch-size", "256",
            "--memory-limit", "16GiB", "--bound-time-limit", "10"]
    code, _, err = _cli([*base, "--k", "1", "--out", str(tmp_path / "k1.json")], capsys)
    assert code == 2 and "use --k 2, the smallest K that fits" in err
    code, out, err = _cli([*base, "--k", "2", "--out", str(tmp_path / "k2.json")], capsys)
    assert code == 0, err
    m = json.loads((tmp_path / "k2.json").read_text())["metrics"]
    assert m["memory_limit_bytes"] == 16 * 2**30 and m["max_memory_bytes"] <= 16 * 2**30
