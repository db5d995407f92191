"""exact_dot's compiled pass (analysis/_exact.c) and numpy's three-piece sums give the same
float: both hold sum(values * counts) exactly and round once (checked against Fraction)."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis import weighted
from tests.core_helpers import python_loop

BUILT = weighted._compiled() is not None


def test_the_compiled_sums_were_built() -> None:
    """scripts/test.sh sets KVPLAN_REQUIRE_CORE=1: a missing build fails, never skips."""
    if os.environ.get("KVPLAN_REQUIRE_CORE") == "1":
        assert BUILT
    with python_loop():
        assert weighted._compiled() is None  # KVPLAN_SIM_CORE=python: numpy's path


FLOATS = (st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
          | st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.0**-1022, 0.1, 1e16, -1e16]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(FLOATS, st.integers(0, 3) | st.integers(0, 2**34 - 1)),
                max_size=60))
def test_both_paths_are_the_exact_sum_rounded_once(pairs: list[tuple[float, int]]) -> None:
    values = np.array([v for v, _ in pairs], dtype=np.float64)
    counts = np.array([c for _, c in pairs], dtype=np.int64)
    exact = sum((Fraction(v) * c for v, c in pairs), Fraction(0))
    try:
        want = float(exact)
    except OverflowError:  # past float64: both paths refuse it alike
        with pytest.raises(OverflowError):
            weighted.exact_dot(values, counts)
        with python_loop(), pytest.raises(OverflowError):
            weighted.exact_dot(values, counts)
        return
    got = weighted.exact_dot(values, counts)
    with python_loop():
        numpy_got = weighted.exact_dot(values, counts)
    assert got.hex() == numpy_got.hex() == want.hex()


@pytest.mark.skipif(not BUILT, reason="analysis/_exact.c was not built (no C compiler)")
def test_the_compiled_pass_refuses_what_it_cannot_hold() -> None:
    fast = weighted._compiled()
    with pytest.raises(ValueError, match="finite"):
        fast.exact_dot(np.array([np.inf]), np.array([1]))
    with pytest.raises(ValueError, match="counts"):
        fast.exact_dot(np.array([1.0]), np.array([2**34]))
    with pytest.raises(ValueError, match="one each"):
        fast.exact_dot(np.array([1.0, 2.0]), np.array([1]))
    assert fast.exact_dot(np.zeros(3), np.ones(3, dtype=np.int64)) == (0, [])
