"""Hunt 19, when the KV cache is claimed and how much, KV precision as a lever (helper
claim19)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

_LLAMA = Path("/work/shared/data/model-configs/meta-llama--Llama-3.1-8B.json")


def _head_dim_config(tmp_path: Path, head_dim: int) -> str:
    cfg = json.loads(_LLAMA.read_text())
    cfg["head_dim"] = head_dim
    path = tmp_path / f"h{head_dim}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_nvfp4_cache_refuses_a_head_size_its_16_value_groups_cannot_pack(
        tmp_path: Path) -> None:
    # vLLM's nvfp4 cache packs each head vector as head//2 fp4 bytes + head//16 fp8 scales
    # (vllm/utils/torch_utils.py nvfp4_kv_cache_full_dim, floor division: kv_cache_interface
    # FullAttentionSpec.real_page_size_bytes) and its cache write refuses any other head
    # ("NVFP4 KV cache requires head_size to be a multiple of 16.", and "<= 256": a packed
    # head of at most 32 int32 words, csrc/cache_kernels.cu reshape_and_cache_flash).
    # kvplan priced a 72-wide head at 36 + cdiv(72, 16) = 41 B per vector (2 x 32 x 8 x 41 =
    # 20,992 B/token) and sized a B200 cache in it; vLLM does not start.
    h72 = _head_dim_config(tmp_path, 72)
    for args in (("kv", h72), ("request", h72, "--prompt", "64", "--output", "4"),
                 ("batch", h72, "--batch", "2", "--context", "64"),
                 ("capacity", h72, "--gpu", "B200", "--kv-cache-memory", "10GiB")):
        r = run_cli(*args, "--kv-cache-dtype", "nvfp4")
        assert r.code == 2, (args, r.out)
        assert r.err.startswith("error:") and "multiple of 16" in r.err, r.err
    h512 = _head_dim_config(tmp_path, 512)
    r = run_cli("kv", h512, "--kv-cache-dtype", "nvfp4")
    assert r.code == 2 and "256" in r.err, r.err
    # the lever table leaves nvfp4 out for such a head, as it does for an MLA latent
    lev = run_cli("levers", h72, "--batch", "2", "--context", "64", "--json")
    assert lev.code == 0, lev.err
    assert "nvfp4" not in [row["precision"] for row in lev.json()["levers"]]
    # a head of 128 still stores nvfp4: 64 + 8 = 72 B per vector, 2 x 32 x 8 x 72 = 36,864
    ok = run_cli("kv", str(_LLAMA), "--kv-cache-dtype", "nvfp4", "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["bytes_per_token"] == 2 * 32 * 8 * 72 == 36_864


def test_fp8_cache_is_refused_on_ampere_where_vllm_runs_triton() -> None:
    # vLLM 0.11 platforms/cuda.py: an fp8 KV cache on an SM 8.x GPU other than Hopper runs
    # TRITON_ATTN ("(has_sink or use_fp8_kv_cache) and not cls.is_device_capability(90)"),
    # which views any fp8 cache as current_platform.fp8_dtype() (e4m3fn); its cache write
    # (triton reshape_and_cache_kernel_flash) needs Triton's fp8e4nv, which has no lowering
    # before SM 8.9: the engine fails to start with "type fp8e4nv not supported in this
    # architecture" (vllm #26431 on the 0.11 release, #54219 on an A100; #43914 later refused
    # fp8 below SM89 outright; #50882, open, is to make e5m2 run there). kvplan sized an A100
    # fp8 cache (56,333 blocks for Llama-3.1-8B) that vLLM cannot hold.
    for gpu in ("A100-80GB-SXM", "A10G"):
        for dtype in ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_per_token_head"):
            r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu,
                        "--kv-cache-dtype", dtype)
            assert r.code == 2, (gpu, dtype, r.out)
            assert r.err.startswith("error:") and "fp8e4nv" in r.err, r.err
    # Ada (SM 8.9) has fp8e4nv; int8 values and a 16-bit cache need no fp8
    for gpu, dtype in (("L40S", "fp8"), ("L40S", "fp8_e5m2"), ("A100-80GB-SXM", "auto"),
                       ("A100-80GB-SXM", "int8_per_token_head")):
        r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--kv-cache-dtype",
                    dtype, "--json")
        assert r.code == 0, (gpu, dtype, r.err)


def test_nvfp4_cache_refuses_a_block_its_cache_write_cannot_page() -> None:
    # vLLM's nvfp4 cache write checks "NVFP4 KV cache requires block_size to be a multiple of
    # 4." (csrc/cache_kernels.cu, reshape_and_cache_flash). kvplan sized a B200 cache of
    # 4,095,953 one-token blocks for Llama-3.1-8B that vLLM does not serve; blocks of 8 and
    # 16 (multiples of 4) stay priced.
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "B200", "--kv-cache-dtype",
                "nvfp4", "--block-size", "1")
    assert r.code == 2, r.out
    assert r.err.startswith("error:") and "multiple of 4" in r.err, r.err
    for block in ("8", "16"):
        ok = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "B200",
                     "--kv-cache-dtype", "nvfp4", "--block-size", block, "--json")
        assert ok.code == 0, ok.err
        # one block of one layer: block x 8 heads x 2 x 72 B
        assert ok.json()["page_size_bytes"] == int(block) * 8 * 2 * 72


def test_mla_latent_is_not_offered_or_sized_in_fp8_e5m2() -> None:
    # kvplan's own rule (kv_dtype_check): an MLA latent is kept only in the formats an MLA
    # backend lists - FlashMLA auto / fp8 / fp8_e4m3, CUTLASS MLA auto / bfloat16 / fp8 /
    # fp8_e4m3 (vLLM's supported_kv_cache_dtypes), Triton MLA 16-bit - and FlashMLA's fp8
    # kernel reads e4m3. Yet mla_stores took any 8-bit per-tensor format: DeepSeek-V2-Lite
    # fp8_e5m2 was sized on H100 (2,629,376 tokens) and B200, and offered as a lever at
    # 27 x 576 x 1 = 15,552 B/token.
    for gpu in ("H100", "B200"):
        r = run_cli("capacity", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", gpu,
                    "--kv-cache-dtype", "fp8_e5m2")
        assert r.code == 2, (gpu, r.out)
        assert r.err.startswith("error:") and "MLA" in r.err, r.err
    r = run_cli("request", "deepseek-ai/DeepSeek-V2-Lite", "--prompt", "10", "--output", "2",
                "--kv-cache-dtype", "fp8_e5m2")
    assert r.code == 2 and "MLA" in r.err, r.err
    lev = run_cli("levers", "deepseek-ai/DeepSeek-V2-Lite", "--batch", "8", "--context", "4096",
                  "--json")
    dtypes = [row["precision"] for row in lev.json()["levers"]]
    assert "fp8_e4m3" in dtypes and "fp8_e5m2" not in dtypes
    # fp8 (e4m3) stays: 27 layers x 576 B = 15,552 B/token
    ok = run_cli("kv", "deepseek-ai/DeepSeek-V2-Lite", "--kv-cache-dtype", "fp8", "--json")
    assert ok.code == 0 and ok.json()["bytes_per_token"] == 27 * 576 == 15_552
