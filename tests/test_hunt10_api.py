"""hunt10-api: the Python API and notebook displays (kvplan/__init__.py's names, their results)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import ArgumentTypeError

A_STR_FOR_A_LIST = {
    "parse_slo": (lambda: kvplan.parse_slo("ttft:p99:2000"), "parse_slo(): argument 'items'"),
    "parse_goodput_slo": (lambda: kvplan.parse_goodput_slo("ttft:2000"),
                          "parse_goodput_slo(): argument 'items'"),
    "price_table": (lambda: kvplan.price_table(overrides="H100=2.5"),
                    "price_table(): argument 'overrides'"),
}


@pytest.mark.parametrize("case", sorted(A_STR_FOR_A_LIST))
def test_a_bare_string_for_a_list_of_strings_is_a_type_error(case: str) -> None:
    """A str is a Sequence[str] of its characters: parse_slo("ttft:p99:2000") was refused as
    "--slo 't': use METRIC:pPCT:MS" (a valid bound blamed), price_table(overrides="H100=2.5")
    as "--price 'H'". Now one ArgumentTypeError naming the argument and the list it takes."""
    call, fragment = A_STR_FOR_A_LIST[case]
    with pytest.raises(ArgumentTypeError) as caught:
        call()
    assert fragment in str(caught.value) and "got str" in str(caught.value), str(caught.value)


def test_a_list_of_strings_still_parses() -> None:
    (bound,) = kvplan.parse_slo(["ttft:p99:2000"])
    assert (bound.metric, bound.percentile, bound.limit_ms) == ("ttft", 99.0, 2000.0)
    assert kvplan.parse_goodput_slo(("ttft:2000",)) == (("ttft", 2000.0),)
