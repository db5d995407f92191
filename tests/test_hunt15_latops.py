"""Hunt 15, `kvplan latency` and its op-by-op breakdown (``--explain``, ``--json``): the rows
add up to the step, and the words say what the numbers are. Hand-checked."""

from __future__ import annotations

import json

import numpy as np

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
    # rates and gives what the kernels take (roofline_s 156.13 ms < TTFT).
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
    assert "the kernels take 156.13 ms" in line
    assert round(s.roofline_s * 1e3, 2) == 156.13 < r.ttft_s * 1e3
    roof = explain("prefill", r.prefill)  # a GPU without tables: the roofline's own rates
    assert "FLOPs at the roofline's FLOP/s" in roof


def test_explain_pp_rows_hold_the_other_stages() -> None:
    # Llama-3.1-8B PP2 on H100, 16 x 1,000-token prompts: the step passes two 16-layer
    # stages (315.65 ms), but the rows listed one stage (154.81 ms) and put the other, 156.9
    # ms, under "overheads + rest" (step, per-request, layer gaps, elementwise: 160.84 ms, 51%
    # of the step). A row now holds the other stage + hand-off; the rest is the overheads:
    # 934.6 us step + 16 x 94.1 us per request + 16 x 12.3 us layer gaps + elementwise ~ 4 ms.
    pre, dec = _step_ops(LLAMA8, "--gpu", "H100", "-pp", "2", "--prompt", "1000",
                         "--output", "50", "--batch", "16")
    for step in (pre, dec):
        ops = {o["op"]: o for o in step["ops"]}  # type: ignore[attr-defined]
        other = ops["other pipeline stages"]
        assert other["layers"] == 16
        this = sum(float(o["seconds"]) for k, o in ops.items()  # type: ignore[arg-type]
                   if k not in ("other pipeline stages", "lm_head"))
        # the other stage runs the same 16 layers (+ elementwise, gaps, its hand-off)
        assert this <= float(other["seconds"]) <= 1.06 * this + 1e-3  # type: ignore[arg-type]
        rest = float(step["step_s"]) - float(step["kernels_s"])  # type: ignore[arg-type]
        assert 0.0 < rest < 5e-3
    assert np.isclose(float(pre["step_s"]), 0.31565, atol=5e-5)  # type: ignore[arg-type]


def test_explain_keeps_the_all_reduce_row_past_the_token_tables() -> None:
    # Llama-3.1-70B TP8 on H100, 64 prompts of 4,096 in one step: 262,144 tokens, past the
    # token tables' 131,072 (TABLE_CAP; the step extends them along their last step). The
    # all-reduce row was dropped there and its 2.57 s fell under "overheads + rest" (2.794 s,
    # 30% of the step). Each of the 161 all-reduces (2 x 80 + the embedding's) moves
    # 262,144 x 8,192 x 2 B = 4 GiB, eagerly (a step past the captured graphs): 161 x
    # 18.88 ms = 3.039 s (2.582 s at the graph-mode table's rate, hunt 16).
    pre = _step_ops("meta-llama/Llama-3.1-70B", "--gpu", "H100", "-tp", "8", "--prompt",
                    "4096", "--output", "2", "--batch", "64")[0]
    ops = {o["op"]: o for o in pre["ops"]}  # type: ignore[attr-defined]
    ar = ops["all_reduce"]
    assert (ar["layers"], ar["shape"]) == (161, "4294967296 B x 8 GPUs")
    assert 262_144 * 8_192 * 2 == 4_294_967_296
    assert 2.9 < float(ar["seconds"]) < 3.2  # type: ignore[arg-type]
    rest = float(pre["step_s"]) - float(pre["kernels_s"])  # type: ignore[arg-type]
    assert 0.0 < rest < 0.05 * float(pre["step_s"])  # type: ignore[arg-type]


def test_band_basis_names_each_metrics_group() -> None:
    # Llama-3.1-8B on H100 TP1: the bundled profile's (dense, H100-SXM-80GB, TP1) group holds
    # 11 TTFT, 9 TPOT and 14 throughput residuals but 1 end-to-end one (< MIN_POINTS 4), and
    # (dense, H100, any TP) 2, so the end-to-end band is the dense family's (20 points: ratios
    # 0.6218-1.4253, 1.809 s -> 1.125-2.578 s). The line said every band came from "dense on
    # H100-SXM-80GB at TP1, 9 held-out points" (TPOT's group).
    from kvplan.costs.step.uncertainty import bundled_uncertainty

    e2e = [g for g in bundled_uncertainty().groups if g.metric == "e2e_s"
           and g.family == "dense" and g.gpu in ("H100-SXM-80GB", "*") and g.tp in ("1", "*")]
    assert sorted((g.gpu, g.tp, g.n) for g in e2e) == [
        ("*", "*", 20), ("H100-SXM-80GB", "*", 2), ("H100-SXM-80GB", "1", 1)]
    r = run_cli("latency", LLAMA8, "--gpu", "H100", "--prompt", "1000", "--output", "200",
                "--batch", "8", "--json")
    d = json.loads(r.out)
    assert d["band_basis"] == (
        "TTFT: dense on H100-SXM-80GB at TP1, 11 held-out points; TPOT: dense on "
        "H100-SXM-80GB at TP1, 9 held-out points; end-to-end: dense, 20 held-out points; "
        "output throughput: dense on H100-SXM-80GB at TP1, 14 held-out points")
    assert [round(x, 3) for x in d["e2e_s_band"]] == [
        round(d["e2e_s"] * 0.6218, 3), round(d["e2e_s"] * 1.4253, 3)]
    one = run_cli("latency", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8",
                  "--prompt", "100", "--output", "10", "--json")
    assert "held-out points" in json.loads(one.out)["band_basis"]


def test_explain_rows_name_each_projection_once() -> None:
    # DeepSeek-V3 TP8: q_a_proj (7,168 -> q_lora_rank 1,536) and kv_a_proj_with_mqa (7,168 ->
    # kv_lora_rank 512 + rope 64 = 576) were both "mla_a_proj"; DeepSeek-V2-Lite's q_proj
    # (2,048 -> 16 heads x 192 = 3,072, no q LoRA) was "mla_q_b_proj"; Qwen3-Next's
    # shared_expert_gate (2,048 -> 1) was a second "router". The step's time is unchanged.
    from kvplan.costs.step.ops import stage_ops

    def gemms(model: str, tp: int) -> dict[str, tuple[int, int]]:
        ops = stage_ops(kvplan.load_model(model), EngineConfig(tensor_parallel_size=tp))
        names = [g.name for g in ops.gemms if g.per == "token"]
        assert len(names) == len(set(names)), names  # one row per op name
        return {g.name: (g.n, g.k) for g in ops.gemms if g.per == "token"}

    v3 = gemms("deepseek-ai/DeepSeek-V3", 8)
    # (since hunt 15 latops2 one GEMM, as vLLM fuses them: 1,536 + 576 = 2,112 rows)
    assert v3["mla_fused_qkv_a_proj"] == (1536 + 576, 7168)
    assert v3["mla_q_b_proj"] == (128 * 192 // 8, 1536)
    lite = gemms("deepseek-ai/DeepSeek-V2-Lite", 1)
    assert (lite["mla_q_proj"], lite["mla_kv_a_proj"]) == ((16 * 192, 2048), (576, 2048))
    nxt = gemms("Qwen/Qwen3-Next-80B-A3B-Thinking", 4)
    assert (nxt["router"], nxt["shared_expert_gate"]) == ((512, 2048), (1, 2048))
