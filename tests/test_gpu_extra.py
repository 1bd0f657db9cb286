"""The install paths: the default install and ``.[gpu]`` each hold one TensorFlow distribution.

``tensorflow-cpu`` and ``tensorflow`` install into the same ``tensorflow/`` folder, and an extra can only add
requirements, never remove a base one: a base ``tensorflow-cpu`` plus a ``tensorflow[and-cuda]`` extra would
give ``.[gpu]`` both distributions overwriting each other. The markers are evaluated here for the platforms
that matter; the real resolution was checked with ``pip install --dry-run`` (see the README's GPU section).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from hgpart.quiet import NOISE

ROOT = Path(__file__).resolve().parents[1]
LINUX_X86 = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"}
MAC_ARM = {"sys_platform": "darwin", "platform_machine": "arm64", "platform_system": "Darwin"}
LINUX_ARM = {"sys_platform": "linux", "platform_machine": "aarch64", "platform_system": "Linux"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _tensorflows(reqs: list[str], env: dict[str, str], extra: str = "") -> list[Requirement]:
    out = []
    for text in reqs:
        req = Requirement(text)
        if req.name.startswith("tensorflow") and (req.marker is None or req.marker.evaluate({**env, "extra": extra})):
            out.append(req)
    return out


@pytest.mark.parametrize("env", [LINUX_X86, MAC_ARM, LINUX_ARM], ids=["linux-x86_64", "macos-arm64", "linux-arm"])
def test_every_install_holds_one_tensorflow_distribution(env: dict[str, str]) -> None:
    project = _project()
    base = _tensorflows(project["dependencies"], env)
    gpu = _tensorflows(project["optional-dependencies"]["gpu"], env, extra="gpu")
    assert [r.name for r in base] == ["tensorflow"]
    assert {r.name for r in base + gpu} == {"tensorflow"}  # .[gpu] adds no second distribution
    if env is LINUX_X86:
        assert [sorted(r.extras) for r in gpu] == [["and-cuda"]]  # the CUDA build where TensorFlow ships it
        assert gpu[0].specifier == base[0].specifier
    else:
        assert gpu == []


def test_the_cuda_stub_log_line_is_filtered_as_tensorflow_noise() -> None:
    """The line the GPU-capable build prints on a machine without CUDA drivers: the CLI must drop it."""
    stub = ("I0000 00:00:1795461047.620027   24651 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
            "GPU will not be used.")
    glog = "I0000 00:00:1700000000.123456 1234 cpu_feature_guard.cc:210] This TensorFlow binary is optimized"
    assert NOISE.match(stub) and NOISE.match(glog)
    assert not NOISE.match("error: the placement needs 2 GPUs but 0 are visible in devices 'gpu'")
