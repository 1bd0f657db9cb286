"""Profile setup and quality: round trip, old files, --compare, the quality summary, picking a profile by cores.

No timing here: the profiles are made from the analytic one with hand-set layer times, so every expected
figure is derived in the test.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from hgpart.errors import HgpartError
from hgpart.models import load_graph
from hgpart.profile import Profile, ProfileQuality, ProfileSetup, analytic_profile, default_profile_path
from hgpart.profile_compare import compare_profiles, ratios_across, shape_twin_ratio
from hgpart.profile_report import QualitySummary, print_quality
from hgpart.timing import SampleSet, Statistic, t_quantile

ROOT = Path(__file__).resolve().parents[1]


def _measured(work: dict[str, float], *, cores: int = 1, spread: float = 0.01, step_ms: float | None = None,
              batch: int = 32) -> Profile:
    """minivgg with each named layer's work set to ``work[name]`` ms (split 1/3 forward, 2/3 backward)."""
    graph = load_graph("minivgg")
    base = analytic_profile(graph, batch)
    layers = [replace(c, forward_ms=work.get(c.name, 0.0) / 3, backward_ms=work.get(c.name, 0.0) * 2 / 3,
                      spread=spread if c.name in work else None, samples=5 if c.name in work else None)
              for c in base.layers]
    setup = ProfileSetup(cores=cores, pinned=cores == 1, affinity=(0,) if cores == 1 else (), intra_op_threads=cores,
                         inter_op_threads=cores, clock="process_cpu", statistic="low_half", interleaved=True,
                         min_rounds=5, max_rounds=15)
    return replace(base, mode="measured", layers=layers, graph=graph.to_dict(), recorded_setup=setup,
                   quality=ProfileQuality(step_ms=step_ms, step_spread=0.02, rounds=7, seconds=12.5),
                   machine={"usable_cores": 2, "logical_cores": 2}, repeats=5)


WORK = {"block1_conv1": 4.0, "block1_conv2": 10.0, "block2_conv1": 6.0, "block2_conv2": 8.0, "block3_conv1": 5.0,
        "block3_conv2": 5.0, "fc1": 2.0}


def test_round_trip_keeps_setup_quality_and_spreads(tmp_path: Path) -> None:
    prof = _measured(WORK, step_ms=42.0)
    prof.layers[1] = replace(prof.layers[1], spread=0.0731)
    loaded = Profile.load(prof.save(tmp_path / "p.json"))
    assert loaded.recorded_setup == prof.recorded_setup and loaded.setup.cores == 1 and loaded.setup.pinned
    assert loaded.setup.affinity == (0,) and loaded.setup.clock == "process_cpu"
    assert loaded.quality == prof.quality
    assert [c.spread for c in loaded.layers] == [c.spread for c in prof.layers]
    assert loaded.layers[1].spread == 0.0731 and loaded.layers[1].samples == 5
    assert loaded.work() == pytest.approx(prof.work())
    # a layer without a spread writes no key, as files before spreads were recorded
    raw = json.loads((tmp_path / "p.json").read_text())
    assert "spread" not in raw["layers"][0] and raw["setup"]["cores"] == 1


@pytest.mark.parametrize("field", ["setup", "quality"])
def test_malformed_setup_or_quality_is_a_one_line_error(tmp_path: Path, field: str) -> None:
    raw = _measured(WORK, step_ms=42.0).to_dict()
    for bad in ([1, 2], {"cores": "many"}, "x"):
        if field == "quality" and isinstance(bad, dict):
            bad = {"step_ms": "slow"}
        raw[field] = bad
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(raw))
        with pytest.raises(HgpartError, match="malformed profile"):
            Profile.load(path)


def test_old_profile_files_load_with_the_setup_they_were_made_with() -> None:
    # the committed resnet18 profile of 2026-11-22, written before profiles recorded their setup and quality
    path = ROOT / "tests" / "data" / "resnet18_32_b32_before_setup.json"
    raw = json.loads(path.read_text())
    assert "setup" not in raw and "quality" not in raw and "spread" not in raw["layers"][1]
    prof = Profile.load(path)
    assert prof.recorded_setup is None and prof.quality is None
    # made unpinned on every core of the machine, median of wall-clock repeats, one layer after another
    assert prof.setup == ProfileSetup(cores=raw["machine"]["usable_cores"], min_rounds=raw["repeats"],
                                      max_rounds=raw["repeats"])
    assert prof.setup.clock == "wall" and prof.setup.statistic == "median" and not prof.setup.interleaved
    # written back, it stays an old-style file (no setup invented)
    assert "setup" not in prof.to_dict()


