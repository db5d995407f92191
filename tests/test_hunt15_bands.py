"""Hunt 15: an end-to-end band never reaches below the TTFT band of the same answer.

Every request's end-to-end latency holds its TTFT, so the mean (and the median) E2E is never
below the mean (median) TTFT. The bands are each metric's own held-out residual ratios, so
before the fix one output token gave TTFT 10.83-18.60 ms but E2E 6.73-15.44 ms.
"""

from __future__ import annotations

import json

from kvplan.costs.step.uncertainty import answer_bands
from tests.conftest import run_cli


def test_one_output_token_gives_equal_ttft_and_e2e_bands() -> None:
    out = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--batch", "4",
                  "--prompt", "100", "--output", "1", "--json")
    assert out.code == 0, out.err
    d = json.loads(out.out)
    assert d["e2e_s"] == d["ttft_s"]  # one token: the request ends with its first token
    assert d["e2e_s_band"] == d["ttft_s_band"]


def test_each_end_of_the_e2e_band_is_lifted_to_the_ttft_band() -> None:
    # hand case: a TTFT of 1.0 s and an E2E of 1.1 s, both on dense H100 TP1's ratios; the
    # E2E band's own ratios put its low end under the TTFT's low end -> lifted to it
    bands = answer_bands({"mean_ttft_ms": 1000.0, "mean_e2el_ms": 1000.0},
                         family="dense", gpu="H100-SXM-80GB", tp=1,
                         key_of={"mean_ttft_ms": "ttft_s", "mean_e2el_ms": "e2e_s"})
    t, e = bands["mean_ttft_ms_band"], bands["mean_e2el_ms_band"]
    assert t is not None and e is not None
    assert e[0] >= t[0] and e[1] >= t[1]
    assert e[0] == t[0]  # the E2E residuals reach lower than the TTFT's on this group
