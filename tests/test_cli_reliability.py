"""The compiler's commands under bad options and bad paths: one line, exit 2, before any work; nothing half-written.

Many cases pass ``--model nosuchnet`` on purpose: a command that checks its
options and output paths first names the bad option or path; one that builds
the model first names the unknown model instead, which is the defect.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from hgpart.cli import main
from hgpart.errors import HgpartError
from hgpart.fileio import atomic_write_text, read_json
from hgpart.models import load_graph
from hgpart.placement import decode_parts, load_placement
from hgpart.profile import Profile, analytic_profile


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HGPART_MTKAHYPAR_THREADS", "2")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    code, out, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (argv, code, err)
    for needle in needles:
        assert needle in lines[0], (argv, lines[0])
    assert "unknown zoo model" not in lines[0] and "partitioning into" not in out, (argv, out, err)
    return lines[0]


def _no_tmp(root: Path) -> None:
    assert not list(root.rglob("*.tmp")), list(root.rglob("*.tmp"))


# ----------------------------------------------------------------------------------------------- output paths
def _bad_outputs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (path, words the error must contain); works as root, where permission bits do not stop writes."""
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    folder = tmp_path / "existing_dir"
    folder.mkdir()
    return {"parent is a file": (str(afile / "out.json"), "is a file, not a folder"),
            "existing directory": (str(folder), "is a directory"),
            "read-only folder": ("/proc/hgpart_test_out.json", "not writable")}


def test_check_writable_refuses_without_creating_anything(tmp_path: Path) -> None:
    from hgpart.fileio import check_writable

    for name, (path, words) in _bad_outputs(tmp_path).items():
        with pytest.raises(HgpartError, match=words):
            check_writable(path, what="placement file")
        assert "\n" not in name
    nested = tmp_path / "new" / "deeper" / "p.json"
    assert check_writable(nested) == nested and not (tmp_path / "new").exists()
    with pytest.raises(HgpartError, match="is a file, not a folder"):
        check_writable(tmp_path / "afile.txt", folder=True)
    with pytest.raises(HgpartError, match="File name too long"):
        check_writable(tmp_path / ("x" * 300 + ".json"))
    _no_tmp(tmp_path)


def test_atomic_writers_raise_hgpart_error_not_oserror(tmp_path: Path) -> None:
    (tmp_path / "afile.txt").write_text("x")
    for path in ("/proc/hgpart_test.json", str(tmp_path / "afile.txt" / "x.json"), str(tmp_path)):
        with pytest.raises(HgpartError, match="cannot write"):
            atomic_write_text(path, "{}")
    _no_tmp(tmp_path)
    assert (tmp_path / "afile.txt").read_text() == "x"


@pytest.mark.parametrize("case", ["parent is a file", "existing directory", "read-only folder"])
def test_every_writing_command_checks_its_output_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       case: str) -> None:
    path, words = _bad_outputs(tmp_path)[case]
    model = ["--model", "nosuchnet"]  # built only after the check: the error must be about the path
    commands = [
        ["profile", *model, "--analytic", "--out", path],
        ["partition", *model, "--analytic", "--k", "2", "--out", path],
        ["build", *model, "--analytic", "--out", path],
        ["train", "-p", "missing_placement.json", "--log", path],
    ]
    if case != "existing directory":  # an existing folder is a fine report folder / trace folder
        commands += [["compare", *model, "--analytic", "--k", "2", "--out", path],
                     ["compare-run", *model, "--out", path],
                     ["train", "-p", "missing_placement.json", "--trace", path]]
    for argv in commands:
        _refused(argv, capsys, words)
    _no_tmp(tmp_path)


def test_partition_default_output_path_is_checked_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "partitions").write_text("a file where the default folder should be")
    _refused(["partition", "--model", "minivgg", "--analytic", "--k", "2"], capsys, "partitions", "not a folder")


# ------------------------------------------------------------------------------------------------- options
@pytest.mark.parametrize("argv,words", [
    (["partition", "--k", "0"], "K = 0 must be >= 1"),
    (["partition", "--k", "2", "--epsilon", "10"], "epsilon = 10.0"),
    (["partition", "--k", "2", "--epsilon", "nan"], "epsilon = nan"),
    (["partition", "--k", "2", "--backend", "metis"], "unknown partitioner backend 'metis'"),
    (["partition", "--k", "2", "--backend", "mtkahypar", "--preset", "fastest"], "unknown Mt-KaHyPar preset"),
    (["partition", "--k", "2", "--backend", "kahypar", "--preset", "nosuch.ini"], "unknown KaHyPar preset"),
    (["partition", "--k", "2", "--backend", "layerwise", "--preset", "quality"], "takes no preset"),
    (["partition", "--k", "2", "--group", "0"], "--group"),
    (["partition", "--k", "2", "--channel-group", "-1"], "--channel-group"),
    (["partition", "--k", "2", "--threads", "0"], "--threads"),
    (["partition", "--k", "2", "--time-limit", "-5"], "--time-limit"),
    (["partition", "--k", "2", "--time-limit", "0"], "--time-limit"),
    (["partition", "--k", "2", "--bound-time-limit", "0"], "--bound-time-limit"),
    (["partition", "--k", "2", "--grain", "medium"], "unknown grain"),
    (["build", "--k", "1"], "--k 1 must be >= 2"),
    (["build", "--group", "0"], "--group"),
    (["compare", "--k", "2,0"], "--k"),
    (["compare", "--k", "2", "--epsilon", "0.1,12"], "epsilon = 12.0"),
    (["compare", "--k", "2", "--methods", "layerwise,random"], "unknown method"),
    (["compare", "--k", "2", "--backend", "layerwise"], "unknown partitioner backend 'layerwise'"),
    (["compare", "--k", "2", "--time-limit", "-1"], "--time-limit"),
    (["compare", "--k", "2", "--budget", "0"], "--budget"),
    (["compare", "--k", "2", "--bound-time-limit", "-2"], "--bound-time-limit"),
])
def test_options_are_checked_before_the_model_is_built(argv: list[str], words: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _refused([argv[0], "--model", "nosuchnet", "--analytic", *argv[1:]], capsys, words)


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["metrics", "x.json", "--bogus"], ["partition", "--model", "minivgg"], ["nosuchcommand"],
                 ["partition", "--model", "minivgg", "--k", "two"]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), (argv, err)


