"""Every command that writes refuses an unwritable output, and every run refuses a bad number, before any work.

Each case runs a command that would otherwise do real work (measure a profile, partition, train a real
placement, compare) with one bad output path or number, and must end with exit 2 and one line naming the option,
no traceback, within seconds: a check made after the work would cost the run (a measured profile or a trained
model lost to a path that could never be written). Runs in-process, so no case pays TensorFlow's import.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hgpart.runtime.devices import open_devices

from hgpart.cli import main
from hgpart.hypergraph import build_hypergraph
from hgpart.models import ModelSource, load_graph
from hgpart.partitioners import partition
from hgpart.placement import Placement
from hgpart.profile import analytic_profile

open_devices("logical", 2, inter_op=4)  # the session's devices (conftest), should a broken check start training
#: seconds a refusal may take on a loaded machine; the work each case guards takes far longer
SECONDS = 20.0
PLACEMENT = "PLACEMENT"  # replaced by a real, trainable placement file


@pytest.fixture(scope="module")
def placement(tmp_path_factory: pytest.TempPathFactory) -> Path:
    graph = load_graph("lenet5")
    prof = analytic_profile(graph, 8)
    hg = build_hypergraph(graph, prof.work(), batch_size=8, grain="coarse")
    res = partition(hg, k=2, backend="layerwise")
    pl = Placement.from_vertex_parts(graph, hg, res.parts, k=2, method="layerwise", work=prof.work(),
                                     source=ModelSource.from_spec("lenet5", graph))
    return Path(pl.save(tmp_path_factory.mktemp("pl") / "lenet5_k2.json"))


def _bad_paths(tmp: Path) -> dict[str, str]:
    """Kind of bad path -> the path; /proc refuses new files even to root, who ignores permission bits."""
    (tmp / "afile.txt").write_text("x")
    (tmp / "adir").mkdir()
    return {"parent is a file": str(tmp / "afile.txt" / "out.json"), "existing directory": str(tmp / "adir"),
            "read-only folder": "/proc/hgpart_out.json", "file where a folder goes": str(tmp / "afile.txt")}


_FILE_KINDS = ("parent is a file", "existing directory", "read-only folder")
_FOLDER_KINDS = ("parent is a file", "read-only folder", "file where a folder goes")
#: (command words, option taking the path, whether it is a folder); every other word is a valid, working option
_OUTPUTS = [
    (["profile", "--model", "lenet5", "--batch-size", "8"], "--out", False),
    (["partition", "--model", "lenet5", "--analytic", "--k", "2"], "--out", False),
    (["train", "-p", PLACEMENT, "--steps", "2", "--batch-size", "8"], "--log", False),
    (["train", "-p", PLACEMENT, "--steps", "2", "--batch-size", "8"], "--trace", True),
    (["compare", "--model", "lenet5", "--analytic", "--k", "2"], "--out", True),
    (["compare-run", "--model", "lenet5", "--steps", "2"], "--out", True),
    (["quickstart", "--steps", "2"], "--out", True),
]
_CASES = [pytest.param(argv, option, kind, id=f"{argv[0]} {option} {kind}")
          for argv, option, folder in _OUTPUTS for kind in (_FOLDER_KINDS if folder else _FILE_KINDS)]
_NUMBERS = [
    (["train", "-p", PLACEMENT, "--steps", "-1"], "--steps"),
    (["train", "-p", PLACEMENT, "--epochs", "0"], "--epochs"),
    (["train", "-p", PLACEMENT, "--epochs", "-2"], "--epochs"),
    (["train", "-p", PLACEMENT, "--epochs", "nan"], "--epochs"),
    (["train", "-p", PLACEMENT, "--steps", "2", "--init-weights", "missing.weights.h5"], "--init-weights"),
    (["train", "-p", PLACEMENT, "--steps", "2", "--init-weights", "weights.txt"], "--init-weights"),
    (["train", "-p", PLACEMENT, "--steps", "2", "--devices", "gpu"], "GPUs but 0 are visible"),
    (["partition", "--model", "lenet5", "--analytic", "--k", "2", "--time-limit", "0"], "--time-limit"),
    (["partition", "--model", "lenet5", "--analytic", "--k", "2", "--time-limit", "-1"], "--time-limit"),
    (["compare", "--model", "lenet5", "--analytic", "--k", "2", "--time-limit", "0"], "--time-limit"),
    (["compare-run", "--model", "lenet5", "--steps", "-1"], "--steps"),
    (["compare-run", "--model", "lenet5", "--epochs", "0"], "--epochs"),
    (["quickstart", "--steps", "-1"], "--steps"),
    (["quickstart", "--steps", "0"], "--steps"),
]


def _refused_fast(argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> str:
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    seconds = time.perf_counter() - t0
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert exc.value.code == 2 and len(lines) == 1 and "Traceback" not in out.err, (argv, exc.value.code, out.err)
    assert option in lines[0], (argv, lines[0])
    assert seconds < SECONDS, (argv, seconds)
    return lines[0]


@pytest.mark.parametrize("argv,option,kind", _CASES)
def test_unwritable_output_is_refused_before_work(argv: list[str], option: str, kind: str, placement: Path,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    path = _bad_paths(tmp_path)[kind]
    line = _refused_fast([str(placement) if a == PLACEMENT else a for a in argv] + [option, path], option, capsys)
    assert path in line
    assert not list(tmp_path.rglob("*.tmp")) and sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile.txt"]


@pytest.mark.parametrize("argv,option", [pytest.param(a, o, id=" ".join(a[:1] + a[-2:])) for a, o in _NUMBERS])
def test_bad_number_or_weights_file_is_refused_before_work(argv: list[str], option: str, placement: Path,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    _refused_fast([str(placement) if a == PLACEMENT else a for a in argv], option, capsys)
    assert list(tmp_path.iterdir()) == []


def test_check_outputs_covers_save_and_checkpoint_folders(tmp_path: Path) -> None:
    """What ``train --save FILE.keras --checkpoint-dir DIR`` hands :func:`check_outputs`, good and bad."""
    from hgpart.errors import HgpartError
    from hgpart.fileio import check_outputs

    bad = _bad_paths(tmp_path)

    def check(save: str | None = None, ckpt: str | None = None) -> None:
        check_outputs(files={"--save": save}, folders={"--checkpoint-dir": ckpt}, suffixes={"--save": (".keras",)})

    cases = [({"save": str(tmp_path / "model.h5")}, "--save", "does not end with .keras"),
             ({"save": str(tmp_path / "afile.txt" / "m.keras")}, "--save", "is a file, not a folder")]
    (tmp_path / "dir.keras").mkdir()
    cases += [({"save": str(tmp_path / "dir.keras")}, "--save", "is a directory"),
              ({"save": "/proc/m.keras"}, "--save", "not writable"),
              ({"ckpt": bad["file where a folder goes"]}, "--checkpoint-dir", "is a file, not a folder"),
              ({"ckpt": bad["parent is a file"]}, "--checkpoint-dir", "is a file, not a folder"),
              ({"ckpt": "/proc/hgpart_ckpt"}, "--checkpoint-dir", "not writable")]
    for kwargs, option, words in cases:
        with pytest.raises(HgpartError, match=words) as exc:
            check(**kwargs)  # type: ignore[arg-type]
        assert exc.value.where == option and "\n" not in exc.value.line()
    before = sorted(p.name for p in tmp_path.iterdir())
    check(save=str(tmp_path / "new" / "m.keras"), ckpt=bad["existing directory"])  # an existing folder resumes
    check(ckpt=str(tmp_path / "new" / "ckpt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