def test_compare_ratios_median_worst_and_layers_over_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    other = dict(WORK, block1_conv2=12.0, fc1=1.0)  # 12/10 = 1.2 and 2/1 = 2.0; every other layer 1.0
    cmp = compare_profiles(_measured(WORK), _measured(other))
    assert len(cmp.rows) == 7 and cmp.median == pytest.approx(1.0)
    assert cmp.worst is not None and cmp.worst.name == "fc1" and cmp.worst.ratio == pytest.approx(2.0)
    assert [r.name for r in cmp.over(1.10)] == ["block1_conv2", "fc1"]
    # fc1 is 2/40 = 5 % of the first profile's sum but 1/41 < 3 % of the second: kept at 4 %, dropped at 6 %
    assert "fc1" in [r.name for r in compare_profiles(_measured(WORK), _measured(other), min_share=0.04).rows]
    assert "fc1" not in [r.name for r in compare_profiles(_measured(WORK), _measured(other), min_share=0.06).rows]

    from hgpart.cli import main

    a, b = _measured(WORK).save(tmp_path / "a.json"), _measured(other).save(tmp_path / "b.json")
    with pytest.raises(SystemExit) as exc:
        main(["profile", "--compare", str(a), str(b), "--min-share", "0"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "7 layers: median max/min 1.000, worst 2.000 (fc1), 2 over 1.10: block1_conv2, fc1" in " ".join(out.split())
    assert "scale-free (each profile over its sum of layers)" in out
    c = _measured(WORK, batch=8).save(tmp_path / "c.json")
    with pytest.raises(SystemExit) as exc:
        main(["profile", "--compare", str(a), str(c)])
    assert exc.value.code == 2 and "batch sizes 32 and 8" in capsys.readouterr().err


def test_scale_free_comparison_ignores_a_uniformly_slower_run() -> None:
    slower = {k: 1.2 * v for k, v in WORK.items()}  # every layer 20 % slower: the relative weights are the same
    assert compare_profiles(_measured(WORK), _measured(slower)).median == pytest.approx(1.2)
    free = compare_profiles(_measured(WORK), _measured(slower), scale_free=True)
    assert free.median == pytest.approx(1.0) and free.worst is not None and free.worst.ratio == pytest.approx(1.0)
    # across three runs each layer's worst pair counts: block1_conv2 is 10, 12 and 9 ms -> 12/9
    runs = [_measured(WORK), _measured(dict(WORK, block1_conv2=12.0)), _measured(dict(WORK, block1_conv2=9.0))]
    across = ratios_across(runs)
    assert across["block1_conv2"] == pytest.approx(12 / 9) and across["fc1"] == pytest.approx(1.0)


def test_quality_summary_counts_layers_over_target_twins_and_step_ratio() -> None:
    prof = _measured(WORK, step_ms=50.0)
    prof.layers[2] = replace(prof.layers[2], spread=0.08)  # block1_conv2
    idx = {c.name: i for i, c in enumerate(prof.layers)}
    prof.layers[idx["fc1"]] = replace(prof.layers[idx["fc1"]], spread=0.12)
    q = QualitySummary.of(prof, min_share=0.0)
    assert q.timed == 7 and sorted(q.above_target) == ["block1_conv2", "fc1"]
    # fc1 is 2 of the 40 ms: 5 % of the sum of layers
    assert sorted(QualitySummary.of(prof, min_share=0.06).above_target_significant) == ["block1_conv2"]
    assert q.worst_layer == "fc1" and q.worst_spread == pytest.approx(0.12)
    assert q.step_ratio == pytest.approx(40.0 / 50.0)
    console = Console(record=True, width=200)
    print_quality(prof, console=console, min_share=0.0)
    text = console.export_text()
    assert "2 of 7 timed layers above the 5% target after 7 rounds (2 of them >= 0% of the step); worst fc1 +-12.0%" \
        in text
    assert "sum of layers 40.0 ms / whole training step 50.0 ms = 0.800 (NOT within 15%)" in text
    assert "1 core(s) pinned to cores 0" in text and "low_half process_cpu time" in text


def test_shape_twins_are_layers_of_identical_shape_and_flops() -> None:
    graph = load_graph("minivgg")
    twins = [x.name for x in graph.layers if x.kind == "conv2d"]
    keys = {(graph.layer(n).input_shapes, graph.layer(n).output_shape, graph.layer(n).flops) for n in twins}
    assert len(keys) == len(twins)  # minivgg has no two convolutions of one shape: no twin ratio
    assert shape_twin_ratio(_measured(WORK)) == (1.0, None)
    from hgpart.profile import Profile as P

    r18 = P.load(ROOT / "profiles" / "resnet18_32_b32.json")
    work = r18.work()
    ratio, pair = shape_twin_ratio(r18)
    assert pair is not None and ratio == pytest.approx(work[pair[0]] / work[pair[1]]) and ratio > 1.0


def _profiles_folder(tmp: Path) -> tuple[Path, Path]:
    graph = load_graph("minivgg")
    plain = _measured(WORK, cores=2).save(default_profile_path(graph, 32, folder=tmp / "profiles"))
    one = _measured(WORK, cores=1).save(default_profile_path(graph, 32, folder=tmp / "profiles", cores=1))
    assert one.name == "minivgg_32_b32_c1.json"
    return plain, one


def test_partition_picks_the_profile_for_its_core_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hgpart.commands.partition_cmds import load_inputs

    monkeypatch.chdir(tmp_path)
    plain, one = _profiles_folder(tmp_path)
    assert load_inputs("minivgg", None, None, None, False, None)[2] == Path("profiles") / plain.name
    assert load_inputs("minivgg", None, None, None, False, None, cores=1)[2] == Path("profiles") / one.name
    # no _c2 file: the unpinned default is taken, as it was made on 2 cores
    _, prof, path = load_inputs("minivgg", None, None, None, False, None, cores=2)
    assert path == Path("profiles") / plain.name and prof.setup.cores == 2
    with pytest.raises(HgpartError, match=r"made for 2 core\(s\), not 3"):
        load_inputs("minivgg", None, None, None, False, None, cores=3)
    with pytest.raises(HgpartError, match=r"made for 1 core\(s\), not 2"):
        load_inputs("minivgg", None, None, one, False, None, cores=2)
    with pytest.raises(HgpartError, match="--analytic and --cores"):
        load_inputs("minivgg", None, None, None, True, None, cores=1)


def test_partition_cli_refuses_a_profile_for_another_core_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hgpart.cli import main

    monkeypatch.chdir(tmp_path)
    _profiles_folder(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["partition", "--model", "minivgg", "--k", "2", "--cores", "4"])
    out = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(out.splitlines()) == 1 and "made for 2 core(s), not 4" in out


def test_low_half_leaves_delayed_samples_out() -> None:
    # four undisturbed samples near 10 ms, four delayed by other processes
    s = SampleSet([0.0101, 0.0250, 0.0100, 0.0099, 0.0400, 0.0100, 0.0180, 0.0300])
    assert s.estimate(Statistic.MIN) == 0.0099
    assert s.estimate(Statistic.LOW_HALF) == pytest.approx(0.0100)
    assert s.estimate(Statistic.MEDIAN) == pytest.approx((0.0101 + 0.018) / 2)
    kept = [0.0099, 0.0100, 0.0100, 0.0101]
    sd = math.sqrt(sum((v - 0.01) ** 2 for v in kept) / 3)
    assert s.rel_ci(Statistic.LOW_HALF) == pytest.approx(t_quantile(3) * sd / 2 / 0.01)
    assert s.rel_ci(Statistic.LOW_HALF) < 0.05 < s.rel_ci(Statistic.MEDIAN)
    assert SampleSet([0.01]).rel_ci(Statistic.LOW_HALF) == math.inf
    assert t_quantile(3) == 3.182 and t_quantile(100) == 1.96


def test_bad_cores_and_options_are_one_line_errors() -> None:
    from hgpart.profiler import MAX_ROUNDS_PER_REPEAT, options_from, pin_cores

    with pytest.raises(HgpartError, match="cannot pin to 0 core"):
        pin_cores(0)
    with pytest.raises(HgpartError, match="cannot pin to 999 core"):
        pin_cores(999)
    with pytest.raises(HgpartError, match="unknown value 'cpu'.*--clock"):
        options_from(repeats=3, max_rounds=None, warmup=1, clock="cpu", statistic="min", target=0.05)
    opts = options_from(repeats=3, max_rounds=None, warmup=1, clock="wall", statistic="min", target=0.05)
    assert (opts.min_rounds, opts.max_rounds) == (3, 3 * MAX_ROUNDS_PER_REPEAT) == (3, 27)
    with pytest.raises(HgpartError, match="repeats"):
        options_from(repeats=4, max_rounds=2, warmup=1, clock="wall", statistic="min", target=0.05).check()
