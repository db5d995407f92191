"""Hunt 13, charts and machine-readable outputs: each chart plots the numbers its command
prints, and every JSON field carries its unit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.report import sim_charts
from kvplan.report.charts import chart_spec
from kvplan.sim.result import SimulationResult
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig

M = "meta-llama/Llama-3.1-8B"


def _sim(n: int, rate: float = float("inf")) -> SimulationResult:
    work = build_workload(WorkloadArgs(num_prompts=n, random_input_len=1024,
                                       random_output_len=128, request_rate=rate, seed=0))
    return simulate_serving(load_model(M), load_gpu("H100"), EngineConfig(), work).result


def _cdf(r: SimulationResult, metric: str) -> list[tuple[float, float]]:
    rows = chart_spec(sim_charts.latency_cdf_chart(r))["data"]["values"]
    return [(x["ms"], x["fraction"]) for x in rows if x["metric"] == metric]


def test_one_request_cdf_ends_at_one() -> None:
    # before: one value gave one quantile (q = linspace(0, 1, 1) = [0]): the curve sat at
    # fraction 0 and never reached 1. Golden: TTFT of one 1024-token prompt = 72.17 ms.
    r = _sim(1)
    for metric in ("TTFT", "TPOT", "E2EL"):
        pts = _cdf(r, metric)
        assert pts[0][1] == 0.0 and pts[-1][1] == 1.0, (metric, pts)
        assert len({x for x, _ in pts}) == 1  # one value: a vertical step
    assert _cdf(r, "TTFT")[-1][0] == pytest.approx(72.174, abs=1e-3)


def test_cdf_passes_through_the_printed_median_and_p99() -> None:
    # before: 400 evenly spaced quantiles; a step-after line read at 0.99 gave the next grid
    # point (ITL 23.63 ms against the printed p99 23.49 ms on 200 requests at 8 req/s, arrivals
    # drawn before hunt 14; vLLM's seed-0 arrivals give p99 ITL 23.63 ms)
    r = _sim(200, rate=8.0)
    m = compute_metrics(r, percentiles=[50, 99])
    for metric, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl")):
        at = dict((f, x) for x, f in _cdf(r, metric))
        p = dict(m.stats[key].percentiles_ms)
        assert at[0.5] == p[50.0] and at[0.99] == p[99.0], metric
    # (23.63 ms before hunt 16's lm_head line)
    assert dict((f, x) for x, f in _cdf(r, "ITL"))[0.99] == pytest.approx(23.6404, abs=1e-3)


def test_itl_cdf_never_expands_one_float_per_token(monkeypatch: pytest.MonkeyPatch) -> None:
    # before: the ITL panel called SimulationResult.itl_s(), one float per output token
    # (kvplan report --num-prompts 100000: 591 MiB for this chart alone); now the
    # (value, count) pairs the ITL statistics use
    r = _sim(20, rate=20.0)

    def expanded(self: Any) -> Any:
        raise AssertionError("itl_s() expands every gap")

    monkeypatch.setattr(SimulationResult, "itl_s", expanded)
    pts = _cdf(r, "ITL")
    assert pts[-1][1] == 1.0 and all(np.diff([x for x, _ in pts]) >= 0)


def test_sweep_chart_draws_no_tpot_for_one_output_token() -> None:
    # before: TPOT None (one output token: no gap) was drawn as 0.0 ms while the table
    # prints '-'; golden: output 2 on H100 batch 1 gives TPOT 7.23 ms
    from kvplan.cli.engine import resolve_engine
    from kvplan.costs.step import latency as lat
    from kvplan.costs.step.profiles import profile_for
    from kvplan.report.budget_charts import sweep_chart

    spec, hw, engine = load_model(M), load_gpu("H100"), resolve_engine({})
    shape = lat.RequestShape(prompt_tokens=2048, output_tokens=1, batch=1)
    rows = lat.sweep(spec, hw, engine, shape, "output", ["1", "2"],
                     profile_for(spec, hw, engine, None))
    data = chart_spec(sweep_chart("output", rows))["data"]["values"]
    tpot = {d["value"]: d["TPOT (ms)"] for d in data}
    assert tpot["1"] is None
    assert tpot["2"] == pytest.approx(7.23, abs=0.01)


def test_saved_kv_usage_series_holds_integer_blocks_and_bytes() -> None:
    # before: every kv_usage list was floats ("logical_bytes": [134217728.0, ...]); bytes and
    # counts are integers in kvplan's JSON. Golden: one 1024-token prompt of Llama-3.1-8B
    # (131,072 bytes/token, blocks of 16) holds 64 blocks = 134,217,728 bytes after step 1.
    import json

    from kvplan.analysis.metrics import kv_usage_series
    from kvplan.report.json_out import dumps

    series = json.loads(dumps(kv_usage_series(_sim(1))))
    for key in ("used_blocks", "logical_bytes", "running", "waiting"):
        assert all(type(x) is int for x in series[key]), key
    assert series["used_blocks"][0] == 64
    assert series["logical_bytes"][0] == 1024 * 131072 == 134217728
    assert series["running"][0] == 1


def test_dp_fleet_num_blocks_is_the_ranks_sum(tmp_path: Any) -> None:
    # before: a DP 2 fleet reported num_blocks 48,159 (usable + 1) and the chart said
    # "vLLM's 48,159 less its null block"; vLLM has 24,080 blocks per rank (2 x = 48,160),
    # each rank with its own null block: 48,158 usable
    from tests.conftest import run_cli

    args = ("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2",
            "--enable-expert-parallel", "--num-prompts", "20", "--request-rate", "10")
    r = run_cli(*args, "--json", "--plot", str(tmp_path / "kv.html"))
    assert r.code == 0, r.err
    doc = r.json()
    per_rank = [x["num_gpu_blocks"] for x in doc["dp_ranks"]]
    assert per_rank == [24080, 24080]
    assert doc["num_blocks"] == 48160
    assert doc["peak_kv_usage"] == pytest.approx(doc["peak_kv_blocks"] / 48158)
    html = (tmp_path / "kv.html").read_text()
    assert "vLLM's 48,160 less 2 null blocks, one per DP rank" in html


def test_decode_instance_chart_states_the_peak_held_between_steps() -> None:
    # before: the web's decode-pool KV chart of a 1P1D fleet topped at 257 of 1,023 blocks
    # (25.1 %) while --json says decode_peak_kv_blocks 500 (48.9 %): 8,000 prompt tokens =
    # 500 blocks held from admission until the KV crossed the link, freed (sliding window)
    # before the first step sample. Now the subtitle states the peak and why the line misses it.
    from kvplan.analysis.disagg.serving import simulate_disagg_serving
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.links import load_link

    m, g = load_model("mistralai/Mistral-7B-v0.1"), load_gpu("H100")
    pool = Deployment(model=m, gpu=g, engine=EngineConfig(kv_cache_memory_bytes=2 * 2**30))
    dd = DisaggDeployment(prefill=pool, decode=pool, link=load_link("ib-ndr"))
    work = build_workload(WorkloadArgs(num_prompts=1, random_input_len=8000,
                                       random_output_len=50, seed=0))
    decode = simulate_disagg_serving(dd, work).result.decode[0]
    sub = chart_spec(sim_charts.kv_usage_chart(decode, "t"))["title"]["subtitle"]
    assert decode.peak_kv_blocks == 500 and decode.usable_blocks == 1023
    assert "peak 500 (48.9 %), held between steps during a KV transfer" in sub
    assert "the line's steps reach 257" in sub


def test_request_under_tp_says_its_bytes_are_per_gpu(tmp_path: Any) -> None:
    # before: `kvplan request -tp 2` printed "65,536 bytes/token" and drew "KV cache held (MiB)"
    # where `kvplan kv` says 131,072 bytes/token for the model: the figures are one GPU's
    # half (8 KV heads split over 2 GPUs), and now say so (as `kvplan batch` does)
    from tests.conftest import run_cli

    out = tmp_path / "st.html"
    r = run_cli("request", M, "--prompt", "100", "--output", "1", "-tp", "2", "--plot", str(out))
    assert r.code == 0, r.err
    assert "65,536 bytes/token per GPU at TP 2 (bfloat16)" in r.out
    assert "KV cache held per GPU (TP 2) (MiB)" in out.read_text()
    r1 = run_cli("request", M, "--prompt", "100", "--output", "1", "--plot", str(out))
    assert "131,072 bytes/token (bfloat16)" in r1.out
    assert '"KV cache held (MiB)"' in out.read_text()


def test_sweep_row_whose_kv_cache_holds_no_request_is_not_a_weights_failure() -> None:
    # before: Llama-3.1-70B at TP 2 on H100 (weights 65.7 GiB per GPU fit; 86.24 MiB left for
    # a KV cache, one 1,088-token request needs 170 MiB) was "weights do not fit: no latency"
    # (JSON weights_fit false) and `latency -tp 2` said "does not fit before any KV cache"
    from tests.conftest import run_cli

    args = ("latency", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--prompt", "1024",
            "--output", "64")
    doc = run_cli(*args, "--sweep", "tensor-parallel-size=1,2", "--json").json()
    tp1, tp2 = doc["rows"]
    assert tp1["weights_fit"] is False and "weights 131.45 GiB" in tp1["does_not_fit"]
    assert (tp2["weights_fit"], tp2["fits"], tp2["max_batch"]) == (True, False, 0)
    assert tp2["ttft_s"] > 0 and doc["kv_no_longer_fits_at"] == "2"
    err = run_cli(*args, "-tp", "2").err
    assert "cannot hold one request: one request of 1088 tokens needs 170.00 MiB" in err
    assert "86.24 MiB is available" in err and "before any KV cache" not in err
