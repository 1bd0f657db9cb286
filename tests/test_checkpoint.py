"""Partitioned checkpoints on logical devices, in this process: resume equals an uninterrupted run, re-sharding
onto another placement, refused checkpoints and options.

A run "interrupted" here is one that stopped after its checkpoint (``--steps 4``) and is resumed to the full
length; the kill-based cases (a dead worker, a process killed mid-write) are in ``test_checkpoint_kill.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hgpart.runtime.checkpoint import (
    Checkpointer,
    CheckpointSettings,
    ResumeKey,
    list_checkpoints,
    newest_checkpoint,
    read_keras_layout,
)
from hgpart.runtime.devices import open_devices

from hgpart.errors import HgpartError

DS = open_devices("logical", 4, inter_op=4)  # the session's devices (conftest opened them first)

import keras  # noqa: E402
from hgpart.runtime.partitioned import PlacedModel  # noqa: E402
from hgpart.runtime.step import OptimizerSpec, TrainStep  # noqa: E402
from hgpart.runtime.train import train  # noqa: E402

from hgpart.hypergraph import build_hypergraph  # noqa: E402
from hgpart.models import load_graph, load_keras_model  # noqa: E402
from hgpart.partitioners import partition  # noqa: E402
from hgpart.placement import Placement  # noqa: E402
from hgpart.profile import analytic_profile  # noqa: E402

B = 8
SHAPE = (16, 16, 3)


def compile_minivgg(grain: str, k: int) -> Placement:
    graph = load_graph("minivgg", SHAPE, 10)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain=grain)
    res = partition(hg, k=k, backend="mtkahypar", epsilon=0.05, seed=0)
    return Placement.from_vertex_parts(graph, hg, res.parts, k=k, method="hypergraph", work=prof.work())


@pytest.fixture(scope="module")
def coarse2() -> Placement:
    return compile_minivgg("coarse", 2)


@pytest.fixture(scope="module")
def fine3() -> Placement:
    return compile_minivgg("fine", 3)


def sync(pl: Placement, steps: int, folder: Path, **kw: object) -> list[float]:
    res = train(pl, device_set=DS, steps=steps, batch_size=B, mode="sync", inflight=2, dataset="synthetic",
                checkpoint_dir=folder, **kw)  # type: ignore[arg-type]
    return res.losses


def state(folder: Path, pl: Placement, step: int) -> dict[tuple[str, str, int], np.ndarray]:
    return read_keras_layout(folder / f"ckpt-{step}", pl.graph)


def max_diff(a: dict[tuple[str, str, int], np.ndarray], b: dict[tuple[str, str, int], np.ndarray]) -> float:
    assert a.keys() == b.keys()
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


# ------------------------------------------------------------------------------------------------ resume
def test_sync_resume_equals_uninterrupted_run(coarse2: Placement, tmp_path: Path) -> None:
    """Weights and optimizer slots after 4 + 4 resumed steps equal 8 uninterrupted steps (1e-6)."""
    full, part = tmp_path / "full", tmp_path / "part"
    losses = sync(coarse2, 8, full)  # one pass over steps 0..7, saved at the end only
    first = sync(coarse2, 4, part, checkpoint_every=4)
    rest = sync(coarse2, 8, part, checkpoint_every=4, resume=True)
    assert len(first) == 4 and len(rest) == 4  # the resumed run ran steps 4..7 only
    assert [c[1].step for c in list_checkpoints(full)] == [8]
    assert [c[1].step for c in list_checkpoints(part)] == [8, 4]
    assert max_diff(state(full, coarse2, 8), state(part, coarse2, 8)) <= 1e-6
    np.testing.assert_allclose(first + rest, losses, rtol=0, atol=1e-6)
    man = newest_checkpoint(part)[1]  # type: ignore[index]
    assert (man.data_position, man.batch_size, man.seed, man.optimizer) == (8, B, 0, "adam")
    assert man.epoch == pytest.approx(8 * B / 512)


def test_only_the_newest_two_are_kept(coarse2: Placement, tmp_path: Path) -> None:
    sync(coarse2, 5, tmp_path, checkpoint_every=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-4", "ckpt-5"]


def test_resume_under_another_placement_first_loss(coarse2: Placement, fine3: Placement, tmp_path: Path) -> None:
    """Coarse K=2 checkpoint resumed on fine K=3: the first loss equals the coarse run's own next loss (1e-5)."""
    base = tmp_path / "base"
    sync(coarse2, 3, base, checkpoint_every=3)
    same, other = tmp_path / "same", tmp_path / "other"
    shutil.copytree(base, same)
    shutil.copytree(base, other)
    want = sync(coarse2, 5, same, resume=True)
    got = sync(fine3, 5, other, resume=True)
    assert len(want) == len(got) == 2
    assert abs(got[0] - want[0]) <= 1e-5, (got, want)
    # the re-sharded slots kept training on course: the two continuations stay together
    assert max_diff(state(same, coarse2, 5), state(other, fine3, 5)) <= 1e-4
    assert newest_checkpoint(other)[1].placement["grain"] == "fine"  # type: ignore[index]


