"""Every keras.applications family compiles, partitions (coarse, K = 4) and trains on 2 logical devices.

One slow test per family of ``benchmarks/coverage.py`` (its ``FAMILIES``), each running the coverage check in
a fresh process as the benchmark does: ``hgpart info``, ``hgpart partition --analytic --grain coarse --k 4``,
then the K = 4 placement folded onto 2 logical devices, whose logits must equal Keras's within 1e-4 of the
largest logit, and 2 synchronous Adam steps with finite losses.

    pytest -m slow tests/test_coverage_families.py        # all families (tens of minutes on a loaded machine)
    pytest -m slow tests/test_coverage_families.py -k ConvNeXt
"""

from __future__ import annotations

import pytest
from coverage_bench import COVERAGE


@pytest.mark.slow
@pytest.mark.parametrize("family", list(COVERAGE.FAMILIES))
def test_family_compiles_partitions_and_trains(family: str) -> None:
    row = COVERAGE._run_child(family)
    assert row.compiles, row.error
    assert row.partitions, row.error
    assert row.trains, row.error
    assert row.max_abs_diff <= COVERAGE.TOLERANCE * max(1.0, row.logit_scale)
