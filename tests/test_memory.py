"""The device memory model (hgpart.memory) against values computed by hand and against Keras itself.

Toy network of tests/hgtoys.py (input 4x4x3, conv 4, conv 3, pool, conv 2, flatten, dense 4, 3, 2); its
hypergraph is built at B = 2 and the memory asked at B = 8 with 2 batches in flight: 16 samples kept,
so a 4x4 map costs 16 values x 4 bytes x 16 samples = 1024 bytes and a 2x2 map 256 bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hgtoys import toy_network

from hgpart.errors import BadOptionError, HgpartError
from hgpart.hypergraph import build_hypergraph
from hgpart.memory import (
    MemorySettings,
    Optimizer,
    format_size,
    parse_size,
    part_memory,
    placement_memory,
    smallest_k_bound,
    vertex_memory,
)
from hgpart.metrics import partition_metrics

WORK = {"input": 0.0, "conv1": 8.0, "conv2": 6.0, "pool": 3.0, "conv3": 4.0, "flatten": 0.0,
        "fc1": 4.0, "fc2": 3.0, "fc3": 2.0}


def _toy_split() -> tuple[object, np.ndarray]:
    hg = build_hypergraph(toy_network(), WORK, batch_size=2, grain="coarse")
    parts = np.ones(hg.num_vertices, dtype=np.int64)
    parts[[0, 1, 2, 3, 4]] = 0  # the 3 input channels and conv1 filters 0, 1 on part 0
    return hg, parts


def test_toy_memory_by_hand() -> None:
    hg, parts = _toy_split()
    pm = part_memory(hg, parts, 2, MemorySettings(batch_size=8, inflight=2, optimizer=Optimizer.ADAM))
    p0, p1 = pm
    # part 0: conv1 has 3*3*3*4 + 4 = 112 parameters, 28 per filter; 2 filters = 56 params = 224 bytes;
    # gradients 224, Adam's 2 slots 448; activations: 3 input maps + 2 conv1 maps = 5 x 1024; receives nothing
    assert (p0.params, p0.gradients, p0.optimizer) == pytest.approx((224.0, 224.0, 448.0))
    assert p0.activations == pytest.approx(5 * 1024.0)
    assert p0.received == 0.0
    assert p0.total == pytest.approx(6016.0)
    # part 1: 338 params in all (112 + 111 + 56 + 36 + 15 + 8) - 56 = 282 = 1128 bytes, x4 with grads and Adam;
    # activations: conv1 2 maps + conv2 3 maps (4x4) = 5 x 1024, pool 3 + conv3 2 maps (2x2) = 5 x 256,
    # flatten is a view (nothing), dense outputs 4 + 3 + 2 values x 4 bytes x 16 = 576
    assert p1.params == pytest.approx(1128.0)
    assert p1.optimizer == pytest.approx(2256.0)
    assert p1.activations == pytest.approx(5 * 1024 + 5 * 256 + 576.0)
    # received: the 3 input maps (conv1 filters 2, 3 read them) and conv1 maps 0, 1 (conv2 reads them): 5 x 1024
    assert p1.received == pytest.approx(5 * 1024.0)
    assert p1.total == pytest.approx(4 * 1128 + 6976 + 5120.0)


def test_optimizer_slots_and_limit() -> None:
    hg, parts = _toy_split()
    sgd = part_memory(hg, parts, 2, MemorySettings(batch_size=2, optimizer=Optimizer.SGD), limit=7000.0)
    mom = part_memory(hg, parts, 2, MemorySettings(batch_size=2, optimizer=Optimizer.parse("Momentum")))
    assert sgd[1].optimizer == 0.0 and mom[1].optimizer == pytest.approx(1128.0)
    # at B = 2, one batch: part 1 = 1128*2 + (6976 + 5120) / 8 = 3768 bytes; part 0 = 448 + 640 = 1088
    assert [p.total for p in sgd] == pytest.approx([1088.0, 3768.0])
    assert all(p.fits for p in sgd)
    tight = part_memory(hg, parts, 2, MemorySettings(batch_size=2, optimizer=Optimizer.SGD), limit=3000.0)
    assert [p.fits for p in tight] == [True, False]
    assert tight[1].use == pytest.approx(3768 / 3000)


def test_vertex_memory_adds_up_to_the_parts() -> None:
    hg, parts = _toy_split()
    settings = MemorySettings(batch_size=8, inflight=2)
    vm = vertex_memory(hg, settings)
    pm = part_memory(hg, parts, 2, settings, vm=vm)
    additive = np.bincount(parts, weights=vm.total, minlength=2)
    assert additive == pytest.approx([p.total - p.received for p in pm])
    # no placement on fewer parts than total / limit fits; a vertex larger than the limit: none fits at all
    assert smallest_k_bound(vm, float(vm.total.sum()) / 2.5) == 3
    assert smallest_k_bound(vm, float(vm.total.max()) / 2) == 0


def test_metrics_record_memory_against_the_limit() -> None:
    hg, parts = _toy_split()
    m = partition_metrics(hg, parts, 2, optimizer="sgd", memory_limit=3000.0)
    assert m.part_memory_bytes == pytest.approx([1088.0, 3768.0])
    assert m.max_memory_bytes == pytest.approx(3768.0)
    assert m.memory_limit_bytes == 3000.0 and not m.fits_memory
    assert partition_metrics(hg, parts, 2, optimizer="sgd").fits_memory


@pytest.mark.parametrize(("text", "value"), [("16GiB", 16 * 2**30), ("512MB", 512 * 10**6), ("1.5 gb", 1.5e9),
                                             ("8G", 8 * 2**30), ("4096", 4096), ("2 KiB", 2048), ("1tib", 2**40)])
def test_parse_size(text: str, value: float) -> None:
    assert parse_size(text) == int(value)


@pytest.mark.parametrize("text", ["", "GiB", "16 GiBs", "-1GB", "0", "1e9", "sixteen"])
def test_parse_size_refuses_bad_text_in_one_line(text: str) -> None:
    with pytest.raises(BadOptionError) as info:
        parse_size(text)
    assert "\n" not in info.value.line() and "--memory-limit" in info.value.line()


def test_settings_and_optimizer_errors_are_typed() -> None:
    with pytest.raises(BadOptionError, match="unknown optimizer"):
        Optimizer.parse("rmsprop")
    with pytest.raises(HgpartError, match="inflight 0 must be >= 1"):
        MemorySettings(batch_size=4, inflight=0)
    assert format_size(16 * 2**30) == "16.0 GiB" and format_size(100) == "100 B"


def test_placement_memory_reads_the_placement() -> None:
    from hgpart.placement import Placement

    hg, parts = _toy_split()
    pl = Placement.from_vertex_parts(toy_network(), hg, parts, k=2, method="hypergraph", work=WORK)
    pm = placement_memory(pl, batch_size=8, inflight=2, optimizer="adam", limit=10_000.0)
    assert [p.total for p in pm] == pytest.approx([6016.0, 4 * 1128 + 6976 + 5120.0])
    assert [p.fits for p in pm] == [True, False]


def _keras_bytes(spec: str) -> tuple[int, int, int]:
    """(weight bytes, trainable weight bytes, Adam slot bytes) of the Keras model, measured on its variables."""
    import keras

    from hgpart.models import load_keras_model

    model = load_keras_model(spec)
    opt = keras.optimizers.Adam()
    opt.build(model.trainable_variables)
    weights = sum(int(np.prod(v.shape)) * 4 for v in model.weights)
    trainable = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_weights)
    slots = sum(int(np.prod(v.shape)) * 4 for v in opt.variables if len(v.shape) > 0)
    return weights, trainable, slots


def test_parameters_and_adam_slots_match_keras() -> None:
    """Measured on Keras: the model's weights and the variables an Adam optimizer creates for it."""
    from hgpart.models import load_graph
    from hgpart.profile import analytic_profile

    for spec in ("minivgg", "minires"):
        graph = load_graph(spec)
        hg = build_hypergraph(graph, analytic_profile(graph, 4).work(), batch_size=4, grain="coarse")
        (p,) = part_memory(hg, np.zeros(hg.num_vertices, np.int64), 1, MemorySettings(batch_size=4))
        weights, trainable, slots = _keras_bytes(spec)
        assert p.params == pytest.approx(weights)
        if spec == "minivgg":  # every weight trainable: gradients and slots exact
            assert (p.gradients, p.optimizer) == pytest.approx((trainable, slots))
        else:  # BatchNorm's moving statistics have no gradient or slot: the model over-counts them, never under
            assert trainable <= p.gradients < 1.01 * trainable and slots <= p.optimizer < 1.01 * slots
