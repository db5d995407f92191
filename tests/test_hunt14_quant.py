"""Weight quantization formats priced in step times: weight-only kernels (AWQ / GPTQ Marlin,
fp8 Marlin on Ampere, nvfp4 Marlin before Blackwell) read their quantized bytes; int8 W8A8
runs on int8 tensor cores (hunt 14, ``quant``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.kernels.gemm import served_gemm_s
from kvplan.costs.step.explain import explain_steps
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

LLAMA8 = "meta-llama/Llama-3.1-8B"
GPUS = ("A100-80GB-SXM", "H100-SXM-80GB", "H200-SXM-141GB", "L40S", "B200-SXM-180GB", "GB200")


def _decode_rows(gpu: str, quantization: str | None) -> dict[str, float]:
    """Seconds of each op of one decode step (batch 1, 1,024 cached), Llama-3.1-8B TP1."""
    t = StepCostModel(load_model(LLAMA8), load_gpu(gpu), EngineConfig(quantization=quantization))
    _, dec = explain_steps(t, 1, 1024, 8192)
    return {o.op: o.seconds for o in dec.ops}


def test_awq_decode_gate_up_reads_the_int4_bytes_h100() -> None:
    """Llama-3.1-8B gate_up_proj at m = 1 on H100: n = 28,672, k = 4,096.
    AWQ (4 bits, fp16 scale + 4-bit zero per 128 inputs):
      values 28,672 x 4,096 / 2 = 58,720,256 B; groups 28,672 x 32 = 917,504:
      scales 1,835,008 B, zeros 458,752 B -> W_q = 61,014,016 B.
    Bytes moved at m = 1: 16-bit 2 x 28,672 x 4,096 + 2 x (4,096 + 28,672) = 234,946,560;
      AWQ W_q + 2 x 4,096 + 2 x 28,672 = 61,079,552.
    Both memory-bound (F = 234,881,024 FLOP: 0.24 us at 989.4 TFLOP/s, against 70 us at
    3.35 TB/s), so AWQ = bf16 x 61,079,552 / 234,946,560 = bf16 x 0.25997.
    Before: the bf16 GEMM's time itself (16-bit weights read)."""
    bf16 = _decode_rows("H100", None)["gate_up_proj"]
    awq = _decode_rows("H100", "awq")["gate_up_proj"]
    assert bf16 == pytest.approx(
        32 * float(served_gemm_s("H100-SXM-80GB", np.array([1]), 28672, 4096, "bfloat16")[0]))
    assert awq == pytest.approx(bf16 * 61_079_552 / 234_946_560, rel=1e-9)


def test_fp8_on_a100_runs_weight_only_marlin() -> None:
    """A100 has no fp8 tensor cores: vLLM's Fp8LinearMethod runs fp8 Marlin (weight-only).
    o_proj m = 1, n = k = 4,096: fp8 = 16,777,216 B + one fp32 scale = 16,777,220 B; moved
    16,777,220 + 2 x 4,096 + 2 x 4,096 = 16,793,604 B against bf16's 33,554,432 + 16,384 =
    33,570,816 B (memory-bound: 0.1 us of compute at 312 TFLOP/s, 16 us at 2.039 TB/s)."""
    bf16 = _decode_rows("A100-80GB-SXM", None)["o_proj"]
    fp8 = _decode_rows("A100-80GB-SXM", "fp8")["o_proj"]
    assert fp8 == pytest.approx(bf16 * 16_793_604 / 33_570_816, rel=1e-9)


def test_weight_only_prefill_stays_at_the_16_bit_rate() -> None:
    """A 1,024-token prefill chunk is compute-bound on every GPU (gate_up: 2 x 1,024 x 28,672
    x 4,096 FLOP over 2 x 28,672 x 4,096 + 2 x 1,024 x 32,768 B = 808 FLOP/B, above H100's
    ridge 295): the weight-only kernel multiplies in 16-bit, so it takes the bf16 time."""
    model = load_model(LLAMA8)
    for quant in ("awq", "gptq"):
        a = StepCostModel(model, load_gpu("H100"), EngineConfig())
        b = StepCostModel(model, load_gpu("H100"), EngineConfig(quantization=quant))
        pre_a, _ = explain_steps(a, 1, 1024, 8192)
        pre_b, _ = explain_steps(b, 1, 1024, 8192)
        rows_a = {o.op: o.seconds for o in pre_a.ops}
        rows_b = {o.op: o.seconds for o in pre_b.ops}
        assert rows_b["gate_up_proj"] == pytest.approx(rows_a["gate_up_proj"], rel=1e-12)


