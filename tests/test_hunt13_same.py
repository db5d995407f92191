"""Hunt 13, same question: one number asked of different kvplan entry points must agree."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

Q30 = "Qwen/Qwen3-30B-A3B"


def test_dp_simulate_num_blocks_is_the_ranks_vllm_blocks_summed() -> None:
    # Qwen3-30B-A3B at TP 2: 48 layers x 16 tokens x (K+V) x 2 KV heads x 128 x 2 B = 786,432 B
    # a block; --kv-cache-memory 1G = 2^30 B: 1,365 blocks per rank (capacity's num_blocks),
    # 2 ranks: 2,730, of which 2 are null blocks (one per engine): 2,728 usable.
    # The fleet reported 2,729 (usable + 1), a count no engine has.
    flags = ["-tp", "2", "-dp", "2", "--kv-cache-memory", "1G", "--max-model-len", "4096"]
    cap = run_cli("capacity", Q30, "--gpu", "H100", "--json", *flags)
    assert cap.code == 0, cap.err
    assert cap.json()["num_blocks"] == 1_365
    sim = run_cli("simulate", Q30, "--gpu", "H100", *flags, "--num-prompts", "4",
                  "--random-input-len", "1000", "--random-output-len", "10", "--json")
    assert sim.code == 0, sim.err
    doc = sim.json()
    assert [r["num_gpu_blocks"] for r in doc["dp_ranks"]] == [1_365, 1_365]
    assert doc["num_blocks"] == 2_730
    assert doc["peak_kv_usage"] == doc["peak_kv_blocks"] / 2_728
    text = run_cli("simulate", Q30, "--gpu", "H100", *flags, "--num-prompts", "4",
                   "--random-input-len", "1000", "--random-output-len", "10")
    assert f"{doc['peak_kv_blocks']} / 2728 usable" in text.out


def test_unset_budget_prices_the_prefill_chunk_vllm_runs_on_the_gpu() -> None:
    # L40S (48 GB): vLLM 0.11's default budget is 2048 tokens, so a 3000-token prompt runs as
    # chunks of 2048 + 952 with or without --max-num-batched-tokens 2048. The simulator, with
    # the flag unset, read the attention rate at an 8192-token chunk: its engine TTFT was
    # 232.21 ms against `kvplan latency --max-num-batched-tokens 2048`'s 237.73 ms.
    import numpy as np

    import kvplan
    from kvplan.costs.step.profiles import profile_for
    from kvplan.specs.requests.workload import Workload

    spec, hw = kvplan.load_model("google/gemma-2-9b-it"), kvplan.load_gpu("L40S")
    unset, given = kvplan.EngineConfig(), kvplan.EngineConfig(max_num_batched_tokens=2048)
    new, ctx = np.array([952]), np.array([2048])
    timers = [kvplan.StepCostModel(spec, hw, e, profile_for(spec, hw, e)) for e in (unset, given)]
    assert timers[0].step_time_s(new, ctx) == timers[1].step_time_s(new, ctx)
    shape = kvplan.RequestShape(batch=1, prompt_tokens=3000, output_tokens=50)
    lat = kvplan.request_latency(spec, hw, given, shape)
    assert lat.prefill.steps == 2
    one = Workload(name="one", arrival_s=np.zeros(1), prompt_tokens=np.array([3000]),
                   output_tokens=np.array([50]))
    r = kvplan.simulate_serving(spec, hw, unset, one).result
    assert r.first_token_s[0] - r.scheduled_s[0] == pytest.approx(lat.ttft_s, rel=1e-9)
    assert lat.ttft_s == pytest.approx(0.2377, abs=5e-5)


def _report_sections(path: Path) -> dict[str, Any]:
    raw = re.search(r'id="kvplan-data">(.*?)</script>', path.read_text(), re.S)
    assert raw is not None
    doc = json.loads(raw.group(1).replace("<\\/", "</"))
    return {s["id"]: s["answer"] for s in doc["sections"]}


def test_report_request_allocates_in_the_block_its_capacity_section_forces(tmp_path: Path) -> None:
    # DeepSeek-V2-Lite on H100: FlashMLA forces blocks of 64 (the Capacity section logs it);
    # the Request section allocated blocks of 16. 1,000 + 30 tokens x 31,104 B (27 layers x
    # 576 x 2 B): cdiv(1030, 64) = 17 blocks x 64 = 1,088 tokens = 33,841,152 B, not
    # 65 x 16 = 1,040 tokens = 32,348,160 B.
    out = tmp_path / "r.html"
    res = run_cli("report", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H100", "--prompt", "1000",
                  "--output", "30", "--batch", "1", "-o", str(out))
    assert res.code == 0, res.err
    s = _report_sections(out)
    assert s["capacity"]["block_size"] == 64
    assert s["request"]["block_size"] == 64
    assert s["request"]["final_allocated_bytes"] == 33_841_152


def test_request_allocates_vllm_group_padding_like_simulate() -> None:
    # Gemma-3-27B at TP2: 52 sliding + 10 full layers -> vLLM groups of 10 layers, 6 sliding
    # groups (8 padding layers) + 1 full; a block is 10 layers x 16 tokens x 8 KV heads x 128
    # x 2 x 2 B = 10 x 65,536 B. P = 5000 in chunks of 1024, last chunk (4096 computed before,
    # window 1024): full cdiv(5000, 16) = 313 blocks, each sliding group 313 - 3073 // 16 = 121,
    # so 313 + 6 x 121 = 1,039 blocks = 680,919,040 B, as the simulator's pool holds them;
    # `request` said 434 blocks, 617,480,192 B (per spec, padding layers left out).
    res = run_cli("request", "google/gemma-3-27b-it", "--prompt", "5000", "--output", "30",
                  "-tp", "2", "--chunk", "1024", "--json")
    assert res.code == 0, res.err
    peak = res.json()["steps"][4]
    assert (peak["phase"], peak["tokens_in_cache"]) == ("prefill", 5000)
    assert peak["allocated_blocks"] == 1_039
    assert peak["allocated_bytes"] == 1_039 * 10 * 65_536 == 680_919_040


def test_kv_pages_a_hybrid_model_in_the_block_request_and_capacity_use() -> None:
    # Qwen3-Next at TP4: an attention token is 1 KV head x 256 x (K+V) x 2 B = 1,024 B per layer;
    # the GDN state page is 268 KiB, so vLLM raises the block to 16 x cdiv(274,432, 16 x 1,024)
    # = 272 tokens: an attention page of 272 x 1,024 = 278,528 B, the state page padded to it.
    # `kv --block-size 16` printed pages of 16,384 B (attention) and 274,432 B (state).
    m = "Qwen/Qwen3-Next-80B-A3B-Thinking"
    kv = run_cli("kv", m, "-tp", "4", "--json")
    cap = run_cli("capacity", m, "-tp", "4", "--gpu", "H200", "--json")
    req = run_cli("request", m, "-tp", "4", "--prompt", "100", "--output", "1", "--json")
    assert kv.code == cap.code == req.code == 0, (kv.err, cap.err, req.err)
    assert kv.json()["block_size"] == cap.json()["block_size"] == req.json()["block_size"] == 272
    pages = {g["kind"]: g["page_size_bytes"] for g in kv.json()["groups"]}
    assert pages == {"full": 278_528, "state": 278_528} and cap.json()["page_size_bytes"] == 278_528


def test_report_latency_prefills_under_the_budget_its_capacity_section_shows(
        tmp_path: Path) -> None:
    # H100: vLLM's default budget is 8192 tokens (the Capacity section's max_num_batched_tokens,
    # the Request section's chunk); 16 prompts of 2048 tokens are 32,768 tokens: 4 prefill
    # steps, not the one unbounded step the Latency section priced (TTFT 1.910 s -> 2.067 s,
    # `kvplan latency --max-num-batched-tokens 8192`'s figure).
    out = tmp_path / "r.html"
    m = "meta-llama/Llama-3.1-70B"
    flags = ["--gpu", "H100", "-tp", "4", "--kv-cache-dtype", "fp8"]
    res = run_cli("report", m, *flags, "--prompt", "2048", "--output", "256", "--batch", "16",
                  "-o", str(out))
    assert res.code == 0, res.err
    s = _report_sections(out)
    assert s["capacity"]["max_num_batched_tokens"] == s["request"]["chunk_tokens"] == 8192
    got = s["latency"]["latency"]
    assert got["phases"]["prefill"]["steps"] == 32_768 // 8192 == 4
    cli = run_cli("latency", m, *flags, "--prompt", "2048", "--output", "256", "--batch", "16",
                  "--max-num-batched-tokens", "8192", "--json")
    assert cli.code == 0, cli.err
    assert got["ttft_s"] == cli.json()["ttft_s"] and got["tpot_s"] == cli.json()["tpot_s"]


def test_latency_fit_is_simulate_pool_less_the_null_block() -> None:
    # Llama-3.1-8B: a block is 16 tokens x 128 KiB = 2 MiB; 1,440 x 2 MiB of KV cache is vLLM's
    # 1,440 blocks, 1,439 usable (the null block). 10 requests of 2048 + 256 tokens end at
    # 2,303 tokens = 144 blocks each = 1,440 blocks: they do not fit (simulate preempts one),
    # but latency said they fit (it compared with 1,440). At 1,441 blocks they fit, also with
    # 257 output tokens (2,304 tokens cached, still 144 blocks; it counted 2,305 = 145).
    import numpy as np

    import kvplan
    from kvplan.costs.step.latency import kv_fit
    from kvplan.specs.requests.workload import Workload

    spec, hw = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")

    def both(blocks: int, output: int) -> tuple[bool, int, bool]:
        eng = kvplan.EngineConfig(kv_cache_memory_bytes=blocks * 2 * 2**20,
                                  max_model_len=2048 + output, enable_prefix_caching=False)
        fit = kv_fit(spec, hw, eng, kvplan.RequestShape(batch=10, prompt_tokens=2048,
                                                        output_tokens=output))
        w = Workload(name="b", arrival_s=np.zeros(10), prompt_tokens=np.full(10, 2048),
                     output_tokens=np.full(10, output))
        r = kvplan.simulate_serving(spec, hw, eng, w).result
        return fit.fits, fit.max_batch, bool(r.preemptions.sum() == 0)

    assert both(1440, 256) == (False, 9, False)
    assert both(1441, 256) == (True, 10, True)
    assert both(1441, 257) == (True, 10, True)
