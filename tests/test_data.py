"""Training data: batches fixed by (seed, step) so a resumed run sees the same batches, Keras's validation split,
memory-mapped .npz files, image folders loaded as Keras loads them, and one HgpartError for every kind of bad data."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from hgpart.runtime.data import ArrayData, DataKind, DataSpec, ImageFolderData, load_arrays, load_data

from hgpart.errors import BadFileError, HgpartError

SHAPE = (8, 8, 3)


def _arrays(n: int = 50, classes: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, *SHAPE)).astype(np.float32), rng.integers(0, classes, n).astype(np.int32)


def _npz(tmp: Path, name: str = "d.npz", compressed: bool = False, **arrays: np.ndarray) -> Path:
    path = tmp / name
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path


def _folder_data(tmp: Path) -> ImageFolderData:
    """A folder of 3 classes x 20 small images, loaded."""
    for c in range(3):
        for i in range(20):
            _png(tmp / "imgs" / f"c{c}" / f"{i}.png", 20 * c + i)
    data = load_data(tmp / "imgs", input_shape=SHAPE, num_classes=3, seed=1)
    assert isinstance(data, ImageFolderData)
    return data


def _png(path: Path, value: int, size: tuple[int, int] = (6, 10)) -> None:
    import tensorflow as tf

    img = np.full((*size, 3), value, np.uint8)
    img[0, 0] = (value + 50) % 256
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.io.encode_png(img).numpy())


# ---------------------------------------------------------------------------------------- step batches
def test_the_batch_of_a_step_depends_only_on_seed_and_step() -> None:
    x, y = _arrays(50)
    data = ArrayData(x, y, where="x")
    B = 8  # 6 steps per epoch, 2 samples dropped per epoch
    run = data.feed(batch_size=B, seed=3, start_step=0, steps=20)
    full = [run(i) for i in range(20)]
    resumed = data.feed(batch_size=B, seed=3, start_step=13, steps=7)
    for i in range(13, 20):
        rx, ry = resumed(i)
        np.testing.assert_array_equal(rx, full[i][0])
        np.testing.assert_array_equal(ry, full[i][1])
    # one epoch visits 48 distinct samples; the next epoch has another order; another seed another order
    rows = [data.step_rows(i, B, seed=3) for i in range(12)]
    assert len(set(np.concatenate(rows[:6]).tolist())) == 48
    assert not np.array_equal(np.concatenate(rows[:6]), np.concatenate(rows[6:]))
    assert not np.array_equal(rows[0], data.step_rows(0, B, seed=4))
    np.testing.assert_array_equal(full[7][0], x[rows[7]])


def test_the_feed_hands_batches_to_threads_asking_out_of_order() -> None:
    x, y = _arrays(40)
    data = ArrayData(x, y, where="x")
    feed = data.feed(batch_size=4, seed=0, start_step=5, steps=4)
    got = {i: feed(i) for i in (6, 5, 8, 7)}  # threads may ask a little out of order
    for i, (bx, _) in got.items():
        np.testing.assert_array_equal(bx, data.batch(i, 4, seed=0)[0])
    with pytest.raises(KeyError):
        feed(5)  # handed out already


def test_the_feed_reads_ahead_in_its_own_thread_and_names_the_step_that_failed() -> None:
    """``next()`` on a tf.data iterator waits for every call the process has in flight, so the pipeline's threads
    must never call it: the feed's reader thread does, ahead of them."""
    import threading

    from hgpart.runtime.data import StepFeed

    readers: list[str] = []
    ahead = threading.Event()

    def batches():  # noqa: ANN202 - a generator standing in for the tf.data iterator
        for i in range(6):
            readers.append(threading.current_thread().name)
            if i == 2:
                ahead.set()
            if i == 5:
                raise OSError("disk gone")
            yield np.full((2, 1), i, np.float32), np.array([i, i], np.int32)

    feed = StepFeed(batches(), 10, where="--data d", ahead=3)
    assert ahead.wait(10)  # three batches read before anyone asked
    assert [int(feed(i)[1][0]) for i in (10, 11, 12, 13, 14)] == [0, 1, 2, 3, 4]
    assert set(readers) == {"hgpart-feed"}
    with pytest.raises(HgpartError, match="cannot read the batch of step 15: OSError: disk gone"):
        feed(15)
    feed.close()


def test_ready_waits_for_a_batch_without_taking_it_and_raises_the_readers_error() -> None:
    """The compiled pipeline has its first call's batches read before its untimed warm-up (whose calls the
    reader's ``next()`` would otherwise wait behind); the batch stays for the step that takes it."""
    from hgpart.runtime.data import StepFeed

    read: list[int] = []

    def batches():  # noqa: ANN202 - a generator standing in for the tf.data iterator
        for i in range(3):
            read.append(i)
            if i == 2:
                raise OSError("disk gone")
            yield np.full((2, 1), i, np.float32), np.array([i, i], np.int32)

    feed = StepFeed(batches(), 7, where="--data d", ahead=1)
    feed.ready(8)
    assert read[:2] == [0, 1]  # step 8 is the second batch: read before ready returned
    assert [int(feed(i)[1][0]) for i in (7, 8)] == [0, 1]  # and still there
    with pytest.raises(HgpartError, match="cannot read the batch of step 9: OSError: disk gone"):
        feed.ready(9)
    feed.close()


