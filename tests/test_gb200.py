"""GB200: one GPU of a GB200 NVL72 rack, a catalog GPU priced from its own measured kernel
tables (GB200.npz), never slower than B200 (the same die and HBM at 1,200 W), its NVLink
domain 72 GPUs, rented from CoreWeave as 4-GPU nodes."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.analysis.plan.parallel.space import left_out
from kvplan.costs import kernels as kn
from kvplan.costs.kernels.tables import peaks
from kvplan.costs.memory.vllm_defaults import cuda_total_bytes
from kvplan.costs.pricing import shape_cost
from kvplan.specs.hardware import gpu_catalog, load_gpu
from kvplan.specs.prices import price_table
from kvplan.units import GiB, MiB
from tests.conftest import run_cli

B200 = "B200-SXM-180GB"


def test_catalog_entry_and_aliases() -> None:
    gpu = load_gpu("GB200")
    for name in ("gb200", "NVIDIA GB200", "GB200-NVL72", "gb200 nvl72", "GB200-186GB"):
        assert load_gpu(name) is gpu
    assert (gpu.id, gpu.arch, gpu.kernels_of) == ("GB200", "Blackwell", "")
    assert (gpu.memory_bytes, gpu.mem_bw_bytes_per_s) == (186 * 10**9, 8e12)
    assert gpu.peak_flops == {"float16": 2.5e15, "bfloat16": 2.5e15, "fp8": 5e15,
                              "int8": 5e15, "fp4": 1e16, "float32": 8e13}
    assert (gpu.interconnect_bytes_per_s, gpu.node_gpus, gpu.scale_out_bytes_per_s) == (
        1.8e12, 72, 50e9)
    # B200's HBM and NVLink, more tensor throughput: the catalog says "never slower"
    b200 = load_gpu(B200)
    assert gpu.mem_bw_bytes_per_s == b200.mem_bw_bytes_per_s
    assert gpu.interconnect_bytes_per_s == b200.interconnect_bytes_per_s
    assert all(gpu.peak_flops[k] > b200.peak_flops[k] for k in ("bfloat16", "fp8", "fp4"))


def test_every_bundled_gpu_is_a_catalog_gpu() -> None:
    assert all(g.lower() in gpu_catalog() for g in kn.measured_gpus())
    assert peaks("GB200")["source"] == "kvplan catalog (GB200)"


def test_cuda_total_is_what_torch_reports() -> None:
    """PyTorch on GB200: "total capacity of 184.31 GiB" (nvidia-smi's 189,471 MiB less the
    738 MiB CUDA keeps, as B200 keeps 729; until hunt 17 kvplan took H100's 467 MiB:
    184.57 GiB)."""
    total = cuda_total_bytes(load_gpu("GB200"))
    assert total == round(184.31 * GiB) == 197_901_355_581
    assert total // MiB == 189_471 - 738
    r = run_cli("gpus")
    assert r.code == 0 and "GB200" in r.out and "184.31 GiB" in r.out


def test_capacity_golden() -> None:
    """Llama-3.1-8B, TP1, vLLM defaults, by hand: requested = int(197,901,355,581 x 0.9) =
    178,111,220,022; KV = requested - 16,094,076,928 weights - 5,124,915,200 activations -
    139,460,608 non-torch = 156,752,767,286 B; a block of 16 tokens over 32 layers is
    32 x 2 x 8 x 128 x 2 B x 16 = 2,097,152 B -> 74,745 blocks, 1,195,920 tokens."""
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "GB200", "--json")
    assert r.code == 0, r.err
    j = r.json()
    assert j["requested_bytes"] == int(197_901_355_581 * 0.9) == 178_111_220_022
    assert (j["weights_bytes"], j["activation_bytes"], j["non_torch_bytes"]) == (
        16_094_076_928, 5_124_915_200, 139_460_608)
    assert j["available_kv_bytes"] == 156_752_767_286
    assert j["page_size_bytes"] == 2 * 8 * 128 * 2 * 16 == 65_536
    assert j["num_blocks"] == 156_752_767_286 // (65_536 * 32) == 74_745
    assert j["kv_cache_tokens"] == 74_745 * 16


def test_kernels_are_its_own_tables() -> None:
    assert kn.resolve_gpu("gb200-nvl72") == "GB200" and kn.link_scale("GB200") == 1.0
    assert kn.capped_at("gb200") == B200 and kn.capped_at(B200) is None
    answer = kn.gemm("GB200", 1024, 8192, 8192)
    assert answer.source.gpu == "GB200" and "gb200" in answer.source.file
    found = kn.nearest_measured_gpu("GB200")
    assert (found.donor, found.reason) == ("GB200", "measured")
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "GB200", "--prompt", "512",
                "--output", "8", "--json")
    assert r.code == 0, r.err
    assert r.json()["kernels"].startswith("kernels measured on GB200 (vllm 0.24.0;")


def test_collectives_past_four_gpus_are_at_most_b200s() -> None:
    """GB200's collective tables stop at 4 GPUs; at 8 the ring-scaled answer is capped at
    B200's measured 8-GPU time where that is faster (a 16 MiB all-reduce: it is)."""
    four = kn.all_reduce("GB200", 2**24, 4)
    assert four.source.gpu == "GB200" and not four.notes
    eight = kn.all_reduce("GB200", 2**24, 8)
    assert float(eight.seconds) == float(kn.all_reduce_s(B200, 2**24, 8))
    assert float(eight.seconds) < float(four.seconds) * (7 / 8) / (3 / 4)
    assert any("capped at B200-SXM-180GB's 8-GPU time" in n for n in eight.notes)