@pytest.mark.parametrize("gpu", GPUS)
def test_w4a16_decode_never_slower_and_reads_fewer_bytes(gpu: str) -> None:
    """Physics: a w4a16 (GPTQ 4-bit g128) decode step at batch 1 reads about a quarter of the
    bf16 weights, its compute is the same 16-bit math: never slower than bf16's, and its
    linear layers at most 0.3 x bf16's (4.125 / 16 bits = 0.258 plus activations)."""
    model = load_model(LLAMA8)
    step = {q: StepCostModel(model, load_gpu(gpu), EngineConfig(quantization=q)).step_time_s(
        np.array([1]), np.array([1024])) for q in (None, "gptq")}
    assert step["gptq"] <= step[None]
    bf16, q = _decode_rows(gpu, None), _decode_rows(gpu, "gptq")
    linear = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
    assert sum(q[o] for o in linear) <= 0.3 * sum(bf16[o] for o in linear)


# ------------------------------------------- int8 W8A8 (compressed-tensors) on int8 tensor cores

# W8A8_INT8: neuralmagic/Meta-Llama-3.1-*-Instruct-quantized.w8a8's quantization_config


def _w8a8_rows(gpu: str) -> tuple[dict[str, float], dict[str, float], StepCostModel]:
    """(prefill rows of one 1,024-token prompt, decode rows, timer) of a W8A8 Llama-3.1-8B."""
    from dataclasses import replace

    model = replace(load_model(LLAMA8), quantization="compressed-tensors",
                    quant_layout=("w8a8_int8", 8, -1, 0))
    t = StepCostModel(model, load_gpu(gpu), EngineConfig())
    pre, dec = explain_steps(t, 1, 1024, 8192)
    return {o.op: o.seconds for o in pre.ops}, {o.op: o.seconds for o in dec.ops}, t


def _rows(gpu: str, quantization: str | None) -> tuple[dict[str, float], dict[str, float]]:
    t = StepCostModel(load_model(LLAMA8), load_gpu(gpu), EngineConfig(quantization=quantization))
    pre, dec = explain_steps(t, 1, 1024, 8192)
    return {o.op: o.seconds for o in pre.ops}, {o.op: o.seconds for o in dec.ops}


def test_w8a8_int8_on_hopper_runs_the_fp8_cutlass_rate() -> None:
    """H100: int8 dense 1,978.9 TOPS = fp8 1,978.9 TFLOP/s (2 x bf16's 989.4); vLLM runs
    W8A8 int8 on CUTLASS scaled_mm, the per-tensor fp8 table's kernel family, with the same
    1-byte operands: every linear op takes the fp8 table's time (before: bf16's)."""
    pre, dec, t = _w8a8_rows("H100")
    pre8, dec8 = _rows("H100", "fp8")
    assert t.constants.compute_precision == "int8"
    for op in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert pre[op] == pre8[op] and dec[op] == dec8[op]
    assert pre["gate_up_proj"] < 0.7 * _rows("H100", None)[0]["gate_up_proj"]


def test_w8a8_int8_on_a100_doubles_the_bf16_rate_and_halves_the_bytes() -> None:
    """A100: int8 624 TOPS = 2 x bf16 312 TFLOP/s; no fp8 table. o_proj, n = k = 4,096:
    prefill m = 1,024: F = 2 x 1,024 x 4,096^2 = 34,359,738,368 FLOP: 110.1 us at 312 T against
    B_16 = 33,554,432 + 2 x 1,024 x 8,192 = 50,331,648 B at 2.039 TB/s = 24.7 us; int8 55.1 us
    at 624 T against 16,793,600 + 1,024 x (4,096 + 8,192) = 29,376,512 B = 14.4 us: ratio 0.5.
    Decode m = 1: memory-bound both; W_q = 16,777,216 + 4,096 x 4 (fp32 scale per row) =
    16,793,600; moved 16,793,600 + 4,096 + 8,192 = 16,805,888 B against 33,570,816 B."""
    pre, dec, _ = _w8a8_rows("A100-80GB-SXM")
    pre16, dec16 = _rows("A100-80GB-SXM", None)
    assert pre["o_proj"] == pytest.approx(0.5 * pre16["o_proj"], rel=1e-9)
    assert dec["o_proj"] == pytest.approx(dec16["o_proj"] * 16_805_888 / 33_570_816, rel=1e-9)