def test_a_grouped_feed_hands_out_the_same_batches_read_several_steps_at_a_time(tmp_path: Path) -> None:
    """The compiled pipeline reads its calls' batches ``group`` steps per ``next()``: the same batch for every step
    as one step at a time, from arrays and from an image folder, the last group short."""
    x, y = _arrays(60)
    for data in (ArrayData(x, y, where="x"), _folder_data(tmp_path)):
        one = data.feed(batch_size=4, seed=3, start_step=5, steps=11)
        four = data.feed(batch_size=4, seed=3, start_step=5, steps=11, group=4)
        for i in range(5, 16):
            a, b = one(i), four(i)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
        with pytest.raises(HgpartError, match="no batch for step 16"):
            four(16)
        one.close()
        four.close()


def test_a_grouped_feed_hands_a_calls_batches_as_one_view_of_its_read() -> None:
    x, y = _arrays(60)
    data = ArrayData(x, y, where="x")
    one = data.feed(batch_size=4, seed=3, start_step=0, steps=9)
    four = data.feed(batch_size=4, seed=3, start_step=0, steps=9, group=4)
    for start, n in ((0, 4), (4, 2), (6, 2), (8, 1)):
        xb, yb = four.block(start, n)
        assert xb.shape == (n, 4, *SHAPE) and yb.shape == (n, 4)
        assert xb.base is not None  # a view of the read of its group, not a copy
        for i in range(n):
            a = one(start + i)
            np.testing.assert_array_equal(xb[i], a[0])
            np.testing.assert_array_equal(yb[i], a[1])
    one.close()
    four.close()


def test_validation_split_keeps_the_last_samples_as_keras_does() -> None:
    x, y = _arrays(50)
    train, val = ArrayData(x, y, where="x").split(0.2)
    assert (len(train), len(val)) == (40, 10)
    np.testing.assert_array_equal(val.read(np.arange(10))[0], x[40:])
    np.testing.assert_array_equal(np.concatenate([b[1] for b in val.eval_batches(3)]), y[40:])
    for bad in (1.0, -0.1):
        with pytest.raises(HgpartError, match="val-split"):
            ArrayData(x, y, where="x").split(bad)
    with pytest.raises(HgpartError, match="fewer than one batch"):
        train.steps_per_epoch(41)


# ----------------------------------------------------------------------------------------------- npz
def test_an_uncompressed_npz_is_memory_mapped_and_a_compressed_one_read(tmp_path: Path) -> None:
    x, y = _arrays(30)
    for compressed, mapped in ((False, True), (True, False)):
        path = _npz(tmp_path, f"d{compressed}.npz", compressed, x=x, y=y)
        lx, ly = load_arrays(path)
        assert isinstance(lx, np.memmap) is mapped
        np.testing.assert_array_equal(lx, x)
        np.testing.assert_array_equal(ly, y)
        data = load_data(path, input_shape=SHAPE, num_classes=5)
        np.testing.assert_array_equal(data.batch(2, 8, seed=1)[0], x[data.step_rows(2, 8, seed=1)])


def test_grayscale_images_without_a_channel_axis_fit_a_one_channel_model(tmp_path: Path) -> None:
    x = np.zeros((10, 8, 8), np.float32)
    path = _npz(tmp_path, x=x, y=np.zeros(10, np.int64))
    assert load_data(path, input_shape=(8, 8, 1), num_classes=2).read(np.arange(2))[0].shape == (2, 8, 8, 1)


@pytest.mark.parametrize(("arrays", "message"), [
    ({"x": np.zeros((10, 8, 8, 1), np.float32), "y": np.zeros(10, np.int32)}, r"shape \[8, 8, 1\] do not fit"),
    ({"x": np.zeros((10, 8, 8, 3), np.float32), "y": np.full(10, 5)}, r"labels range over 5\.\.5 .* 5 classes"),
    ({"x": np.zeros((10, 8, 8, 3), np.float32), "y": np.full(10, -1)}, r"labels range over -1"),
    ({"x": np.zeros((10, 8, 8, 3), np.float32), "y": np.zeros(9, np.int32)}, r"10 images but 9 labels"),
    ({"x": np.zeros((10, 8, 8, 3), np.float32), "y": np.zeros(10, np.float32)}, r"not class indices"),
    ({"x": np.zeros((10, 8, 8, 3), np.float32)}, r"no array y"),
])
def test_bad_arrays_are_one_error_naming_the_cause(tmp_path: Path, arrays: dict, message: str) -> None:
    path = _npz(tmp_path, **arrays)
    with pytest.raises(HgpartError, match=message) as info:
        load_data(path, input_shape=SHAPE, num_classes=5)
    assert "\n" not in info.value.line()


