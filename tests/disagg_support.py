"""Checks shared by the disaggregated fleet's property tests (TP and DP pools)."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_transfer_chain(r: Any, cost: Any, expected: np.ndarray) -> np.ndarray:
    """Every finished request's times in order from its prefill's end to its last token
    (prefill end <= decode arrival <= admission <= transfer start; transfer end <= first
    token <= finish), and its transfer as long as the link prices its ``expected`` bytes.
    Returns those transfer times (seconds, one per finished request)."""
    c, t = r.client, r.transfers
    done = c.finished
    for a, b in ((t.prefill_end_s, t.decode_arrival_s), (t.decode_arrival_s, t.admitted_s),
                 (t.admitted_s, t.start_s), (t.end_s, c.first_token_s),
                 (c.first_token_s, c.finish_s)):
        assert (a[done] <= b[done]).all()
    took = np.array([cost.transfer_s(float(x)) for x in expected[done]])
    assert np.allclose(t.transfer_s[done], took, rtol=1e-12, atol=1e-12)
    return took