def test_w8a8_int8_roofline_runs_at_the_int8_peak() -> None:
    """A10G (no tables: the roofline): int8 250 TOPS, bf16 125 TFLOP/s, the same bandwidth
    and efficiencies: the W8A8 ridge point is twice bf16's."""
    from dataclasses import replace

    model = replace(load_model(LLAMA8), quantization="compressed-tensors",
                    quant_layout=("w8a8_int8", 8, -1, 0))
    w8a8 = StepCostModel(model, load_gpu("A10G"), EngineConfig())
    bf16 = StepCostModel(load_model(LLAMA8), load_gpu("A10G"), EngineConfig())
    assert w8a8.measured is None
    assert w8a8.ridge_point == pytest.approx(2 * bf16.ridge_point, rel=1e-12)


def test_compressed_tensors_moe_prices_without_a_resolved_deployment() -> None:
    """StepCostModel(model, gpu, engine) resolves the weight format itself; for a MoE
    checkpoint the experts' kernel family was resolved without the compressed-tensors scheme
    (``quant_layout``) and raised UnknownNameError ("unknown quant_method
    'compressed-tensors'"). A W8A8 Qwen3-30B-A3B now prices like the resolved path."""
    from dataclasses import replace

    from kvplan.costs.memory.resolved import resolve

    model = replace(load_model("Qwen/Qwen3-30B-A3B"), quantization="compressed-tensors",
                    quant_layout=("w8a8_int8", 8, -1, 0))
    gpu, engine = load_gpu("H100"), EngineConfig()
    n, c = np.array([1]), np.array([1024])
    own = StepCostModel(model, gpu, engine).step_time_s(n, c)
    given = StepCostModel(model, gpu, engine, resolved=resolve(model, gpu, engine))
    assert own == given.step_time_s(n, c)


# ------------------------------------------- 4-bit AWQ / GPTQ experts run Marlin MoE (int4_wo)

def _experts_decode_s(gpu: str, quantization: str | None) -> tuple[float, StepCostModel]:
    t = StepCostModel(load_model("Qwen/Qwen3-30B-A3B"), load_gpu(gpu),
                      EngineConfig(quantization=quantization))
    _, dec = explain_steps(t, 1, 1024, 8192)
    return next(o.seconds for o in dec.ops if o.op == "moe_experts"), t


def test_gptq_int4_experts_read_the_marlin_moe_table_h100() -> None:
    """vLLM runs 4-bit GPTQ / AWQ MoE experts on Marlin MoE (GPTQMarlinMoEMethod,
    AWQMoEMethod: fused_marlin_moe), which H100's MoE table measures as int4_wo
    (CompressedTensorsWNA16MarlinMoE). Qwen3-30B-A3B: 48 MoE layers, one decode token:
    48 x the int4_wo row at 1 token (before: the bf16 Triton row, 16-bit experts read)."""
    from dataclasses import replace

    from kvplan.costs import kernels as kn
    from kvplan.costs.step.tables import moe_times

    got, t = _experts_decode_s("H100", "gptq")
    assert t.ops is not None and t.ops.moe is not None and t.ops.moe.dtype == "int4_wo"
    marlin = replace(t.ops.moe, dtype="int4_wo")
    assert got == pytest.approx(
        48 * float(moe_times("H100-SXM-80GB", marlin, np.array([1]), "bfloat16")[0]), rel=1e-12)
    src = kn.moe("H100-SXM-80GB", 1, hidden=2048, inter=768, num_experts=128, topk=8,
                 dtype="int4_wo").source
    assert any("marlin" in k for k in src.kernels)


