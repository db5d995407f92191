"""hunt16-disagg16: regressions found in the disaggregated prefill/decode path."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.disagg.plan import enumerate_disagg
from kvplan.analysis.disagg.serving import simulate_disagg_serving
from kvplan.analysis.plan.judge import judge, latencies
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import PercentileBound, Slo

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")


def _fleet_1p1d(model=LLAMA_8B, engine=None, link="ib-ndr"):
    (dd,) = enumerate_disagg(model, [load_gpu("H100")], engine or EngineConfig(max_model_len=4096),
                             load_link(link), tps=(1,), max_instances=1)[:1]
    return dd


def test_disagg_bands_rate_counts_a_late_refusal_in_the_duration() -> None:
    """The plan's output rate for a disaggregated fleet divided by the last finish only.
    vLLM bench's benchmark_duration runs until every request answered, failed ones too
    (``asyncio.gather`` of all requests, then ``perf_counter() - start``), and a request
    the decode side refuses (prompt + output = 4,000 + 200 > max_model_len 4,096) fails
    only after the prefill side computed it (the proxy's max_tokens=1 request first).
    99 requests of 1,000 / 50 tokens, one every 0.5 s, then that one at 49.5 s: the rate
    is 99 x 50 = 4,950 tokens / its failure time (49.663 s, after the last finish at
    49.467 s), as simulate's output_throughput; it was 4,950 / 49.467 = 100.07 tok/s."""
    from kvplan.analysis import metrics as mx
    from kvplan.analysis.disagg.candidates import JointCandidate
    from kvplan.analysis.disagg.joint_levers import disagg_bands

    n = 100
    work = Workload(name="late-refusal", arrival_s=np.arange(n) * 0.5,
                    prompt_tokens=np.array([1000] * (n - 1) + [4000], dtype=np.int64),
                    output_tokens=np.array([50] * (n - 1) + [200], dtype=np.int64))
    dd = _fleet_1p1d()
    run = simulate_disagg_serving(dd, work)
    client = run.result.client
    assert list(client.rejected) == [n - 1] and "decode side" in client.rejected[n - 1]
    failed_at = float(client.failed_s[n - 1])
    assert failed_at > float(client.finish_s[client.finished].max())
    slo = Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=5000.0),))
    c = JointCandidate(id="d0000", kind="disaggregated", stage="verified", reason="",
                       gpus=2, usd_per_hour=1.0, index=0, disagg=dd,
                       verdict=judge(latencies(client), slo), run=run)
    rate = disagg_bands(c, slo).output_tokens_per_s
    assert rate == 4950 / failed_at
    assert rate == mx.compute_metrics(client).output_throughput