def test_a_missing_or_broken_file_is_a_bad_file_error(tmp_path: Path) -> None:
    with pytest.raises(BadFileError, match="no data file"):
        DataSpec.parse(tmp_path / "nope.npz")
    with pytest.raises(BadFileError, match="neither"):
        DataSpec.parse(tmp_path / "nope.csv")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(BadFileError, match="cannot read"):
        load_data(bad, input_shape=SHAPE, num_classes=5)
    assert DataSpec.parse("digits").kind is DataKind.DIGITS
    assert DataSpec.parse(tmp_path).kind is DataKind.FOLDER


# -------------------------------------------------------------------------------------------- folders
def test_an_image_folder_is_loaded_as_keras_loads_it(tmp_path: Path) -> None:
    import keras

    for c, name in enumerate(("cat", "dog")):
        for i in range(5):
            _png(tmp_path / "imgs" / name / f"{i}.png", 20 * c + 4 * i)
    data = load_data(tmp_path / "imgs", input_shape=SHAPE, num_classes=3, seed=7)
    assert isinstance(data, ImageFolderData) and len(data) == 10

    def keras_folder(**kw: object) -> object:
        return keras.utils.image_dataset_from_directory(str(tmp_path / "imgs"), image_size=SHAPE[:2], batch_size=None,
                                                        verbose=False, **kw)

    # Keras's own seeded order: the validation split is the subset Keras's validation_split would give
    assert list(data.paths) == keras_folder(shuffle=True, seed=7).file_paths
    val_paths = keras_folder(validation_split=0.2, subset="validation", seed=7).file_paths
    _, val = data.split(0.2)
    assert isinstance(val, ImageFolderData) and list(val.paths[val.index]) == val_paths
    ref = keras_folder(shuffle=False)
    by_path = {p: (im.numpy(), int(lb)) for p, (im, lb) in zip(ref.file_paths, ref, strict=True)}
    x, y = data.read(np.arange(10))
    np.testing.assert_allclose(x, np.stack([by_path[p][0] for p in data.paths]), atol=1e-4)
    assert y.tolist() == [by_path[p][1] for p in data.paths] == [int("dog" in p) for p in data.paths]
    feed = data.feed(batch_size=4, seed=0, start_step=0, steps=1)
    fx, fy = feed(0)
    rows = data.step_rows(0, 4, seed=0)
    np.testing.assert_allclose(fx, x[rows], atol=1e-4)
    assert fy.tolist() == y[rows].tolist()


def test_bad_folders_are_one_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(HgpartError, match="no class subfolders"):
        load_data(tmp_path / "empty", input_shape=SHAPE, num_classes=2)
    (tmp_path / "noimg" / "a").mkdir(parents=True)
    (tmp_path / "noimg" / "a" / "readme.txt").write_text("x")
    with pytest.raises(HgpartError, match="no images|holds no images"):
        load_data(tmp_path / "noimg", input_shape=SHAPE, num_classes=2)
    for name in ("a", "b", "c"):
        _png(tmp_path / "many" / name / "0.png", 1)
    with pytest.raises(HgpartError, match="3 class subfolders but the model has 2"):
        load_data(tmp_path / "many", input_shape=SHAPE, num_classes=2)
    _png(tmp_path / "broken" / "a" / "0.png", 1)
    (tmp_path / "broken" / "a" / "1.png").write_bytes(b"\x89PNG garbage")
    with pytest.raises(BadFileError, match=r"cannot decode the image .*1\.png") as info:
        load_data(tmp_path / "broken", input_shape=SHAPE, num_classes=2)
    assert info.value.path.endswith("1.png")
    with pytest.raises(HgpartError, match="1, 3 or 4 channels"):
        load_data(tmp_path / "many", input_shape=(8, 8, 2), num_classes=3)


def test_zip_members_with_extra_fields_are_mapped_at_the_right_offset(tmp_path: Path) -> None:
    x, y = _arrays(12)
    path = tmp_path / "extra.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in (("x", x), ("y", y)):
            info = zipfile.ZipInfo(f"{name}.npy")
            info.extra = b"\xca\xfe\x04\x00abcd"  # an unknown extra field of 4 bytes
            with zf.open(info, "w") as fh:
                np.lib.format.write_array(fh, arr)
    lx, ly = load_arrays(path)
    np.testing.assert_array_equal(lx, x)
    np.testing.assert_array_equal(ly, y)


def test_an_image_removed_during_training_is_one_error_naming_the_step(tmp_path: Path) -> None:
    for i in range(4):
        _png(tmp_path / "imgs" / "a" / f"{i}.png", i)
    data = load_data(tmp_path / "imgs", input_shape=SHAPE, num_classes=2)
    for p in (tmp_path / "imgs" / "a").iterdir():
        p.unlink()
    feed = data.feed(batch_size=2, seed=0, start_step=3, steps=2)
    with pytest.raises(HgpartError, match="cannot read the batch of step 3"):
        feed(3)