@pytest.mark.parametrize("gpu", GPUS)
def test_int4_experts_decode_faster_than_bf16(gpu: str) -> None:
    """Physics: at one decode token the experts are weight-bound; 4-bit experts read ~0.27 x
    the bytes of bf16 ones, so they take at most half the bf16 experts' time on every bundled
    GPU (measured Marlin MoE / bf16 at this shape: 0.21 H100 - 0.40 GB200)."""
    bf16, _ = _experts_decode_s(gpu, None)
    for quant in ("gptq", "awq"):
        assert _experts_decode_s(gpu, quant)[0] <= 0.5 * bf16


@pytest.mark.parametrize("gpu", ("A100-80GB-SXM", "H100-SXM-80GB", "H200-SXM-141GB", "L40S"))
def test_nvfp4_experts_without_fp4_tensor_cores_run_marlin_moe(gpu: str) -> None:
    """Before Blackwell vLLM runs nvfp4 experts on Marlin MoE (ModelOptNvFp4FusedMoE's
    ``use_marlin``: no CUTLASS fp4, ``prepare_moe_fp4_layer_for_marlin``): 4-bit weights,
    16-bit activations - the fused Marlin MoE kernel the tables measure as int4_wo. So the
    experts take the 4-bit GPTQ experts' time (before: the bf16 table, 16-bit weights read:
    H100 one decode token 2.36 ms of experts, now 0.50 ms)."""
    fp4, _ = _experts_decode_s(gpu, "modelopt_fp4")
    assert fp4 == _experts_decode_s(gpu, "gptq")[0]
    assert fp4 <= 0.5 * _experts_decode_s(gpu, None)[0]


# ------------------------------------- fp8 on GPUs without tables: the donor's fp8 efficiency

def test_fp8_roofline_efficiency_is_the_donors_fp8_gemms() -> None:
    """A GPU without tables runs the roofline at its donor's efficiency. fp8 took the donor's
    bf16 GEMM efficiency (H100: 741 TFLOP/s median over 4,096-16,384 cubed GEMMs / 989.4 =
    0.749), though the donor's fp8 GEMMs reach 1,170 / 1,978.9 = 0.591 of their rate: H100-PCIe
    fp8 was priced at 1,513 x 0.749 = 1,133 TFLOP/s, near the SXM's measured 1,170 on 1.31x
    its datasheet. Now 1,513 x 0.591 = 894 TFLOP/s."""
    from kvplan.costs.kernels import gemm
    from kvplan.costs.kernels import nearest_measured_gpu as nearest
    from kvplan.costs.kernels.donor import GEMM_SIZES

    m, n, k = (a.ravel() for a in np.meshgrid(GEMM_SIZES, GEMM_SIZES, GEMM_SIZES, indexing="ij"))
    sxm = float(np.median(2.0 * m * n * k / gemm("H100-SXM-80GB", m, n, k, "fp8").seconds))
    assert nearest("H100-PCIe-80GB", "fp8").compute == pytest.approx(sxm / 1978.9e12, rel=1e-9)
    assert nearest("H100-PCIe-80GB", "fp8").compute == pytest.approx(0.591, abs=0.001)
    assert nearest("H100-PCIe-80GB").compute == pytest.approx(0.749, abs=0.001)  # bf16 kept
    assert nearest("L4", "fp8").compute < nearest("L4").compute  # L40S: 0.476 against 0.587


def test_h100_pcie_fp8_prefill_slower_than_the_sxm() -> None:
    """Physics: H100-PCIe has 1,513 fp8 TFLOP/s and 2.0 TB/s against the SXM's 1,978.9 and
    3.35: its fp8 prefill step cannot be as fast as the SXM's measured one (before: the
    roofline ran faster and the same-die floor gave exactly the SXM's time, TTFT 15.67 ms
    for both on Llama-3.1-8B, 1,024 tokens; now 18.23 ms on the PCIe)."""
    model, engine = load_model(LLAMA8), EngineConfig(quantization="fp8")
    n, c = np.array([1024]), np.array([0])
    pcie = StepCostModel(model, load_gpu("H100-PCIe-80GB"), engine).step_time_s(n, c)
    sxm = StepCostModel(model, load_gpu("H100"), engine).step_time_s(n, c)
    assert pcie > 1.1 * sxm


