"""Static comparison grid and the ``hgpart compare`` command end to end (small model, analytic profile)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from compare_helpers import tiny_vgg
from typer.testing import CliRunner

from hgpart.compare.report import build_tables, epoch_rows, heatmap_choice, layer_part_shares
from hgpart.compare.static import run_static
from hgpart.errors import HgpartError
from hgpart.profile import analytic_profile


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HGPART_MTKAHYPAR_THREADS", "1")


def test_not_possible_is_reported_not_raised() -> None:
    g = tiny_vgg()  # 5 vertex layers, 32 coarse vertices
    cmp = run_static(g, analytic_profile(g, 4), ks=[2, 6, 40], methods=["layerwise", "horizontal", "incremental"],
                     grains=["coarse", "fine"], progress=False)
    lw6 = cmp.find("layerwise", "coarse", 6)
    assert lw6 is not None and lw6.status == "not possible" and "5 vertex layers" in lw6.reason
    hz40 = cmp.find("horizontal", "coarse", 40)
    assert hz40.status == "not possible" and "32 vertices" in hz40.reason
    assert cmp.find("horizontal", "fine", 40).status == "ok"  # the fine grain has enough vertices
    assert cmp.find("layerwise", "fine", 2) is None  # layer-wise runs once (grain independent)
    assert all(r.thesis == {} for r in cmp.results)  # not the thesis's configuration
    assert not cmp.thesis_applies
    # the not-possible cells appear in the printed tables with their reason
    text = json.dumps([t.rows for t in build_tables(cmp, batch_sizes=[8])])
    assert "not possible: N = 6 exceeds the 5 vertex layers" in text


def test_budget_skips_remaining_hypergraph_runs() -> None:
    g = tiny_vgg()
    cmp = run_static(g, analytic_profile(g, 4), ks=[2, 4], methods=["incremental", "hypergraph"], grains=["coarse"],
                     budget_seconds=0.0, progress=False)
    hg_runs = [r for r in cmp.results if r.method == "hypergraph"]
    assert hg_runs and all(r.status == "skipped" and "budget" in r.reason for r in hg_runs)
    assert all(r.status == "ok" for r in cmp.results if r.method == "incremental")


def test_bad_grid_options_are_user_errors() -> None:
    g = tiny_vgg()
    with pytest.raises(HgpartError, match="unknown method"):
        run_static(g, analytic_profile(g, 4), ks=[2], methods=["greedy"], progress=False)
    with pytest.raises(HgpartError, match="hypergraph backend"):
        run_static(g, analytic_profile(g, 4), ks=[2], methods=["hypergraph"], backend="layerwise", progress=False)


def test_epoch_rows_and_heatmap_shares() -> None:
    g = tiny_vgg()
    cmp = run_static(g, analytic_profile(g, 4), ks=[2, 4], methods=["layerwise", "hypergraph"], grains=["coarse"],
                     progress=False)
    rows = epoch_rows(cmp, images=1000, batch_sizes=[4, 8])
    r = next(x for x in rows if x["n"] == 2 and x["batch_size"] == 4)
    hp = cmp.find("hypergraph", "coarse", 2, 0.1)
    assert r["dp_epoch_gib"] == pytest.approx(250 * 2 * 1 * g.total_params * 4 / 2**30)
    assert r["hp_coarse_epoch_gib"] == pytest.approx(250 * 2 * hp.metrics.comm_volume_mib / 1024)
    assert r["hp_coarse_reduction_pct"] == pytest.approx(100 * (1 - r["hp_coarse_epoch_gib"] / r["dp_epoch_gib"]))
    choice = heatmap_choice(cmp)
    assert choice.method == "hypergraph" and choice.k == 4
    names, share = layer_part_shares(cmp, choice)
    assert names == ["conv1", "conv2", "conv3", "fc1", "fc2"]
    assert share.shape == (5, 4) and share.sum(axis=1) == pytest.approx(1.0)


def test_compare_command_end_to_end(tmp_path: Path) -> None:
    from hgpart.cli import _register, app

    _register()
    gpath = tmp_path / "tiny.json"
    gpath.write_text(json.dumps(tiny_vgg().to_dict()))
    out = tmp_path / "report"
    args = ["compare", "--model", str(gpath), "--analytic", "--batch-size", "8", "--k", "2,6",
            "--methods", "layerwise,horizontal,incremental,hypergraph", "--grains", "coarse,fine",
            "--epsilon", "0.1", "--images", "800", "--batch-sizes", "8,16", "--out", str(out),
            "--save-placements"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "Comm. Vol (MiB, forward pass) by method and N" in res.output
    for name in ("results.csv", "epoch.csv", "comparison.json", "report.md", "comm_volume.png",
                 "max_over_avg_work.png", "memory.png", "heatmap.png", "part_memory.png"):
        assert (out / name).is_file(), name
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    rows = list(csv.DictReader((out / "results.csv").open()))
    # layerwise 2 + horizontal 2x2 + incremental 2x2 + hypergraph 2 grains x 2
    assert len(rows) == 2 + 4 + 4 + 4
    lw6 = next(r for r in rows if r["method"] == "layerwise" and r["k"] == "6")
    assert lw6["status"] == "not possible" and lw6["comm_volume_mib"] == ""
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(float(r["max_over_avg"]) >= 1.0 - 1e-9 for r in ok)
    # the certificate: every coarse result has a proven bound no larger than its volume, the fine ones none
    assert "gap to the proven optimum" in res.output
    for r in ok:
        if r["grain"] == "coarse":
            assert r["bound_status"] == "ok" and float(r["lower_bound_mib"]) <= float(r["comm_volume_mib"]) + 1e-9
        else:
            assert r["lower_bound_mib"] == "" and r["bound_status"] == ""
    doc = json.loads((out / "comparison.json").read_text())
    assert doc["model"] == "tinyvgg" and len(doc["results"]) == len(rows) and doc["epoch"]
    placements = sorted((out / "placements").glob("*.json"))
    assert len(placements) == len(ok)
    from hgpart.placement import load_placement

    pl = load_placement(next(p for p in placements if "layerwise_k2" in p.name))
    row = next(r for r in ok if r["method"] == "layerwise" and r["k"] == "2")
    assert pl.method == "layerwise" and pl.recompute_metrics().comm_volume_mib == pytest.approx(
        float(row["comm_volume_mib"]))


def test_compare_command_user_errors(tmp_path: Path) -> None:
    from hgpart.cli import main

    gpath = tmp_path / "tiny.json"
    gpath.write_text(json.dumps(tiny_vgg().to_dict()))
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--model", str(gpath), "--analytic", "--k", "2,x"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--model", str(gpath), "--profile", str(tmp_path / "missing.json"), "--k", "2"])
    assert exc.value.code == 2


def test_backend_time_limit_is_recorded_as_failed() -> None:
    g = tiny_vgg()
    cmp = run_static(g, analytic_profile(g, 4), ks=[2], methods=["hypergraph"], grains=["coarse"],
                     backend="mtkahypar", time_limit=1e-4, progress=False)
    (r,) = cmp.results
    assert r.status == "failed" and "time limit" in r.reason and r.metrics is None


def test_compare_uses_the_graph_embedded_in_the_profile(tmp_path: Path) -> None:
    from hgpart.cli import _register, app

    _register()
    g = tiny_vgg()
    prof = analytic_profile(g, 4)
    prof.graph = g.to_dict()  # "tinyvgg" is no zoo model: only the embedded graph can make this run
    ppath = prof.save(tmp_path / "tinyvgg_b4.json")
    out = tmp_path / "rep"
    res = CliRunner().invoke(app, ["compare", "--model", "tinyvgg", "--profile", str(ppath), "--k", "2",
                                   "--methods", "layerwise,incremental", "--out", str(out), "--no-plots",
                                   "--batch-sizes", "4"])
    assert res.exit_code == 0, res.output
    assert (out / "results.csv").is_file() and not (out / "comm_volume.png").exists()


def test_every_coarse_result_carries_a_proven_bound_and_gap() -> None:
    """The certificate of `hgpart compare`: a bound at the imbalance each result reached, never above its volume."""
    import math

    import numpy as np

    from hgpart.hypergraph import build_hypergraph
    from hgpart.metrics import MIB, km1_bytes
    from hgpart.partitioners.certificate import Certificate

    g = tiny_vgg()
    prof = analytic_profile(g, 4)
    cmp = run_static(g, prof, ks=[2, 4], methods=["layerwise", "horizontal", "incremental", "hypergraph"],
                     grains=["coarse", "fine"], bound_time_limit=20.0, progress=False)
    coarse = [r for r in cmp.results if r.grain == "coarse" and r.status == "ok"]
    assert len(coarse) == 8
    hg = build_hypergraph(g, prof.work(), batch_size=4, grain="coarse")
    rng = np.random.default_rng(0)
    checked = 0
    for r in coarse:
        c = r.certificate
        vol = r.metrics.comm_volume_mib * MIB
        assert isinstance(c, Certificate) and c.status == "ok", (r.label, c)
        assert 0.0 <= c.lower_bound_bytes <= vol + 1e-6
        assert c.epsilon >= max(r.epsilon or 0.0, r.metrics.max_over_avg - 1.0) - 1e-9
        assert c.gap == pytest.approx(vol / c.lower_bound_bytes - 1.0) if c.lower_bound_bytes > 0 else True
        # the bound holds for every placement within that imbalance: random balanced ones included
        cap = (1.0 + c.epsilon) * hg.vertex_weight.sum() / r.k
        for _ in range(200):
            parts = rng.integers(0, r.k, hg.num_vertices)
            if np.bincount(parts, weights=hg.vertex_weight, minlength=r.k).max() <= cap:
                assert km1_bytes(hg, parts, r.k) >= c.lower_bound_bytes - 1e-6
                checked += 1
    assert checked > 100
    # auto proves its coarse K = 2 result optimal on this chain; the naive splits are far from it
    hp2 = cmp.find("hypergraph", "coarse", 2, 0.1)
    assert hp2.certificate is not None and hp2.certificate.gap == pytest.approx(0.0, abs=1e-9)
    hz2 = cmp.find("horizontal", "coarse", 2)
    hz2_gap = hz2.certificate.gap if hz2.certificate is not None else None
    assert hz2_gap is None or hz2_gap > 0.1 or math.isinf(hz2_gap)
    assert all(r.certificate is None for r in cmp.results if r.grain == "fine")
    tables = build_tables(cmp, batch_sizes=[8])
    gaps = next(t for t in tables if t.title.startswith("Coarse grain: gap to the proven optimum"))
    row = next(row for row in gaps.rows if row[0].startswith("Coarse-grain hypergraph"))
    assert row[1] == "0.0%"
    comm = next(t for t in tables if t.title.startswith("Filter-wise horizontal: communication"))
    assert comm.headers[-2:] == ["lower bound", "gap"] and comm.rows[0][-1] != "-"