def _latency(gpu: str, model: str, tp: int, batch: int) -> dict[str, float] | None:
    r = run_cli("latency", model, "--gpu", gpu, "-tp", str(tp), "--prompt", "2048",
                "--output", "32", "--batch", str(batch), "--json")
    if r.code == 2:  # does not fit, or a TP degree the model refuses
        return None
    assert r.code == 0, r.err
    return {k: r.json()[k] for k in ("ttft_s", "tpot_s")}


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B",
                                   "deepseek-ai/DeepSeek-V2-Lite"])
def test_never_slower_than_b200(model: str) -> None:
    """Dense, MoE and MLA + MoE, TP 1-8, prefill (TTFT) and decode (TPOT): GB200 <= B200.
    (The measured tables alone were up to 1.65x slower: docs/silicon.md, step 5.)"""
    compared = 0
    for tp in (1, 2, 4, 8):
        for batch in (1, 64):
            gb200, b200 = _latency("GB200", model, tp, batch), _latency(B200, model, tp, batch)
            if b200 is None:
                continue
            assert gb200 is not None, (model, tp, batch)
            assert all(gb200[k] <= b200[k] for k in gb200), (model, tp, batch, gb200, b200)
            compared += 1
    assert compared >= 6


def test_node_is_the_nvlink_domain() -> None:
    """72 GPUs on one NVLink domain: a default DP 8 x TP 8 MoE layout (64 GPUs) is in one
    node on GB200 and left out on B200's 8-GPU node."""
    gb200, b200 = load_gpu("GB200"), load_gpu(B200)
    assert not left_out(gb200, 8, 1, 8, True) and left_out(b200, 8, 1, 8, True)
    assert left_out(gb200, 8, 1, 16, True)  # 128 > 72


def test_price_row_and_instance_arithmetic() -> None:
    (row,) = price_table("coreweave").for_gpu("GB200")
    assert (row.gpus_per_instance, row.gpus_per_node, row.usd_per_instance_hour) == (4, 72, 42.0)
    assert row.usd_per_gpu_hour == 10.5 and row.observed_on == "2026-09-20"
    assert row.transcribed_by == "api-evangelist/coreweave plans"
    tp8 = shape_cost(row, 1, 8)  # two 4-GPU nodes of the rack
    assert tp8 is not None and (tp8.instances, tp8.usd_per_hour, tp8.idle_gpus) == (2, 84.0, 0)
    tp2 = shape_cost(row, 3, 2)  # two per node: cdiv(3, 2) = 2 nodes, 2 GPUs idle
    assert tp2 is not None and (tp2.instances, tp2.usd_per_hour, tp2.idle_gpus) == (2, 84.0, 2)
    assert shape_cost(row, 1, 128) is None  # wider than the NVLink domain


def test_plan_considers_gb200_and_prices_it_by_the_node() -> None:
    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "GB200,B200", "--provider",
                "coreweave", "--request-rate", "20", "--num-prompts", "300", "-tp", "1,2",
                "--slo", "ttft:p99:2000", "tpot:p90:50", "--json")
    assert r.code == 0, r.err
    j = r.json()
    assert {c["gpu"] for c in j["candidates"]} == {"GB200", B200}
    best = next(c for c in j["candidates"] if c["id"] == j["summary"]["best"])
    cost = best["cost"]
    assert best["gpu"] == "GB200" and cost["instance"] == "GB200 NVL72 (4-GPU node)"
    # one TP1 replica rents one 4-GPU node: 1 x $42.00 (B200's cheapest shape is $68.80)
    assert (best["replicas"], cost["instances"], cost["gpus_rented"]) == (1, 1, 4)
    assert cost["usd_per_hour"] == j["summary"]["usd_per_hour"] == 42.0
    # priced at the target load held for good: target rate x 128 output tokens a request
    tokens_per_hour = j["inputs"]["target_rate_rps"] * 128 * 3600
    assert j["summary"]["usd_per_million_output_tokens"] == pytest.approx(
        42.0 / tokens_per_hour * 1e6, rel=1e-12)


def test_tables_alone_were_slower_and_the_manifest_says_so() -> None:
    """What the cap hides is counted: GB200's measured fp8_block GEMMs and MLA blocks ran
    about 1.6x B200's on nearly every cell; its bf16 GEMMs and MoE mostly faster."""
    tables = kn.manifest()["gpus"]["GB200"]["tables"]
    cells = {f: tables[f]["capped_at_b200_cells"] for f in tables}
    assert cells["mla_ctx"] == 7_773 and cells["mla_gen"] == 8_535
    assert cells["gemm"] == 80_901 and cells["moe"] == 1_955
    assert np.isclose(tables["allreduce"]["capped_at_b200_max_ratio"], 2.7477)