# ------------------------------ 8-bit MoE kernels no table measures: fp8 Marlin MoE, int8 MoE

def test_fp8_experts_on_a100_read_one_byte_a_weight() -> None:
    """A100 has no fp8 tensor cores: vLLM's Fp8MoEMethod runs fp8 Marlin MoE (1-byte weights,
    16-bit math). Qwen3-30B-A3B (E 128, top-8, hidden 2,048, inter 768), one decode token:
    the tables' routing touches min(1, 8 / 128) = 1/16 of the experts' 16-bit weights,
    128 x 3 x 2,048 x 768 x 2 B / 16 = 75,497,472 B, plus 4 x 2,048 B of hidden states in
    and out: 75,505,664 B against 37,748,736 + 8,192 = 37,756,928 B at fp8; 75,497,472 FLOP
    take 0.24 us at 312 TFLOP/s, the bytes 37 us at 2.039 TB/s: memory-bound, so the fp8
    experts are the bf16 experts x 37,756,928 / 75,505,664 (before: the bf16 time itself)."""
    bf16, _ = _experts_decode_s("A100-80GB-SXM", None)
    fp8, _ = _experts_decode_s("A100-80GB-SXM", "fp8")
    assert fp8 == pytest.approx(bf16 * 37_756_928 / 75_505_664, rel=1e-9)


def test_8bit_experts_on_a100_never_slower_than_bf16() -> None:
    """Physics: fp8 Marlin MoE and int8 W8A8 MoE read half the bytes of bf16 experts and
    multiply at the bf16 (fp8 Marlin) or twice the bf16 rate (int8, 624 TOPS): no token count
    makes them slower than the bf16 experts on A100."""
    from kvplan.costs import kernels as kn

    shape = {"hidden": 2048, "inter": 768, "num_experts": 128, "topk": 8}
    tokens = np.array([1, 16, 256, 4096, 16384])
    bf16 = kn.moe("A100-80GB-SXM", tokens, dtype="bfloat16", **shape).seconds
    for dtype in ("fp8", "fp8_block", "int8"):
        got = kn.moe("A100-80GB-SXM", tokens, dtype=dtype, **shape).seconds
        assert np.all(got <= bf16) and got[0] < 0.51 * bf16[0], dtype


@pytest.mark.parametrize("gpu", ("H100-PCIe-80GB", "A100-40GB-SXM"))
def test_w4a16_decode_on_a_floored_roofline_gpu(gpu: str) -> None:
    """A GPU without tables whose measured donor beats it on every figure is never priced
    faster than the donor's measured step (H100-PCIe under H100-SXM, A100-40GB under
    A100-80GB). That floor priced the donor's GEMMs at bf16 weights, so an AWQ decode on the
    PCIe card was floored at the SXM's bf16-weight step: TPOT 7.21 ms against 9.98 ms bf16
    (Llama-3.1-8B, 1,024 in / 128 out; A100-40GB 11.82 against 13.94). The donor's
    weight-only GEMMs now read the AWQ bytes: 4.40 and 5.76 ms. Physics: the weights are
    0.27x the bytes, so the AWQ decode step is at most 0.6x bf16's."""
    model, hw = load_model(LLAMA8), load_gpu(gpu)
    n, c = np.array([1]), np.array([1024])
    bf16 = StepCostModel(model, hw, EngineConfig()).step_time_s(n, c)
    awq = StepCostModel(model, hw, EngineConfig(quantization="awq")).step_time_s(n, c)
    assert awq <= 0.6 * bf16


def test_explain_names_the_table_w8a8_int8_stands_on() -> None:
    """--explain's basis line said nothing of int8 W8A8 being read off the fp8 table (H100)
    or derived from bf16 (A100)."""
    from kvplan.costs.step.explain import kernel_basis

    _, _, h100 = _w8a8_rows("H100")
    _, _, a100 = _w8a8_rows("A100-80GB-SXM")
    assert "int8 W8A8 GEMMs on its per-tensor fp8 table" in kernel_basis(h100)
    assert "int8 W8A8 GEMMs: its bfloat16 GEMMs x the datasheet roofline ratio" in (
        kernel_basis(a100))
