"""Placement files end to end: round trip, `hgpart partition` / `build` / `metrics`, errors with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hgtoys import branching_network, toy_network, unit_work

from hgpart.cli import main
from hgpart.hypergraph import build_hypergraph
from hgpart.metrics import partition_metrics
from hgpart.partitioners import partition
from hgpart.placement import Placement, load_placement


@pytest.fixture(autouse=True)
def _threads(monkeypatch):
    monkeypatch.setenv("HGPART_MTKAHYPAR_THREADS", "2")
    monkeypatch.setenv("COLUMNS", "200")  # rich tables on one line per row


def _placement(graph, grain, k, group=1, backend="mtkahypar"):
    work = unit_work(graph)
    hg = build_hypergraph(graph, work, batch_size=4, grain=grain, group=group, work_unit="MFLOP")
    res = partition(hg, k=k, backend=backend, seed=3)
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=k, method="hypergraph", work=work,
                                     provenance={"backend": backend, "seed": 3})
    return hg, res, pl


def _run(argv, capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.parametrize("grain", ["coarse", "fine"])
def test_round_trip_recomputes_the_same_metrics(tmp_path, grain):
    graph = branching_network()
    hg, res, pl = _placement(graph, grain, k=3)
    path = pl.save(tmp_path / "p.json")
    back = load_placement(path)
    np.testing.assert_array_equal(back.vertex_parts(hg), res.parts)
    again = back.recompute_metrics().to_dict()
    assert again.keys() == pl.metrics.keys()
    for key, value in pl.metrics.items():
        assert again[key] == (value if isinstance(value, str) else pytest.approx(value)), key
    assert back.recompute_metrics().comm_volume_mib * 2**20 == pytest.approx(res.objective_bytes)
    assert back.graph.fingerprint() == graph.fingerprint() and back.k == 3 and back.provenance["seed"] == 3


def test_grouped_placement_round_trips_at_full_resolution(tmp_path):
    graph = toy_network()
    ghg, res, pl = _placement(graph, "fine", k=2, group=2)
    back = load_placement(pl.save(tmp_path / "g.json"))
    # the file stores single filters; its metrics (on the ungrouped graph) equal the grouped partition's
    assert back.recompute_metrics().comm_volume_mib == pytest.approx(partition_metrics(ghg, res.parts, 2)
                                                                     .comm_volume_mib)


def _bad_files(tmp_path, good):
    d = json.loads(good.read_text())
    files = {"truncated": good.read_text()[: len(good.read_text()) // 2], "not a placement": '{"format": "x"}\n'}
    # a part id >= K in the first vertex layer's filters
    bad = json.loads(json.dumps(d))
    layer = next(ld for ld in bad["layers"] if "filters" in ld.get("parts", {}))
    n = layer["output_shape"][-1]
    layer["parts"]["filters"] = f"{d['k']}*1 0*{n - 1}"
    files["part id >= K"] = json.dumps(bad)
    # layers of one model under the header of another
    other = json.loads(json.dumps(d))
    other["model"]["fingerprint"] = "0123456789abcdef"
    files["another model"] = json.dumps(other)
    out = {}
    for name, text in files.items():
        p = tmp_path / (name.replace(" ", "_").replace(">=", "ge") + ".json")
        p.write_text(text)
        out[name] = p
    return out


def test_metrics_command_prints_and_refuses_bad_files(tmp_path, capsys):
    _, _, pl = _placement(toy_network(), "coarse", k=2)
    good = pl.save(tmp_path / "good.json")
    code, out, err = _run(["metrics", str(good)], capsys)
    assert code == 0 and "Comm. Vol" in out and "Max/Avg" in out and "K = 2" in out
    expected = {"truncated": "not valid JSON", "not a placement": "not an hgpart placement",
                "part id >= K": "part id 2, outside 0..1", "another model": "fingerprint"}
    for name, path in _bad_files(tmp_path, good).items():
        code, out, err = _run(["metrics", str(path)], capsys)
        assert code == 2, name
        lines = err.strip().splitlines()
        assert len(lines) == 1 and expected[name] in lines[0] and "Traceback" not in err, (name, err)


def test_metrics_command_needs_no_tensorflow(tmp_path):
    import subprocess
    import sys

    _, _, pl = _placement(toy_network(), "coarse", k=2)
    good = pl.save(tmp_path / "good.json")
    code = ("import sys; from hgpart.cli import main\n"
            "try:\n    main(['metrics', sys.argv[1]])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code, str(good)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]


def test_partition_command_end_to_end_on_a_branching_zoo_model(tmp_path, capsys, monkeypatch):
    """resnet18 at 32x32 (Add skip connections): build, partition, placement file, metrics, model check."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["partition", "--model", "resnet18", "--input", "32", "--grain", "coarse", "--k", "2",
                           "--seed", "5"], capsys)
    assert code == 2 and "no profile" in err and "hgpart profile" in err and "--analytic" in err
    code, out, err = _run(["partition", "--model", "resnet18", "--input", "32", "--analytic", "--grain", "coarse",
                           "--k", "2", "--seed", "5", "--group", "2", "--backend", "mtkahypar"], capsys)
    assert code == 0, err
    path = tmp_path / "partitions" / "resnet18_coarse_k2.json"
    pl = load_placement(path)
    prov = pl.provenance
    assert prov["backend"] == "mtkahypar" and prov["seed"] == 5 and prov["group"] == 2 and prov["epsilon"] == 0.1
    assert prov["profile"]["mode"] == "analytic" and prov["tool_versions"]["mtkahypar"]
    assert prov["backend_objective_bytes"] == pytest.approx(prov["km1_bytes"])
    cert = prov["lower_bound"]  # the proven bound of the coarse certificate never exceeds the placement's volume
    assert cert["status"] == "ok" and 0 <= cert["lower_bound_bytes"] <= prov["km1_bytes"] + 1e-6
    assert "lower bound" in out
    assert any(layer.kind == "add" for layer in pl.graph.layers)
    m = pl.recompute_metrics()
    # grouped partition, expanded to single filters: same communication as the backend optimised
    assert m.comm_volume_mib * 2**20 == pytest.approx(prov["km1_bytes"])
    assert m.max_over_avg <= 1.1 + 1e-6
    code, out, err = _run(["metrics", str(path), "--model", "resnet18", "--input", "32"], capsys)
    assert code == 0 and "Comm. Vol" in out
    code, out, err = _run(["metrics", str(path), "--model", "resnet18", "--input", "64"], capsys)
    assert code == 2 and "placement is for model" in err and len(err.strip().splitlines()) == 1


