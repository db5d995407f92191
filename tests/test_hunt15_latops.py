"""Hunt 15, `kvplan latency` and its op-by-op breakdown (``--explain``, ``--json``): the rows
add up to the step, and the words say what the numbers are. Hand-checked."""

from __future__ import annotations

import json

import kvplan
from kvplan.costs.step.latency import RequestShape, request_latency
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli

LLAMA8 = "meta-llama/Llama-3.1-8B"


def _step_ops(*args: str) -> list[dict[str, object]]:
    r = run_cli("latency", *args, "--json")
    assert r.code == 0, r.err
    ops: list[dict[str, object]] = json.loads(r.out)["step_ops"]
    return ops


def test_explain_line_says_the_compute_side_is_flops_at_the_8192_gemm_rate() -> None:
    # Llama-3.1-8B on H100, 8 x 1,000-token prompts: 1.1378e14 FLOPs (2 x 6.98e9 non-embedding
    # parameters x 8,000 tokens + attention + 8 lm_head rows) over the measured 8,192^3
    # GEMM's FLOP/s = 159.54 ms, above the 158.57 ms TTFT: the line read "compute 159.54 ms
    # vs memory 6.49 ms", as if computing alone outlasted the whole prefill. It now names the
    # rates and gives what the kernels take (roofline_s 156.12 ms < TTFT).
    from kvplan.cli.cmd_latency import explain

    spec, hw = kvplan.load_model(LLAMA8), kvplan.load_gpu("H100")
    r = request_latency(spec, hw, EngineConfig(), RequestShape(
        batch=8, prompt_tokens=1000, output_tokens=200))
    s = r.prefill.seconds
    assert round(s.compute_s * 1e3, 2) == 159.54 > round(r.ttft_s * 1e3, 2) == 158.57
    line = explain("prefill", r.prefill, measured=True)
    assert "(compute " not in line
    assert "FLOPs at the measured 8,192^3 GEMM's FLOP/s: 159.54 ms" in line
    assert "bytes at the measured streaming bytes/s: 6.49 ms" in line
    assert "the kernels take 156.12 ms" in line
    assert round(s.roofline_s * 1e3, 2) == 156.12 < r.ttft_s * 1e3
    roof = explain("prefill", r.prefill)  # a GPU without tables: the roofline's own rates
    assert "FLOPs at the roofline's FLOP/s" in roof
