"""metrics.median is np.median to the bit (odd and even sizes, ties, NaN), without numpy.ma."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kvplan.analysis.metrics import median, percentile


@settings(max_examples=300, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 40),
                elements=st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)))
def test_median_is_numpys_to_the_bit(v: np.ndarray) -> None:
    assert median(v) == float(np.median(v))


def test_median_of_nan_is_nan_and_small_cases() -> None:
    assert math.isnan(median(np.array([1.0, math.nan, 3.0])))
    assert median(np.array([3.0, 1.0])) == 2.0
    assert median(np.array([0.1, 0.2, 0.7])) == 0.2


def test_median_does_not_import_numpy_ma() -> None:
    code = ("import sys, numpy as np; from kvplan.analysis.metrics import median; "
            "median(np.arange(5.0)); print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "False"


@settings(max_examples=300, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 40),
                elements=st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)),
       p=st.one_of(st.sampled_from([0.0, 50.0, 90.0, 99.0, 99.9, 100.0]),
                   st.floats(0.0, 100.0, allow_nan=False)))
def test_percentile_is_numpys_to_the_bit(v: np.ndarray, p: float) -> None:
    assert percentile(v, p) == float(np.percentile(v, p))


def test_percentile_of_nan_is_nan_and_small_cases() -> None:
    assert math.isnan(percentile(np.array([1.0, math.nan, 3.0]), 50))
    assert percentile(np.array([3.0, 1.0]), 50) == 2.0  # halfway: 1 + (3 - 1) * 0.5
    assert percentile(np.array([0.1, 0.2, 0.7]), 100) == 0.7
    assert percentile(np.array([5.0]), 99) == 5.0
    assert percentile(np.array([0.0, 10.0]), 99) == 9.9  # numpy's lerp from the upper end


def test_simulate_metrics_do_not_import_numpy_ma() -> None:
    code = ("import sys, numpy as np; from kvplan.analysis.metrics import _stat; "
            "_stat(np.arange(5.0), (50.0, 99.0)); print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "False"
