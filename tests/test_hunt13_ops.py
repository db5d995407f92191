"""Hunt 13, the step-time model op by op (``kvplan latency --explain``'s rows): physics each
op must keep, hand-checked."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.step.explain import op_times
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli


def _rows(model: str, gpu: str, tp: int, new: list[int], ctx: list[int],
          **engine: object) -> dict[str, float]:
    timer = StepCostModel(load_model(model), load_gpu(gpu),
                          EngineConfig(tensor_parallel_size=tp, **engine))  # type: ignore[arg-type]
    n, c = np.array(new, dtype=np.int64), np.array(ctx, dtype=np.int64)
    timer.step_time_s(n, c)
    assert timer.measured is not None and timer.ops is not None
    ops = op_times(timer.ops, timer.measured, timer.gemm_dtype, timer.aggregates(n, c))
    return {o.op: o.seconds for o in ops}


def test_mla_decode_core_reads_the_latent_below_the_datasheet_bandwidth() -> None:
    # DeepSeek-V3 (block fp8) TP8 on B200, fp8 KV, 64 decodes over 4,096 cached tokens: 61
    # layers read 64 x 4,096 x 576 B of latent = 9.21 GB; at 8 TB/s no faster than 1.15 ms.
    # The core was the bf16-GEMM MLA block less block-fp8 projections (2-3x slower at m=64
    # than the GEMMs inside the block): 0.617 ms, 14.9 TB/s.
    rows = _rows("deepseek-ai/DeepSeek-V3", "B200", 8, [1] * 64, [4096] * 64,
                 kv_cache_dtype="fp8")
    latent_bytes = 64 * 4096 * 576 * 61
    assert latent_bytes == 9_210_691_584
    assert rows["attention_mla"] >= latent_bytes / 8e12
    # block less bf16 projections: 3.36 ms (3.03 while q_a and kv_a were two GEMMs: the
    # fused one subtracts 0.33 ms less)
    assert 3.2e-3 < rows["attention_mla"] < 3.5e-3


def test_same_die_ops_never_slower_than_the_die_they_were_capped_at() -> None:
    # H200's cells are capped at H100's, GB200's at B200's (docs/silicon.md steps 5-6); the
    # lines fitted to them on each GPU alone were not: H200's sliding-window decode floor for
    # Phi-3-mini (one decode over 100 tokens, 32 layers) came out 0.363 ms against H100's
    # 0.325; DeepSeek-V3's block-fp8 q_b_proj at 8 tokens 376.5 against 362.3 us; Qwen3-Next's
    # GDN decode 201.4 against 198.0 us.
    phi = "microsoft/Phi-3-mini-4k-instruct"
    h100, h200 = (_rows(phi, g, 1, [1], [100]) for g in ("H100", "H200"))
    assert h100["attention_sliding"] * 1e3 == pytest.approx(0.3251, abs=1e-4)
    assert h200["attention_sliding"] <= h100["attention_sliding"]
    ds = "deepseek-ai/DeepSeek-V3"
    h100, h200 = (_rows(ds, g, 8, [1] * 8, [4000] * 8) for g in ("H100", "H200"))
    assert h200["mla_q_b_proj"] <= h100["mla_q_b_proj"]
    nxt = "Qwen/Qwen3-Next-80B-A3B-Thinking"
    h100, h200 = (_rows(nxt, g, 4, [1], [100]) for g in ("H100", "H200"))
    assert h200["gdn"] <= h100["gdn"]


def test_gb200_mla_prefill_step_never_slower_than_b200() -> None:
    # DeepSeek-V3 TP8, a 2,048-token chunk over 6,000 cached: B200 81.72 ms; GB200 was 81.51
    # against 81.06 (its faster bf16 projections subtracted from B200's capped MLA block left
    # a larger core). 81.06 -> 81.72: the MLA prefill core keeps the new tokens' kv_b_proj
    # (test_hunt14_mla).
    def step(gpu: str) -> float:
        timer = StepCostModel(load_model("deepseek-ai/DeepSeek-V3"), load_gpu(gpu),
                              EngineConfig(tensor_parallel_size=8))
        return timer.step_time_s(np.array([2048]), np.array([6000]))

    b200, gb200 = step("B200"), step("GB200")
    # 81.72 before q_a + kv_a fused; 80.04 with the all-reduces at the CUDA-graph rate
    # (a 2,048-token step runs eagerly: hunt 16); 81.77 -> 77.32 with block-fp8 GEMMs never
    # above bf16's (hunt 18: shared_gate_up_proj n=512 k=7,168 at m=2,048 was 47.6 us a
    # layer, the block kernel's floor, against 13.1 us bf16 for 15 GFLOP)
    assert b200 * 1e3 == pytest.approx(77.32, abs=0.01)
    assert gb200 <= b200


def test_explain_says_which_ops_stand_past_the_measured_range() -> None:
    # Llama-3.1-70B TP8, 64 prompts of 2,048 in one step: the GEMMs at m = 131,072 and the
    # all-reduces of 2 GiB lie past the H100 tables (GEMM m to 32,768), priced by the
    # roofline from the edge; the answer said nothing of it. The decode step's are measured.
    args = ["latency", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "-tp", "8", "--prompt",
            "2048", "--output", "2", "--batch", "64", "--explain"]
    out = run_cli(*args, "--json")
    assert out.code == 0, out.err
    pre, dec = out.json()["step_ops"]
    flagged = {o["op"] for o in pre["ops"] if o["extrapolated"]}
    assert flagged == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "all_reduce"}
    assert not any(o["extrapolated"] for o in dec["ops"])
    text = run_cli(*args).out
    assert "1.618 s *" in text and "* past the measured range" in text


WORKED = [  # docs/formulas-latency.md's three worked steps: (heading start, CLI args, step)
    ("**meta-llama/Llama-3.1-8B on H100-SXM-80GB TP1, one prefill step",
     ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "4096"], 0),
    ("**meta-llama/Llama-3.1-70B on H100-SXM-80GB TP8, one decode step",
     ["meta-llama/Llama-3.1-70B", "--gpu", "H100", "-tp", "8", "--prompt", "2048", "--batch",
      "64"], 1),
    ("**deepseek-ai/DeepSeek-V3 on H200-SXM-141GB TP8, one decode step",
     ["deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--prompt", "2048", "--batch",
      "64"], 1),
]


@pytest.mark.parametrize(("heading", "args", "step"), WORKED, ids=["8b", "70b", "v3"])
def test_docs_worked_steps_are_what_explain_prints(heading: str, args: list[str],
                                                   step: int) -> None:
    # the docs showed the 8B prefill's attention at 7.420 ms (kernels 77.129) and the 70B
    # decode's at 2.910 (kernels 12.249) where `latency --explain` prints 7.662 and 2.727
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "formulas-latency.md").read_text()
    block = text[text.index(heading):].split("\n\n")[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]
    out = run_cli("latency", *args, "--output", "2", "--explain", "--json")
    assert out.code == 0, out.err
    got = out.json()["step_ops"][step]
    want = [(o["op"], f"{o['seconds'] * 1e3:.3f} ms") for o in got["ops"]]
    want.append(("kernels", f"{got['kernels_s'] * 1e3:.3f} ms"))
    assert [(r[0], r[3]) for r in rows] == want


# ---- hypothesis: physics over the catalog's models and the measured GPUs

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DEPLOYMENTS = [("meta-llama/Llama-3.1-8B", 1), ("Qwen/Qwen3-30B-A3B", 1),
               ("meta-llama/Llama-3.1-70B", 8),
               ("Qwen/Qwen3-30B-A3B", 4), ("mistralai/Mixtral-8x7B-v0.1", 2),
               ("google/gemma-2-9b-it", 1), ("deepseek-ai/DeepSeek-V2-Lite", 1),
               ("deepseek-ai/DeepSeek-V3", 8), ("openai/gpt-oss-20b", 1),
               ("microsoft/Phi-3-mini-4k-instruct", 1), ("Qwen/Qwen3-Next-80B-A3B-Thinking", 4)]
_TIMERS: dict[tuple[str, int, str, str], StepCostModel] = {}
BATCH = st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 20000)), min_size=1,
                 max_size=24).map(lambda rs: ([1 if n % 3 == 0 else n for n, _ in rs],
                                              [c for _, c in rs]))
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _timer(model: str, tp: int, gpu: str, kv: str) -> StepCostModel:
    key = (model, tp, gpu, kv)
    if key not in _TIMERS:
        _TIMERS[key] = StepCostModel(load_model(model), load_gpu(gpu), EngineConfig(
            tensor_parallel_size=tp, kv_cache_dtype=kv))
    return _TIMERS[key]


def _ops(t: StepCostModel, new: list[int], ctx: list[int]) -> tuple[float, dict[str, float]]:
    n, c = np.array(new, dtype=np.int64), np.array(ctx, dtype=np.int64)
    step = t.step_time_s(n, c)
    assert t.measured is not None and t.ops is not None
    rows = op_times(t.ops, t.measured, t.gemm_dtype, t.aggregates(n, c))
    return step, {f"{o.op} {o.shape}": o.seconds for o in rows}


@SETTINGS
@given(dep=st.sampled_from(DEPLOYMENTS), pair=st.sampled_from([("H100", "H200"),
                                                               ("B200", "GB200")]),
       kv=st.sampled_from(["auto", "fp8"]), batch=BATCH)
def test_same_die_more_bandwidth_never_slower_op_by_op(dep: tuple[str, int],
                                                        pair: tuple[str, str], kv: str,
                                                        batch: tuple[list[int], list[int]]
                                                        ) -> None:
    slow, fast = (_ops(_timer(*dep, gpu, kv), *batch) for gpu in pair)
    assert fast[0] <= slow[0] * (1 + 1e-9)
    fast_ops, slow_ops = _mixing_as_one(fast[1]), _mixing_as_one(slow[1])
    for op, seconds in fast_ops.items():
        assert seconds <= slow_ops[op] * (1 + 1e-9) + 1e-12, op


def _mixing_as_one(rows: dict[str, float]) -> dict[str, float]:
    """The sequence-mixing rows split one roofline, max(all scoring, all KV reads), by the
    side that binds over the whole step (which can differ between two GPUs): their sum."""
    out: dict[str, float] = {}
    for op, seconds in rows.items():
        key = "sequence mixing" if op.startswith(("attention", "gdn")) else op
        out[key] = out.get(key, 0.0) + seconds
    return out


@SETTINGS
@given(dep=st.sampled_from(DEPLOYMENTS), gpu=st.sampled_from(
    ["H100", "H200", "B200", "A100", "L40S", "L4", "MI300X", "H100-PCIe-80GB"]),
    kv=st.sampled_from(["auto", "fp8"]), batch=BATCH, which=st.integers(0, 99),
    grow=st.sampled_from(["new", "ctx", "request"]), by=st.integers(1, 4000))
def test_more_work_is_never_faster(dep: tuple[str, int], gpu: str, kv: str,
                                   batch: tuple[list[int], list[int]], which: int, grow: str,
                                   by: int) -> None:
    t = _timer(*dep, gpu, kv)
    new, ctx = batch
    i = which % len(new)
    # a 1-token request with nothing cached is a first forward pass (a prefill step, which
    # pays the profile's prefill overhead: has_prefill); caching one token makes it a decode,
    # a step of another kind (0.004 s less under the default profile: 10.41 -> 6.41 ms for
    # Llama-3.1-8B on H100), so that growth is not "more work of the same step"
    assume(not (grow == "ctx" and new[i] == 1 and ctx[i] == 0))
    base = t.step_time_s(np.array(new), np.array(ctx))
    n2, c2 = list(new), list(ctx)
    if grow == "new":
        n2[i] += by
    elif grow == "ctx":
        c2[i] += by
    else:
        n2, c2 = [*n2, 1], [*c2, by]
    assert t.step_time_s(np.array(n2), np.array(c2)) >= base * (1 - 1e-12)


@SETTINGS
@given(dep=st.sampled_from(DEPLOYMENTS), gpu=st.sampled_from(
    ["H100", "H200", "B200", "GB200", "A100", "L40S"]), kv=st.sampled_from(["auto", "fp8"]),
    b=st.integers(1, 256), ctx=st.integers(128, 32768))
def test_no_decode_attention_row_reads_faster_than_the_datasheet(
        dep: tuple[str, int], gpu: str, kv: str, b: int, ctx: int) -> None:
    t = _timer(*dep, gpu, kv)
    _, rows = _ops(t, [1] * b, [ctx] * b)
    assert t.ops is not None
    width = 1 if kv == "fp8" else 2
    for a in t.ops.attention:
        per_token = (a.latent if a.kind == "mla"
                     else a.kv_heads * (a.head_dim + a.v_head_dim)) * width
        seen = min(ctx, a.window) if a.window else ctx
        row = next(s for op, s in rows.items() if op.startswith(f"attention_{a.kind} "))
        # L40S's fp8 line for Llama-3.1-70B TP8 read at 1.11x its 864 GB/s (a free slope)
        assert b * seen * per_token * a.count / row <= t.hardware.mem_bw_bytes_per_s * 1.000001


def test_l40s_fp8_decode_line_reads_no_faster_than_864_gbps() -> None:
    # Llama-3.1-70B TP8 on L40S, fp8 KV: 1 KV head x (128 + 128) x 1 B = 256 B per cached
    # token per layer, 80 layers: at 864 GB/s at least 80 x 256 / 864e9 = 23.70 ns per token
    # (the free least-squares slope was 21.37 ns: 1.11x the datasheet)
    timer = StepCostModel(load_model("meta-llama/Llama-3.1-70B"), load_gpu("L40S"),
                          EngineConfig(tensor_parallel_size=8, kv_cache_dtype="fp8"))
    assert timer.measured is not None and timer.measured.full is not None
    assert timer.measured.full.per_context_s * 1e9 == pytest.approx(80 * 256 / 864, rel=1e-9)
