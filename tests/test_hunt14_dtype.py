"""hunt14 (dtype): the compute dtype, the KV dtype and the roofline under pipeline
parallelism, hand-checked against vLLM 0.11 and the datasheets."""

from __future__ import annotations

import pytest

from kvplan.analysis.plan.space import check_flag_values
from kvplan.costs.step.constants import step_constants
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli


def test_roofline_pp2_reads_and_multiplies_the_lm_head_once_a_step() -> None:
    # vLLM runs the lm_head on the last PP stage only; the roofline prices the fullest stage
    # pp times, so that stage carries 1/pp of the head (as the measured path's
    # StageOps.lm_head_share). Llama-3.1-8B PP2, bf16: a layer holds q, o 4096 x 4096,
    # k, v 1024 x 4096, gate/up/down 3 x 14336 x 4096 and 2 norms of 4096 = 218,112,000
    # values; 16 layers x 2 B = 6,979,584,000 B, + half the 128,256 x 4,096 x 2 B head
    # (1,050,673,152 / 2 = 525,336,576 B) = 7,504,920,576 B: the priced stage is stage 0 (the
    # stages tie; ops.priced_stage), whose ops the step prices; the final norm (8,192 B) is on
    # stage 1 (hunt 19: 7,504,928,768 B, stage 1's bytes beside stage 0's ops).
    # Before: the larger stage whole (16 layers + norm + the whole head = 8,030,265,344 B),
    # i.e. the head read twice a step (and its FLOPs, 2 x 128,256 x 4,096, charged twice).
    layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    golden = 16 * layer * 2 + 128256 * 4096 * 2 // 2
    assert golden == 7_504_920_576
    k = step_constants(load_model("meta-llama/Llama-3.1-8B"),
                       EngineConfig(pipeline_parallel_size=2))
    assert k.weight_bytes == golden
    assert k.lm_head_flops_per_request == 2.0 * 128256 * 4096 / 2


def test_kv_cache_dtype_float32_refused_as_vllm_refuses_it() -> None:
    # vLLM 0.11 vllm/config/cache.py CacheDType: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2,
    # fp8_inc, fp8_ds_mla (later versions add float16 and scaled formats, never float32);
    # a float32 cache is what auto stores under --dtype float32. Before: accepted, and
    # Llama-3.1-8B on an H100 got 210,416 tokens at 256 KiB a token.
    for name in ("float32", "fp32", "float"):
        out = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--kv-cache-dtype", name)
        assert out.code == 2 and out.err.count("\n") == 1
        assert out.err.startswith(f"error: --kv-cache-dtype {name}: vLLM has no float32")
    with pytest.raises(InputError):
        check_flag_values({}, ["auto", "float32"], [None], "round-robin")
    # --dtype float32 keeps auto's 4-byte cache: a layer's block of 16 tokens holds
    # 16 x 2 (K, V) x 8 heads x 128 x 4 B = 131,072 B
    wide = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--dtype", "float32", "--json")
    assert wide.code == 0, wide.err
    assert wide.json()["page_size_bytes"] == 131_072


def _ttft_s(gpu: str, *flags: str) -> float:
    out = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--prompt", "2000",
                  "--output", "20", "--batch", "8", "--json", *flags)
    assert out.code == 0, out.err
    return float(out.json()["ttft_s"])


def test_dtype_float32_runs_fp32_gemms_at_the_fp32_rate() -> None:
    # PyTorch leaves torch.backends.cuda.matmul.allow_tf32 False and vLLM 0.11 sets no TF32,
    # so --dtype float32 GEMMs are IEEE fp32 SGEMMs on the CUDA cores: H100 SXM's datasheet
    # FP32 67 TFLOP/s against 989.4 bf16 (14.8x). Before, the bf16 kernel tables priced
    # them: TTFT of 8 x 2,000 tokens 321 ms at float32 and at bf16 alike; now ~4.6 s.
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.hardware import load_gpu

    m, h100 = load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100")
    t = StepCostModel(m, h100, EngineConfig(dtype="float32"))
    assert t.measured is None and t.constants.compute_precision == "float32"
    assert t._flops_rate == 67e12 * t.profile.compute_eff
    # hidden states (and TP all-reduces) in fp32: 2 x 4,096 x 4 B x 32 layers a token
    assert t.constants.activation_bytes_per_token == 2 * 4096 * 4 * 32
    assert t.constants.allreduce_bytes_per_token == 4096 * 4
    assert _ttft_s("H100", "--dtype", "float32") > 10 * _ttft_s("H100")


def test_dtype_float32_refused_on_a_gpu_without_an_fp32_rate() -> None:
    # TPU v5e publishes no fp32 matmul rate; falling back to its bf16 197 TFLOP/s would
    # price fp32 math at a 16-bit rate (before: Llama-3.2-1B priced as bf16 compute)
    out = run_cli("latency", "meta-llama/Llama-3.2-1B", "--gpu", "TPU-v5e", "--prompt", "100",
                  "--output", "10", "--dtype", "float32")
    assert out.code == 2
    assert "has no peak float32 FLOP/s: give fp32_tflops_dense" in out.err


def test_quantized_weights_refuse_the_dtypes_vllm_refuses() -> None:
    # vLLM 0.11 VllmConfig._get_quantization_config: the served dtype must be in the
    # format's get_supported_act_dtypes (fp8: bf16, fp16; Mxfp4Config: bf16 only), or
    # "ValueError: torch.float16 is not supported for quantization method mxfp4".
    # Before: gpt-oss-20b --dtype float16 fitted 15.76x, Llama-3.1-8B -q fp8 --dtype
    # float32 229,376 tokens.
    for args in (("openai/gpt-oss-20b", "--dtype", "float16"),
                 ("openai/gpt-oss-20b", "--dtype", "float32"),
                 ("meta-llama/Llama-3.1-8B", "-q", "fp8", "--dtype", "float32")):
        out = run_cli("capacity", *args)
        assert out.code == 2 and out.err.count("\n") == 1, args
        assert "is not supported for quantization method" in out.err
    assert run_cli("capacity", "meta-llama/Llama-3.1-8B", "-q", "fp8", "--dtype",
                   "float16").code == 0


def test_pp_hop_sends_hidden_states_and_residual() -> None:
    # vLLM's decoder models end a non-last PP stage with IntermediateTensors({"hidden_states",
    # "residual"}): 2 tensors x 4,096 x 2 B = 16,384 B a token of Llama-3.1-8B cross each hop
    # (before: 8,192 B, the hidden states alone), on the roofline and the measured path.
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.hardware import load_gpu

    m = load_model("meta-llama/Llama-3.1-8B")
    for gpu in ("L40S", "L4"):
        t = StepCostModel(m, load_gpu(gpu), EngineConfig(pipeline_parallel_size=2))
        assert t._co.p2p_s * t._link == pytest.approx(16_384, rel=1e-12)


def test_dp_ep_float32_refusal_names_the_precision_not_the_gpu() -> None:
    # DP / EP steps need the measured MoE tables, which hold no fp32 kernels; the refusal
    # said "which H100-SXM-80GB lacks", but the H100 has tables: the precision lacks them.
    out = run_cli("latency", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2",
                  "--enable-expert-parallel", "--prompt", "100", "--output", "5",
                  "--dtype", "float32")
    assert out.code == 2 and out.err.count("\n") == 1
    assert "hold no float32 kernels" in out.err and "lacks" not in out.err
