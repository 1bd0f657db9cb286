"""TensorFlow's start-up log lines that the hgpart command line hides."""

from __future__ import annotations

from hgpart.quiet import NOISE


def test_the_cuda_stub_log_line_is_filtered_as_tensorflow_noise() -> None:
    """The line the GPU-capable ``tensorflow`` build prints on a machine without CUDA drivers: the CLI drops it."""
    stub = ("I0000 00:00:1795461047.620027   24651 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
            "GPU will not be used.")
    glog = "I0000 00:00:1700000000.123456 1234 cpu_feature_guard.cc:210] This TensorFlow binary is optimized"
    assert NOISE.match(stub) and NOISE.match(glog)
    assert not NOISE.match("error: the placement needs 2 GPUs but 0 are visible in devices 'gpu'")
