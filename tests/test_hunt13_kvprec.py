"""hunt13 (kvprec): --kv-cache-dtype as a lever of its own, against vLLM's attention backends."""

from __future__ import annotations

import pytest

from tests.conftest import assert_one_line_error, run_cli


@pytest.mark.parametrize("gpu", ["A100-80GB", "L40S"])
def test_mla_fp8_cache_refused_where_vllm_runs_triton_mla(gpu: str) -> None:
    # vLLM 0.11 picks FlashMLA on Hopper, CUTLASS MLA on Blackwell (block 128), else Triton
    # MLA, whose __init__ raises "TritonMLA V1 with FP8 KV cache not yet supported". kvplan
    # printed 2,829,104 tokens (A100) for a server that does not start.
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", gpu,
                "--kv-cache-dtype", "fp8")
    assert_one_line_error(r)
    assert "TRITON_MLA" in r.err and "--kv-cache-dtype auto" in r.err


def test_mla_fp8_cache_still_accepted_on_hopper_flashmla() -> None:
    # FlashMLA reads an fp8 latent (descale_k): 27 layers x 576 B = 15,552 B/token, blocks of 64
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H100",
                "--kv-cache-dtype", "fp8", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["block_size"] == 64
    assert d["num_blocks"] == d["available_kv_bytes"] // (64 * 27 * 576)


@pytest.mark.parametrize("dtype", ["int8_per_token_head", "fp8_per_token_head", "nvfp4"])
def test_mla_cache_refuses_formats_no_mla_backend_stores(dtype: str) -> None:
    # No vLLM MLA backend lists these (FlashMLA: auto/fp8/fp8_e4m3; CUTLASS MLA: auto/
    # bfloat16/fp8/fp8_e4m3); kvplan priced DeepSeek-V3's latent at 580 B (int8) / 324 B.
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V3", "--gpu", "B200",
                "--tensor-parallel-size", "8", "--kv-cache-dtype", dtype)
    assert_one_line_error(r)
    assert "MLA" in r.err


@pytest.mark.parametrize("gpu", ["H100", "A100-80GB", "L40S"])
def test_nvfp4_cache_refused_off_blackwell(gpu: str) -> None:
    # kvplan's own words ("needs Blackwell-class FP4 support") and vLLM's nvfp4 cache kernel
    # (SM100 / SM120 builds only) agree; capacity priced H100 at 1,496,288 tokens.
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--kv-cache-dtype", "nvfp4")
    assert_one_line_error(r)
    assert "Blackwell" in r.err


def test_nvfp4_cache_priced_on_blackwell() -> None:
    # 32 layers x 8 heads x 2 x (64 + 8) B = 36,864 B/token, blocks of 16
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "B200",
                "--kv-cache-dtype", "nvfp4", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["num_blocks"] == d["available_kv_bytes"] // (16 * 36_864)


def _per_context_s(gpu: str, kv_cache_dtype: str) -> float:
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    m = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu(gpu),
                      EngineConfig(kv_cache_dtype=kv_cache_dtype))
    full = m._silicon(64).full
    assert full is not None
    return full.per_context_s


def test_decode_attention_reads_each_precisions_own_bytes() -> None:
    # The kernel tables hold bf16 and fp8 caches; nvfp4 (value_bits 4) was priced on the
    # bf16 line (2 B/value: Llama-3.1-8B B200, 32 x 32,000 tokens, TPOT 25.89 ms = auto's,
    # fp8 17.06 ms). nvfp4 reads 64 + 8 B per 128 values: the fp8 line x 72/128; float32
    # reads 4 B/value: the bf16 line x 2; a per-token-head format the fp8 line x 132/128.
    fp8 = _per_context_s("B200", "fp8")
    assert _per_context_s("B200", "nvfp4") == pytest.approx(fp8 * 0.5625, rel=1e-12)
    assert _per_context_s("B200", "int8_per_token_head") == pytest.approx(fp8 * 132 / 128)
    # float32 (auto under --dtype float32, which the roofline prices: no table holds fp32
    # GEMMs) would read the bf16 line at 2x
    from kvplan.costs.kernels import kv_table

    assert kv_table("float32", 128) == ("bfloat16", 2.0)


def test_nvfp4_tpot_below_fp8_on_blackwell() -> None:
    def tpot(dtype: str) -> float:
        r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "B200", "--kv-cache-dtype",
                    dtype, "--prompt", "32000", "--output", "100", "--batch", "32", "--json")
        assert r.code == 0, r.err
        return float(r.json()["tpot_s"])

    assert tpot("nvfp4") < tpot("fp8") < tpot("auto")


def test_precision_risk_words_say_what_vllm_does_and_no_more() -> None:
    # Before: fp8 "small accuracy loss ... more on long-context retrieval" and per-token-head
    # "accuracy close to fp16" were claims with no source; the default scale of 1.0 was not
    # tied to --calculate-kv-scales; bfloat16 was "Lossless" even for an fp16 model.
    from kvplan.specs.kv_precision import PRECISIONS

    fp8 = PRECISIONS["fp8_e4m3"].risk
    assert "--calculate-kv-scales" in fp8 and "1.0" in fp8 and "+-448" in fp8
    assert "long-context" not in fp8
    for name in ("int8_per_token_head", "fp8_per_token_head"):
        assert "close to fp16" not in PRECISIONS[name].risk
    assert "Lossless" not in PRECISIONS["bfloat16"].risk
    r = run_cli("kv", "meta-llama/Llama-3.1-8B", "--kv-cache-dtype", "fp8", "--json")
    assert r.json()["precision_risk"] == fp8


def test_levers_offer_an_mla_model_only_formats_an_mla_backend_stores() -> None:
    # DeepSeek-V3's lever table listed int8/fp8_per_token_head (580 B/layer) and nvfp4
    # (324 B/layer: 61 x 324 = 19,764 B/token) latents that no vLLM MLA backend stores.
    r = run_cli("levers", "deepseek-ai/DeepSeek-V3", "--batch", "8", "--context", "4096",
                "--json")
    assert r.code == 0, r.err
    dtypes = [row["precision"] for row in r.json()["levers"]]
    assert "fp8_e4m3" in dtypes
    assert not {"nvfp4", "int8_per_token_head", "fp8_per_token_head"} & set(dtypes)
    fp8 = next(row for row in r.json()["levers"] if row["precision"] == "fp8_e4m3")
    assert fp8["bytes_per_token_per_gpu"] == 61 * 576
    dense = run_cli("levers", "meta-llama/Llama-3.1-8B", "--batch", "8", "--context", "4096",
                    "--json")
    assert "nvfp4" in [row["precision"] for row in dense.json()["levers"]]
