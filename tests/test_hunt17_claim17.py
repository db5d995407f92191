"""Hunt 17 (claim17): when memory is claimed (`kvplan request`, `kv`, `batch`), regressions
checked against vLLM 0.11's sampling and KV cache manager arithmetic."""

from __future__ import annotations

import pytest

from kvplan.analysis.timeline import request_timeline
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import kv_spec
from tests.conftest import run_cli

L1B = "meta-llama/Llama-3.2-1B"


def test_request_refuses_zero_output_tokens_as_vllm_does() -> None:
    # vLLM 0.11 sampling_params.py _verify_args: "max_tokens must be at least 1, got 0";
    # kvplan latency/simulate refuse --output 0 too. request printed a one-step schedule
    # (and no vLLM end) for a request vLLM cannot run.
    result = run_cli("request", L1B, "--prompt", "20", "--output", "0")
    assert result.code == 2 and result.out == ""
    assert result.err.strip().splitlines() == [
        "error: --output must be at least 1 token (vLLM refuses max_tokens below 1), got 0"]
    with pytest.raises(InputError, match="at least 1 token"):
        request_timeline(kv_spec(load_model(L1B)), 20, 0)


def test_request_with_one_output_token_ends_at_the_prompt_in_vllm() -> None:
    # max_tokens 1: vLLM samples the only token in the prefill step and never caches it:
    # it ends at P = 20 tokens x 32,768 B (2 x 16 layers x 8 heads x 64 x 2 B) = 655,360 B.
    tl = request_timeline(kv_spec(load_model(L1B)), 20, 1)
    assert tl.vllm_final.tokens_in_cache == 20 and tl.vllm_final.logical_bytes == 655_360


def test_request_and_batch_name_one_step_and_one_request_in_the_singular() -> None:
    # --output 2: the lesson's 2 decode steps; vLLM ends after 2 - 1 = 1 decode step. The
    # lines read "after 1 decode steps" and "x 1 requests".
    req = run_cli("request", L1B, "--prompt", "20", "--output", "2")
    assert req.code == 0, req.err
    assert "2 decode steps add 64.00 KiB (65,536 bytes)" in req.out  # 2 x 32,768 B
    assert "after 1 decode step\n" in req.out.replace(" \n", "\n")
    one = run_cli("request", L1B, "--prompt", "20", "--output", "1")
    assert "1 decode step adds 32.00 KiB" in one.out and "after 0 decode steps" in one.out
    tiny = run_cli("request", L1B, "--prompt", "1", "--output", "1")  # vLLM ends at P = 1
    assert "it ends at 1 token, 32.00 KiB" in tiny.out, tiny.out
    batch = run_cli("batch", L1B, "--batch", "1", "--context", "45")
    assert batch.code == 0, batch.err
    assert "32,768 bytes/token x 45 tokens x 1 request\n" in batch.out  # 1,474,560 B


@pytest.mark.parametrize(("cmd", "dtype"), [
    (["kv", "deepseek-ai/DeepSeek-V2-Lite"], "nvfp4"),
    (["request", "deepseek-ai/DeepSeek-V2-Lite", "--prompt", "10", "--output", "1"],
     "int8_per_token_head"),
    (["batch", "deepseek-ai/DeepSeek-V3", "--batch", "1", "--context", "10"],
     "fp8_per_token_head"),
])
def test_mla_latent_formats_no_vllm_backend_stores_are_refused_without_a_gpu(
        cmd: list[str], dtype: str) -> None:
    # vLLM 0.11's MLA backends store the latent as auto/bfloat16 or per-tensor fp8 only
    # (FlashMLA: auto, fp8, fp8_e4m3; CUTLASS MLA: auto, bfloat16, fp8, fp8_e4m3; Triton MLA:
    # auto, bfloat16); capacity refuses these and levers leaves them out. kv printed
    # DeepSeek-V2-Lite nvfp4 as 27 x 324 = 8,748 bytes/token, a cache vLLM cannot hold.
    r = run_cli(*cmd, "--kv-cache-dtype", dtype)
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [
        f"error: --kv-cache-dtype {dtype}: no vLLM MLA backend stores the latent cache as "
        f"{dtype} (MLA takes auto, bfloat16 or fp8); use --kv-cache-dtype fp8 or auto"]
    fp8 = run_cli(*cmd, "--kv-cache-dtype", "fp8")  # per-tensor fp8: 576 B per layer
    assert fp8.code == 0, fp8.err


def test_web_request_refuses_zero_output_and_unstorable_mla_latents_by_field() -> None:
    # /api/request is `kvplan request --json`: the same refusals, HTTP 422 on their field.
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    client = TestClient(create_app(WebSettings()))
    r = client.get("/api/request", params={"model": L1B, "prompt": 20, "output": 0})
    assert r.status_code == 422 and r.json()["field"] == "output", r.text
    r = client.get("/api/request", params={"model": "deepseek-ai/DeepSeek-V2-Lite", "prompt": 20,
                                           "output": 2, "kv_cache_dtype": "nvfp4"})
    assert r.status_code == 422 and r.json()["field"] == "kv_cache_dtype", r.text
    ok = client.get("/api/request", params={"model": L1B, "prompt": 20, "output": 1})
    assert ok.status_code == 200 and ok.json()["vllm_final_tokens"] == 20
