"""This machine's one-device profiles of the models a user names, made by ``hgpart calibrate --profile``.

Usage::

    reqs = profile_requests(["minivgg:32", "vgg16:64"], [16, 32])   # checked before anything is measured
    paths = make_profiles(reqs, cores=1, folder=Path("profiles"), quick=False, report=print)

Why: the simulator times a model's layers from a profile of the device kind when there is one, else from the
calibrated FLOP rate. On a machine the project had not used, the validation's error was about 30 % with another
machine's profiles and 71 % with none, against 14 % with profiles made there
(``benchmarks/results/simulator_validation/2026-11-29-amx/``). So calibration should be able to leave the cluster
file pointing at profiles of this machine. Each is what ``hgpart profile --model M --input S --batch-size B
--cores N`` makes (the same sampling, the same file name), measured in the calibrating process while it is pinned
as a worker of N cores.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hgpart.errors import BadOptionError
from hgpart.models import KERAS_PREFIX, parse_input
from hgpart.profile import default_profile_path
from hgpart.zoo import ZOO

__all__ = ["ProfileRequest", "profile_requests", "make_profiles"]

#: an input size at the end of a ``--profile`` spec: ``vgg16:64``, ``keras:ResNet50:224x224x3``
_INPUT = re.compile(r"^\d+(x\d+){0,2}$")


@dataclass(frozen=True)
class ProfileRequest:
    """One model to profile: its spec (as ``--model`` takes it), its input (None: the model's own) and batch
    sizes."""

    spec: str
    input_shape: tuple[int, ...] | None
    batch_sizes: tuple[int, ...]

    @property
    def label(self) -> str:
        shape = "x".join(map(str, self.input_shape)) if self.input_shape else "its own input"
        return f"{self.spec} at {shape}"


def profile_requests(specs: Sequence[str], batch_sizes: Sequence[int]) -> list[ProfileRequest]:
    """``--profile MODEL[:INPUT]`` specs and ``--batch-sizes``, checked without building a model: a zoo name, a
    ``keras:`` application or an existing ``.keras`` file, and positive batch sizes. Each problem is one
    :class:`BadOptionError`."""
    sizes = tuple(dict.fromkeys(int(b) for b in batch_sizes))
    if not sizes or min(sizes) < 1:
        raise BadOptionError(f"batch sizes must be positive, got {list(batch_sizes)}", where="--batch-sizes",
                             option="--batch-sizes", fix="pass e.g. --batch-sizes 16,32")
    out = []
    for text in specs:
        spec, _, tail = text.rpartition(":")
        if not spec or not _INPUT.match(tail):
            spec, tail = text, ""
        if not (spec.startswith(KERAS_PREFIX) or spec in ZOO or Path(spec).suffix == ".keras"):
            raise BadOptionError(f"unknown model {spec!r}", where="--profile", option="--profile", value=text,
                                 fix="give MODEL or MODEL:INPUT: a zoo name (" + ", ".join(ZOO) + "), "
                                     "keras:<Application> or a .keras file, e.g. --profile vgg16:64")
        if Path(spec).suffix == ".keras" and not Path(spec).is_file():
            raise BadOptionError(f"model file {spec} does not exist", where="--profile", option="--profile",
                                 value=text, fix="give the path of a .keras file")
        out.append(ProfileRequest(spec, parse_input(tail) if tail else None, sizes))
    return out


def make_profiles(requests: Sequence[ProfileRequest], *, cores: int, folder: Path, quick: bool,
                  report: Callable[[str], None],
                  built: list[tuple[str, tuple[int, ...], ProfileRequest]] | None = None) -> list[Path]:
    """Profile every request at each batch size into ``folder`` (``<model>_<input>_b<B>_c<cores>.json``), in this
    process, which must already be pinned to ``cores`` cores (:func:`hgpart.calibration.compute_rate` pins it).
    ``quick``: 2 to 3 sampling rounds instead of ``hgpart profile``'s 5 to 45. Reports one line per file.
    ``built``: if given, each request is appended to it with its model's name and input shape, for the client
    benchmark that follows in ``hgpart calibrate``."""
    from hgpart.frontend import layer_graph_from_keras
    from hgpart.models import load_keras_model, model_name
    from hgpart.profiler import measure_profile, options_from

    opts = options_from(repeats=2 if quick else 5, max_rounds=3 if quick else None, warmup=1, clock="process_cpu",
                        statistic="low_half", target=0.05)
    paths = []
    for req in requests:
        model = load_keras_model(req.spec, input_shape=req.input_shape)
        graph = layer_graph_from_keras(model, name=model_name(req.spec))
        if built is not None:
            built.append((graph.name, tuple(int(v) for v in graph.input_shape), req))
        for b in req.batch_sizes:
            started = time.perf_counter()
            prof = measure_profile(model, graph, batch_size=b, options=opts, progress=False)
            path = prof.save(default_profile_path(graph, b, folder, cores=cores))
            paths.append(path)
            step = sum(c.forward_ms + c.backward_ms for c in prof.layers)
            report(f"profiled {req.label} at batch {b}: {step:,.1f} ms per step (sum of layers) -> {path} "
                   f"({time.perf_counter() - started:.0f} s)")
    return paths