def _model_state(pl: Placement, keras_model: object) -> tuple[PlacedModel, TrainStep]:
    pm = PlacedModel(pl, keras_model, DS.devices)
    return pm, TrainStep(pm, OptimizerSpec("adam", 1e-2), batch_size=B, micro_batches=1)


def test_reshard_moves_every_weight_and_slot_exactly(coarse2: Placement, fine3: Placement, tmp_path: Path) -> None:
    """Save coarse K=2 after two steps, restore into a fine K=3 model built from *other* initial weights:
    every Keras-layout weight, slot and Adam counter equals the saved one exactly."""
    keras.utils.set_random_seed(0)
    pm, step = _model_state(coarse2, load_keras_model("minivgg", input_shape=SHAPE, num_classes=10))
    rng = np.random.default_rng(3)
    for _ in range(2):
        step(rng.normal(size=(B, *SHAPE)).astype(np.float32), rng.integers(0, 10, B).astype(np.int32))
    key = ResumeKey(seed=0, batch_size=B, optimizer="adam", samples=64)
    saved = Checkpointer(CheckpointSettings(tmp_path / "a", every=1), pm, step, DS, key=key).save(2)
    keras.utils.set_random_seed(1)
    pm3, step3 = _model_state(fine3, load_keras_model("minivgg", input_shape=SHAPE, num_classes=10))
    keeper = Checkpointer(CheckpointSettings(tmp_path / "a", every=1, resume=True), pm3, step3, DS, key=key)
    assert keeper.restore() == 2
    again = Checkpointer(CheckpointSettings(tmp_path / "b", every=1), pm3, step3, DS, key=key).save(2)
    a, b = read_keras_layout(saved, coarse2.graph), read_keras_layout(again, fine3.graph)
    assert max_diff(a, b) == 0.0
    assert {k[2] for k in a} == {-1, 0, 1}  # weights and both Adam moments
    assert {float(c.numpy()) for c in step3.counters.values()} == {2.0}
    # and the fine model's weights are the coarse model's (its own scatter path)
    for layer, ws in pm.keras_weights().items():
        for name, w in ws.items():
            np.testing.assert_array_equal(pm3.keras_weights()[layer][name], w)


# ------------------------------------------------------------------------------------------------ refusals
def test_options_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(HgpartError, match="needs a checkpoint folder"):
        CheckpointSettings.make(None, every=5)
    with pytest.raises(HgpartError, match="needs a checkpoint folder"):
        CheckpointSettings.make(None, resume=True)
    with pytest.raises(HgpartError, match="negative"):
        CheckpointSettings.make(tmp_path, every=-1)
    with pytest.raises(HgpartError, match="no complete checkpoint"):
        CheckpointSettings.make(tmp_path, resume=True)
    (tmp_path / "tmp-4").mkdir()  # a write that was killed: not a checkpoint
    (tmp_path / "ckpt-3").mkdir()  # no manifest: not a checkpoint
    with pytest.raises(HgpartError, match="no complete checkpoint"):
        CheckpointSettings.make(tmp_path, resume=True)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(HgpartError, match="is a file"):
        CheckpointSettings.make(afile, every=1)


