"""Hunt 17, KV-cache precision as a lever (helper kvdt17): --kv-cache-dtype values vLLM 0.11.0
takes or refuses, against kvplan's capacity / latency / pasted `vllm serve` lines."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.test_hunt14_mla import _v32_config


def test_pasted_vllm_line_takes_fp8_ds_mla_as_vllm_0_11_argparse_does(tmp_path: Path) -> None:
    # vLLM 0.11.0 config/cache.py CacheDType = Literal["auto", "bfloat16", "fp8", "fp8_e4m3",
    # "fp8_e5m2", "fp8_inc", "fp8_ds_mla"] (engine-args docs of that release: "Possible
    # choices: auto, bfloat16, fp8, fp8_ds_mla, fp8_e4m3, fp8_e5m2, fp8_inc"). kvplan refused
    # the pasted line ("vllm serve refuses --kv-cache-dtype fp8_ds_mla: invalid choice").
    # DeepSeek-V3.2 at TP8 on H200: the pasted line must give the own-flag answer, where
    # one layer's page is 64 tokens x (656 B fp8_ds_mla latent + 132 B indexer key) = 50,432 B.
    cfg = _v32_config(tmp_path)
    own = run_cli("capacity", cfg, "--gpu", "H200", "-tp", "8", "--kv-cache-dtype",
                  "fp8_ds_mla", "--json")
    pasted = run_cli("capacity", "--gpu", "H200", "--json", "--", "vllm", "serve", cfg,
                     "-tp", "8", "--kv-cache-dtype", "fp8_ds_mla")
    assert own.code == 0, own.err
    assert pasted.code == 0, pasted.err
    assert json.loads(pasted.out) == json.loads(own.out)
    assert json.loads(own.out)["page_size_bytes"] == 64 * (656 + 132) == 50_432


def test_fp8_inc_is_refused_on_cuda_and_rocm_gpus() -> None:
    # fp8_inc is Intel Gaudi's cache format (vLLM 0.11 CacheConfig.cache_dtype: "Intel Gaudi
    # (HPU) supports fp8 (using fp8_inc)"). On CUDA and ROCm the cache write goes through
    # DISPATCH_BY_KV_CACHE_DTYPE (csrc/quantization/fp8/{nvidia,amd}/quant_utils.cuh), which
    # knows auto, fp8, fp8_e4m3 (and fp8_e5m2 on CUDA) and otherwise stops with "Unsupported
    # data type of kv cache: fp8_inc"; FlashAttention / FlashInfer's get_fp8_dtype_for_*
    # raise "Unrecognized FP8 dtype" first. kvplan priced it as fp8_e4m3 (6.42x on H100).
    for gpu in ("H100", "A100-80GB-SXM", "B200", "MI300X"):
        r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--kv-cache-dtype",
                    "fp8_inc")
        assert r.code == 2, (gpu, r.out)
        assert r.err.startswith("error: --kv-cache-dtype fp8_inc") and "Gaudi" in r.err, r.err
        assert r.err.count("\n") == 1 and r.out == ""
    ok = run_cli("kv", "meta-llama/Llama-3.1-8B", "--kv-cache-dtype", "fp8_inc", "--json")
    assert ok.code == 0, ok.err  # kvplan kv stays lenient: the cache arithmetic (fp8: 1 B)
    assert json.loads(ok.out)["bytes_per_token"] == 32 * 2 * 8 * 128 * 1


def test_fp8_e5m2_is_refused_where_vllm_0_11_has_no_e5m2_cache_kernel() -> None:
    # Hopper runs FlashAttention 3, whose fp8 is e4m3 only: vLLM 0.11
    # v1/attention/backends/flash_attn.py get_fp8_dtype_for_flashattn takes "fp8"/"fp8_e4m3"
    # and raises ValueError("Unrecognized FP8 dtype: fp8_e5m2") (e5m2 came with FA4 on SM100,
    # vllm PR #42569). ROCm's cache write (csrc/quantization/fp8/amd/quant_utils.cuh
    # DISPATCH_BY_KV_CACHE_DTYPE) knows fp8/fp8_e4m3 only ("ROCm (AMD GPU) supports fp8
    # (=fp8_e4m3)", CacheConfig docs). kvplan gave H100 6.42x for Llama-3.1-8B.
    for gpu in ("H100", "H200", "MI300X"):
        r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--kv-cache-dtype",
                    "fp8_e5m2")
        assert r.code == 2, (gpu, r.out)
        assert r.err.startswith("error: --kv-cache-dtype fp8_e5m2"), r.err
        assert r.err.count("\n") == 1 and r.out == ""
    # Blackwell runs FlashInfer, whose get_fp8_dtype_for_flashinfer maps fp8_e5m2: kept.
    # Llama-3.1-8B bf16 pages 16 x 8 x 128 x 2 x 2 = 65,536 B per layer; e5m2 half: 32,768.
    b200 = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "B200", "--kv-cache-dtype",
                   "fp8_e5m2", "--json")
    assert b200.code == 0, b200.err
    assert json.loads(b200.out)["page_size_bytes"] == 16 * 8 * 128 * 1 * 2 == 32_768


def test_16_bit_cache_of_the_other_16_bit_dtype_is_not_a_rounding() -> None:
    # kvplan said a float16 cache of a bf16 model "overflows above 65,504" and a bfloat16
    # cache of an fp16 model "loses 3 of 11 significant bits": a conversion vLLM never does.
    # vLLM 0.11's cache write (csrc quant_utils.cuh DISPATCH_BY_KV_CACHE_DTYPE) knows auto and
    # the fp8 names only ("Unsupported data type of kv cache: bfloat16"; vllm PR #38922); the
    # versions that take float16 / bfloat16 copy the model dtype's bits unconverted and read
    # them back as the other dtype: bf16 0.1621 (0x3E25) read as fp16 is 1.5361, output is
    # nonsense (vllm PR #54338: kv float16 on bf16 -> ' Paris,, therefore, proclaimedondunct').
    from kvplan.specs.kv_precision import PRECISIONS

    half, bf16 = PRECISIONS["float16"].risk, PRECISIONS["bfloat16"].risk
    assert "65,504" not in half and "lose 3" not in bf16
    assert "#54338" in half and "#54338" in bf16
    assert half.startswith("Exact for fp16 models") and bf16.startswith("Exact for bf16 models")
    r = run_cli("kv", "meta-llama/Llama-3.1-8B", "--kv-cache-dtype", "float16", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["precision_risk"] == half


def test_fp8_cache_on_a_gpu_without_fp8_attention_tables_reads_its_own_bytes() -> None:
    # A100 has bf16 attention tables only. kv_table's rule ("a cache precision the tables
    # lack reads its table's per-token line at its own bytes") sent fp8 to the fp8 line, which
    # the slice lookup then silently swapped for the bf16 one at 1.0x: decode attention read
    # 256 B per 128-value head for an fp8 cache that holds 128 B (Llama-3.1-8B, 8 x 16k
    # context: TPOT 23.21 ms for both auto and fp8). The per-cached-token cost must be the
    # bf16 line's x 128/256 = 0.5 (x 132/256 for a per-token-head format); H100, which
    # measures fp8, keeps its own fp8 line at 1.0x.
    from kvplan.costs.kernels import kv_table

    assert kv_table("fp8_e4m3", 128, gpu="A100-80GB-SXM") == ("bfloat16", 0.5)
    assert kv_table("int8_per_token_head", 128, gpu="A100-80GB-SXM") == ("bfloat16", 132 / 256)
    assert kv_table("fp8_e4m3", 128, gpu="H100-SXM-80GB") == ("fp8", 1.0)
    assert kv_table("bfloat16", 128, gpu="A100-80GB-SXM") == ("bfloat16", 1.0)
    shape = ("--gpu", "A100-80GB-SXM", "--prompt", "16000", "--output", "64", "--batch", "8",
             "--json")
    auto = run_cli("latency", "meta-llama/Llama-3.1-8B", *shape)
    # int8 per token-head: vLLM runs no fp8 cache on Ampere (Triton has no fp8e4nv, hunt 19)
    fp8 = run_cli("latency", "meta-llama/Llama-3.1-8B", *shape, "--kv-cache-dtype",
                  "int8_per_token_head")
    assert auto.code == fp8.code == 0, (auto.err, fp8.err)
    assert json.loads(fp8.out)["tpot_s"] < 0.95 * json.loads(auto.out)["tpot_s"]