# ----------------------------------------------------------------------------------------- method, K = 1, metrics
@pytest.mark.parametrize("backend", ["layerwise", "horizontal", "incremental"])
def test_partition_records_the_method_its_backend_used(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       backend: str) -> None:
    code, out, err = _run(["partition", "--model", "lenet5", "--analytic", "--k", "2", "--backend", backend,
                           "--no-bound"], capsys)
    assert code == 0, err
    tag = "layerwise" if backend == "layerwise" else f"coarse_{backend}"
    path = tmp_path / "partitions" / f"lenet5_{tag}_k2.json"
    assert load_placement(path).method == backend
    code, out, err = _run(["metrics", str(path)], capsys)
    assert code == 0 and f"method {backend}" in out and "hypergraph" not in out, out


def test_k1_prints_a_sensible_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["partition", "--model", "lenet5", "--analytic", "--k", "1", "--out", "k1.json"], capsys)
    assert code == 0, err
    assert "preset )" not in out and "nan" not in out and "partitioning into" not in out
    assert "K = 1: every vertex on part 0" in out
    pl = load_placement(tmp_path / "k1.json")
    assert pl.k == 1 and pl.provenance["lower_bound"]["status"] == "not computed"


def test_metrics_on_a_directory_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["metrics", str(tmp_path)], capsys, "is a directory")
    assert "does not exist" not in line
    with pytest.raises(HgpartError, match="File name too long"):
        read_json(tmp_path / ("y" * 300))


# ------------------------------------------------------------------------- readers: cases found by the fuzzer
def test_part_arrays_cannot_exhaust_memory() -> None:
    with pytest.raises(HgpartError, match="run lengths add up to 99999999999999999, expected 3"):
        decode_parts("0*99999999999999999", n=3, where="x")
    with pytest.raises(HgpartError, match="cannot decode part array"):
        decode_parts([10**30], n=1, where="x")
    bomb = {"n": 3, "b64z": base64.b64encode(zlib.compress(b"\0" * 10**7)).decode()}
    with pytest.raises(HgpartError, match="more than 3 entries"):
        decode_parts(bomb, n=3, where="x")
    np.testing.assert_array_equal(decode_parts("1*2 0*1", n=3, where="x"), [1, 1, 0])


def _lenet5_placement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, _, err = _run(["partition", "--model", "lenet5", "--analytic", "--k", "2", "--backend", "layerwise",
                         "--no-bound", "--out", "good.json"], capsys)
    assert code == 0, err
    return json.loads((tmp_path / "good.json").read_text())


def test_metrics_survives_odd_recorded_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _lenet5_placement(tmp_path, capsys)
    doc["metrics"]["comm_volume_mib"] = "abc"  # type: ignore[index]
    (tmp_path / "odd.json").write_text(json.dumps(doc))
    code, out, err = _run(["metrics", "odd.json"], capsys)
    assert code == 0 and "is not a number" in out, err
    doc["layers"][1]["work"] = float("nan")  # type: ignore[index]
    (tmp_path / "nan.json").write_text(json.dumps(doc))
    _refused(["metrics", "nan.json"], capsys, "not a finite number")


def test_profile_values_are_checked_when_read(tmp_path: Path) -> None:
    good = analytic_profile(load_graph("lenet5"), 8).to_dict()
    bad_values = [("flops", "244608ü"), ("flops", [1]), ("forward_ms", float("nan")), ("params", -1),
                  ("backward_ms", True), ("name", {"a": 1})]
    for key, value in bad_values:
        d = json.loads(json.dumps(good))
        d["layers"][1][key] = value
        with pytest.raises(HgpartError, match="malformed profile"):
            Profile.from_dict(d)
    d = json.loads(json.dumps(good))
    d["layers"][1]["name"] = "renamed"
    prof = Profile.from_dict(d)
    with pytest.raises(HgpartError, match="profile layers differ"):
        prof.check(load_graph("lenet5"))


def test_no_partial_file_after_a_failed_write(tmp_path: Path) -> None:
    target = tmp_path / "keep.json"
    target.write_text('{"old": true}')
    os.chmod(tmp_path, 0o755)
    with pytest.raises(HgpartError):
        atomic_write_text(tmp_path / "keep.json" / "child.json", "{}")
    assert json.loads(target.read_text()) == {"old": True}
    _no_tmp(tmp_path)


def test_cluster_spec_port_must_be_ascii_digits() -> None:
    from hgpart.runtime.cluster import parse_cluster_spec

    for port in ("²", "1²", "٣٣"):  # str.isdigit() accepts them; int() refuses the first two
        with pytest.raises(HgpartError, match="is not host:port"):
            parse_cluster_spec(json.dumps({"worker": [f"127.0.0.1:{port}"]}), "spec.json")


def test_huge_inputs_are_refused_not_allocated(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["info", "--model", "lenet5", "--input", "65537"], capsys, "has a side above 8192")
    # the API takes any shape; far beyond memory (a 2 TB dense layer) the allocator refuses at once: one clear error
    with pytest.raises(HgpartError, match="not enough memory to build model 'lenet5'"):
        load_graph("lenet5", input_shape=(65536, 65536, 1))
