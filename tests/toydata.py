"""A small learnable image set for the runtime tests: the class is the brightest of 10 horizontal bands."""

from __future__ import annotations

import numpy as np


def band_images(n: int = 64, size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images of ``size`` x ``size`` x 3: noise plus 1.0 on the row band of the label (10 classes)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, n).astype(np.int32)
    x = rng.normal(scale=0.1, size=(n, size, size, 3)).astype(np.float32)
    for i, c in enumerate(y):
        x[i, c, :, :] += 1.0
    return x, y