def test_build_command_writes_both_formats(tmp_path, capsys):
    for fmt, suffix in (("hmetis", "hgr"), ("patoh", "patoh")):
        out_file = tmp_path / f"mv.{suffix}"
        code, out, err = _run(["build", "--model", "minivgg", "--input", "32", "--analytic", "--grain", "fine",
                               "--format", fmt, "--out", str(out_file)], capsys)
        assert code == 0, err
        head = out_file.read_text().splitlines()[0].split()
        assert f"wrote {out_file}" in out.replace("\n", "")
        if fmt == "hmetis":
            nets, vertices = int(head[0]), int(head[1])
        else:
            vertices, nets = int(head[1]), int(head[2])
        assert f"vertices {vertices:,}" in out and f"nets {nets:,}" in out


def test_partition_refuses_a_profile_for_another_model(tmp_path, capsys):
    from hgpart.models import load_graph
    from hgpart.profile import analytic_profile

    prof = tmp_path / "minivgg_32_b8.json"
    analytic_profile(load_graph("minivgg", input_shape=(32, 32, 3)), 8).save(prof)
    code, out, err = _run(["partition", "--model", "minivgg", "--input", "64", "--profile", str(prof), "--k", "2",
                           "--out", str(tmp_path / "p.json")], capsys)
    assert code == 2 and "profile is for model 'minivgg'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()
    code, out, err = _run(["partition", "--model", "minivgg", "--input", "32", "--profile", str(prof), "--k", "2",
                           "--backend", "kahypar", "--out", str(tmp_path / "p.json")], capsys)
    assert code == 0, err
    pl = load_placement(tmp_path / "p.json")
    assert pl.batch_size == 8 and pl.provenance["preset"] == "km1" and len(pl.provenance["profile"]["sha256"]) == 16


def test_partition_defaults_to_auto_with_an_optimality_certificate(tmp_path, capsys, monkeypatch):
    """The default backend is auto; on a small VGG-like chain its exact program closes the gap."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["partition", "--model", "minivgg", "--input", "16", "--analytic", "--k", "2"], capsys)
    assert code == 0, err
    prov = load_placement(tmp_path / "partitions" / "minivgg_coarse_k2.json").provenance
    assert prov["backend"] == "auto"
    cert = prov["lower_bound"]
    assert cert["status"] == "ok"
    assert cert["lower_bound_bytes"] == pytest.approx(prov["km1_bytes"], rel=1e-6)
    assert "within 0.0% of the optimum" in out
    code, out, err = _run(["partition", "--model", "minivgg", "--input", "16", "--analytic", "--k", "2",
                           "--grain", "fine", "--no-bound"], capsys)
    assert code == 0, err
    assert "lower bound: not computed" in out