def test_resume_with_another_batch_size_or_past_the_end_is_refused(coarse2: Placement, tmp_path: Path) -> None:
    sync(coarse2, 2, tmp_path, checkpoint_every=2)
    with pytest.raises(HgpartError, match="batch size 8, this run uses 4"):
        train(coarse2, device_set=DS, steps=4, batch_size=4, mode="sync", inflight=2, checkpoint_dir=tmp_path,
              resume=True)
    with pytest.raises(HgpartError, match="not before the run's last step 2"):
        sync(coarse2, 2, tmp_path, resume=True)


def test_resume_with_a_placement_of_another_model_is_refused(coarse2: Placement, tmp_path: Path) -> None:
    sync(coarse2, 1, tmp_path)
    graph = load_graph("minivgg", (16, 16, 3), 7)
    prof = analytic_profile(graph, B)
    hg = build_hypergraph(graph, prof.work(), batch_size=B, grain="coarse")
    other = Placement.from_vertex_parts(graph, hg, np.zeros(hg.num_vertices, np.int64) + np.arange(
        hg.num_vertices) % 2, k=2, method="hypergraph", work=prof.work())
    with pytest.raises(HgpartError, match="resume with a placement of the checkpoint's model"):
        train(other, device_set=DS, steps=3, batch_size=B, mode="sync", inflight=2, checkpoint_dir=tmp_path,
              resume=True)


def test_async_checkpoint_holds_every_finished_update_and_resumes(coarse2: Placement, tmp_path: Path) -> None:
    """Async: the pipeline drains before each save, so every device's Adam counter is exactly ``step``
    updates (the warm-up makes none); a resumed async run trains the remaining steps from there."""
    res = train(coarse2, device_set=DS, steps=6, batch_size=B, mode="async", inflight=2, checkpoint_dir=tmp_path,
                checkpoint_every=3)
    assert sorted(r.step for r in res.rows) == list(range(6))
    for path, man in list_checkpoints(tmp_path):
        assert set(man.counters.values()) == {float(man.step)}, (path, man.counters)
    more = train(coarse2, device_set=DS, steps=9, batch_size=B, mode="async", inflight=2, checkpoint_dir=tmp_path,
                 checkpoint_every=3, resume=True)
    assert sorted(r.step for r in more.rows) == [6, 7, 8] and np.isfinite(more.losses).all()
    assert set(newest_checkpoint(tmp_path)[1].counters.values()) == {9.0}  # type: ignore[index]


@pytest.mark.parametrize("args,needle", [
    (["--checkpoint-every", "5"], "--checkpoint-every needs a checkpoint folder"),
    (["--resume"], "--resume needs a checkpoint folder"),
    (["--checkpoint-dir", "{tmp}", "--resume"], "no complete checkpoint to resume from"),
    (["--checkpoint-dir", "{tmp}/f/sub"], "is a file, not a folder"),
])
def test_cli_refuses_checkpoint_options_in_one_line(coarse2: Placement, tmp_path: Path, args: list[str],
                                                    needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    from hgpart.cli import main

    (tmp_path / "f").write_text("a file")
    path = coarse2.save(tmp_path / "pl.json")
    with pytest.raises(SystemExit) as exc:
        main(["train", "-p", str(path), "--steps", "2", *[a.format(tmp=tmp_path) for a in args]])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and needle in err[0], err


def test_damaged_newest_checkpoint_is_one_error_naming_it(coarse2: Placement, tmp_path: Path) -> None:
    sync(coarse2, 2, tmp_path, checkpoint_every=1)
    for f in (tmp_path / "ckpt-2").glob("state.data*"):
        f.write_bytes(f.read_bytes()[:100])  # complete manifest, truncated tensors (a disk that lost them)
    with pytest.raises(HgpartError, match=r"ckpt-2 cannot be read .*move .*ckpt-2 away"):
        sync(coarse2, 4, tmp_path, resume=True)
