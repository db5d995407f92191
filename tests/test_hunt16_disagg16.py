"""hunt16-disagg16: regressions found in the disaggregated prefill/decode path."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.disagg.plan import enumerate_disagg
from kvplan.analysis.disagg.serving import simulate_disagg_serving
from kvplan.analysis.plan.judge import judge, latencies
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import PercentileBound, Slo

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")


def _fleet_1p1d(model=LLAMA_8B, engine=None, link="ib-ndr"):
    (dd,) = enumerate_disagg(model, [load_gpu("H100")], engine or EngineConfig(max_model_len=4096),
                             load_link(link), tps=(1,), max_instances=1)[:1]
    return dd


def test_disagg_bands_rate_counts_a_late_refusal_in_the_duration() -> None:
    """The plan's output rate for a disaggregated fleet divided by the last finish only.
    vLLM bench's benchmark_duration runs until every request answered, failed ones too
    (``asyncio.gather`` of all requests, then ``perf_counter() - start``), and a request
    the decode side refuses (prompt + output = 4,000 + 200 > max_model_len 4,096) fails
    only after the prefill side computed it (the proxy's max_tokens=1 request first).
    99 requests of 1,000 / 50 tokens, one every 0.5 s, then that one at 49.5 s: the rate
    is 99 x 50 = 4,950 tokens / its failure time (49.663 s, after the last finish at
    49.467 s), as simulate's output_throughput; it was 4,950 / 49.467 = 100.07 tok/s."""
    from kvplan.analysis import metrics as mx
    from kvplan.analysis.disagg.candidates import JointCandidate
    from kvplan.analysis.disagg.joint_levers import disagg_bands

    n = 100
    work = Workload(name="late-refusal", arrival_s=np.arange(n) * 0.5,
                    prompt_tokens=np.array([1000] * (n - 1) + [4000], dtype=np.int64),
                    output_tokens=np.array([50] * (n - 1) + [200], dtype=np.int64))
    dd = _fleet_1p1d()
    run = simulate_disagg_serving(dd, work)
    client = run.result.client
    assert list(client.rejected) == [n - 1] and "decode side" in client.rejected[n - 1]
    failed_at = float(client.failed_s[n - 1])
    assert failed_at > float(client.finish_s[client.finished].max())
    slo = Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=5000.0),))
    c = JointCandidate(id="d0000", kind="disaggregated", stage="verified", reason="",
                       gpus=2, usd_per_hour=1.0, index=0, disagg=dd,
                       verdict=judge(latencies(client), slo), run=run)
    rate = disagg_bands(c, slo).output_tokens_per_s
    assert rate == 4950 / failed_at
    assert rate == mx.compute_metrics(client).output_throughput


def test_each_pool_gpu_moves_kv_at_its_own_pcie_rate() -> None:
    """H100 TP1 prefill -> A100 TP2 decode over ib-ndr, Llama-3.1-8B, one 1,024-token prompt.
    KV: 1,024 tokens x 32 layers x 8 heads x 128 x 2 (K, V) x 2 B = 134,217,728 B; each
    A100 receives its 4 heads, 67,108,864 B, over its PCIe Gen4 x16 (64e9 / 2 x 128/130 =
    31.5077e9 B/s: 2.130 ms); the H100 (PCIe Gen5, above the NIC) sends all of it through
    its 50e9 B/s NIC: 2.684 ms, which binds. transfer = 134,217,728 / 50e9 + 5 us =
    2.68935456 ms. kvplan capped both sides at the A100's rate: 134,217,728 / 31.5077e9
    + 5 us = 4.2648 ms, as if the A100's PCIe limited the H100's NIC."""
    import pytest

    from tests.conftest import run_cli

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--disagg", "1P1D", "--prefill-gpu",
                "H100", "--decode-gpu", "A100-80GB-SXM", "--prefill-tp", "1", "--decode-tp",
                "2", "--num-prompts", "1", "--random-input-len", "1024",
                "--random-output-len", "4", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["kv_link_bytes"] == 134_217_728
    assert doc["mean_kv_transfer_ms"] == pytest.approx(134_217_728 / 50e9 * 1e3 + 5e-3,
                                                      rel=1e-12)
    assert doc["prefill"]["kv_link_bytes_per_s_per_gpu"] == 50e9
    assert doc["decode"]["kv_link_bytes_per_s_per_gpu"] == pytest.approx(64e9 / 2 * 128 / 130)


def test_transfer_rate_of_the_faster_link_lever_counts_each_side() -> None:
    """The planner's "--kv-link ib-xdr" what-if was left out whenever the slower pool GPU's
    PCIe capped both links alike (A100: 31.5e9 on ib-ndr and on ib-xdr), although the H100
    TP1 prefill side binds the transfer above: its NIC goes 50e9 -> 63.0e9 (its PCIe Gen5's
    cap), against 2 A100s receiving 2 x 31.5e9 = 63.0e9: the transfer's rate rises from
    50e9 to 63.0e9 B/s."""
    import pytest

    from kvplan.analysis.disagg.joint_levers import variants
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment

    def pool(gpu: str, tp: int) -> Deployment:
        return Deployment(model=LLAMA_8B, gpu=load_gpu(gpu),
                          engine=EngineConfig(max_model_len=4096, tensor_parallel_size=tp))

    dd = DisaggDeployment(prefill=pool("H100", 1), decode=pool("A100-80GB-SXM", 2),
                          link=load_link("ib-ndr"))
    assert dd.transfer_bytes_per_s() == 50e9
    assert dd.transfer_bytes_per_s(load_link("ib-xdr")) == pytest.approx(2 * 64e9 / 2 * 128
                                                                          / 130)
    assert "--kv-link ib-xdr" in [change for change, _ in variants(dd)]


def _llama4_scout(tmp_path, wrapped: bool) -> str:
    """meta-llama/Llama-4-Scout-17B-16E-Instruct's text_config (48 layers, 8 KV heads of 128,
    attention_chunk_size 8192, no_rope_layers [] -> every 4th layer NoPE / global);
    ``wrapped``: inside its model_type "llama4" config, else the bare llama4_text config."""
    import json

    text = {"model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "attention_chunk_size": 8192, "no_rope_layers": [], "vocab_size": 202048,
            "intermediate_size": 8192, "intermediate_size_mlp": 16384,
            "num_local_experts": 16, "num_experts_per_tok": 1,
            "max_position_embeddings": 10485760, "torch_dtype": "bfloat16",
            "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                             "original_max_position_embeddings": 8192,
                             "rope_type": "llama3"}}
    raw = ({"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
            "text_config": text, "torch_dtype": "bfloat16"} if wrapped else
           {**text, "architectures": ["Llama4ForCausalLM"]})
    path = tmp_path / f"llama4-{wrapped}.json"
    path.write_text(json.dumps(raw))
    return str(path)


def test_llama4_chunked_layers_move_only_their_last_chunk(tmp_path) -> None:
    """vLLM 0.11's NixlConnector (register_kv_caches, for hf_config.model_type "llama4")
    gives each chunked local layer (no_rope_layers[i] != 0) a block window of
    cdiv(8192, 16) = 512 blocks, and _read_blocks reads only local_block_ids[-512:] on it.
    Scout, one 32,000-token prompt, TP4 -> TP4 over ib-ndr: 2,000 pages; one page of one
    layer on all GPUs = 16 x 8 x 128 x 2 x 2 = 65,536 B:
        12 global x 2,000 x 65,536 + 36 chunked x 512 x 65,536 = 2,780,823,552 B
    (kvplan moved 48 x 2,000 x 65,536 = 6,291,456,000 B); wire 2,780,823,552 / (4 x 50e9)
    + 5 us = 13.90911776 ms. The bare llama4_text config (model_type not "llama4") gets no
    window in vLLM: all 6,291,456,000 B."""
    import pytest

    from tests.conftest import run_cli

    def moved(wrapped: bool) -> dict:
        r = run_cli("simulate", _llama4_scout(tmp_path, wrapped), "--gpu", "H200", "-tp",
                    "4", "--max-model-len", "32768", "--disagg", "1P1D", "--num-prompts",
                    "1", "--random-input-len", "32000", "--random-output-len", "4",
                    "--json")
        assert r.code == 0, r.err
        return r.json()

    doc = moved(True)
    assert doc["kv_link_bytes"] == (12 * 2000 + 36 * 512) * 65_536 == 2_780_823_552
    assert doc["mean_kv_transfer_ms"] == pytest.approx(2_780_823_552 / 200e9 * 1e3 + 5e-3,
                                                      rel=1e-12)
    assert moved(False)["kv_link_bytes"] == 48 * 2000 * 65_536


def test_llama4_chunked_layers_follow_no_rope_layers() -> None:
    """no_rope_layers given: its 1s are the chunked layers (vLLM reads the list as is)."""
    from kvplan.specs.hf_config import parse_config

    text = {"model_type": "llama4_text", "hidden_size": 512, "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
            "attention_chunk_size": 1024, "no_rope_layers": [0, 1, 1, 0],
            "vocab_size": 1000, "max_position_embeddings": 4096}
    m = parse_config({"model_type": "llama4", "text_config": text}, name="x", file="x")
    assert (m.attention_chunk_size, m.chunked_local_layers) == (1024, (1, 2))
    plain = parse_config(text, name="x", file="x")
    assert (plain.attention_chunk_size, plain.chunked_local_layers) == (0, ())


def test_screen_keys_pools_by_weight_format_and_kv_dtype() -> None:
    """`kvplan plan Qwen/Qwen3-32B --gpu L40S -q none,fp8 --disagg`: the screen cached each
    pool's capacity plan by (role, GPU, TP, DP, EP), so the fp8 fleets on L40S TP1 reused
    the bf16 pool's verdict (61.03 GiB of weights > 40.08 GiB: no room) and all were
    pruned_memory, although fp8 weights (~31 GiB) leave room for KV (the aggregated plan
    verified 3 x L40S TP1 fp8). Each fleet's pools are now its own engine's."""
    from kvplan.analysis.disagg.screen import screen_fleets
    from kvplan.specs.prices import price_table

    model = load_model("Qwen/Qwen3-32B")
    fleets = [dd for q in (None, "fp8") for dd in enumerate_disagg(
        model, [load_gpu("L40S")], EngineConfig(max_model_len=2200, quantization=q),
        load_link("ib-ndr"), tps=(1,), max_instances=1)]
    work = Workload(name="w", arrival_s=np.arange(4) * 1.0,
                    prompt_tokens=np.full(4, 2000, dtype=np.int64),
                    output_tokens=np.full(4, 200, dtype=np.int64))
    slo = Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=3000.0),))
    s = screen_fleets(fleets, work, slo, price_table(), bounds=False)
    stage = {c.disagg.prefill.engine.quantization: c.stage for c in (*s.kept, *s.dropped)}
    assert stage == {None: "pruned_memory", "fp8": "screened"}


def test_link_note_longest_prompt_is_searched_not_scaled(tmp_path) -> None:
    """Scout over ib-ndr TP4 -> TP4, --goodput ttft:10: the note's longest prompt whose KV
    moves in time. Bytes of n pages = 65,536 x (12 n + 36 min(n, 512)); in time when
    <= (10 ms - 5 us) x 4 x 50e9 = 1,999,000,000 B = 30,501.99 page-layers: 12 n <=
    30,501.99 - 18,432 -> n = 1,005 pages = 16,080 tokens. Scaling the 32,000-token
    prompt's bytes per token (86,900 B) said 22,992 tokens, whose KV takes 11.7 ms."""
    from tests.conftest import run_cli

    r = run_cli("simulate", _llama4_scout(tmp_path, True), "--gpu", "H200", "-tp", "4",
                "--max-model-len", "32768", "--disagg", "1P1D", "--num-prompts", "1",
                "--random-input-len", "32000", "--random-output-len", "4", "--goodput",
                "ttft:10", "--json")
    assert r.code == 0, r.err
    assert "or prompts of at most 16,080 tokens" in r.err, r.err


def test_plan_disagg_pools_take_the_plans_engine_flags() -> None:
    """`kvplan plan --disagg --gpu-memory-utilization 0.5 --block-size 32 --max-model-len
    16384 --enable-prefix-caching off`: the aggregated candidates ran with these flags, but
    every xPyD fleet was planned (and its serve lines printed) at vLLM's 0.9, block 16, the
    longest request's 8,300 tokens and prefix caching on: a fleet given 1.8x the KV memory
    the user allowed, ranked against candidates that kept to it."""
    from tests.conftest import run_cli

    r = run_cli("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--disagg", "--num-prompts", "300",
                "--request-rate", "6", "--random-input-len", "8000", "--random-output-len",
                "300", "--slo", "ttft:p99:2000", "--slo", "tpot:p99:15", "--workers", "1",
                "--gpu-memory-utilization", "0.5", "--block-size", "32", "--max-model-len",
                "16384", "--enable-prefix-caching", "off", "--json")
    assert r.code == 0, r.err
    best = r.json()["joint"]["best_disaggregated"]
    assert best is not None
    for role in ("prefill", "decode"):
        line = best["serve"][role]
        assert "--gpu-memory-utilization 0.5 " in line, line
        assert "--block-size 32 " in line and "--max-model-len 16384 " in line, line
        assert "--no-enable-prefix-caching" in line, line


def test_plan_disagg_fleets_are_priced_with_the_plans_profile(tmp_path) -> None:
    """`kvplan plan --disagg --profile P`: the aggregated candidates' steps were priced with
    P, every xPyD fleet's (screen floors, simulation, what-ifs) with the bundled profile.
    P here is the bundled H100 bf16 profile with step_overhead_s 20 ms: every decode step
    takes more than 20 ms, so no request's TPOT can be below it (the bundled profile gives
    about 7 ms)."""
    import json
    from pathlib import Path

    from tests.conftest import run_cli

    bundled = json.loads((Path(__file__).parents[1] / "src/kvplan/data/profiles/default.json")
                         .read_text())
    h100 = next(p for p in bundled["profiles"]
                if p["gpu"] == "H100-SXM-80GB" and p["precision"] == "bfloat16")
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"schema": bundled["schema"], "fitted_on": "test",
                                "default": bundled["default"],
                                "profiles": [{**h100, "step_overhead_s": 0.02}]}))
    r = run_cli("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "-tp", "1", "--disagg",
                "--num-prompts", "60", "--request-rate", "2", "--random-input-len", "2000",
                "--random-output-len", "100", "--slo", "tpot:p99:200", "--search",
                "exhaustive", "--workers", "1", "--profile", str(slow), "--json")
    assert r.code == 0, r.err
    joint = r.json()["joint"]
    assert joint["best_disaggregated"]["achieved"]["p99_tpot_ms"] > 20
    assert all(lever["binding_ms"] > 20 for lever in joint["levers"])


def test_plan_disagg_slo_margin_band_judges_fleets_at_the_edge() -> None:
    """--slo-margin band: the aggregated candidates must meet every SLO term at their band's
    pessimistic edge (on H100 TP1, p99 TPOT's high ratio 1.2406: 15 ms / 1.2406 = 12.09 ms),
    the xPyD fleets were judged at 15 ms: 2P1D (p99 TPOT 14.0 ms, band edge 17.6 ms,
    "missed at its pessimistic edge") won against aggregated candidates held to their edge.
    Each fleet is now judged at its own edge (TTFT by the prefill pool's band, the rest by
    the decode pool's): 2P3D, p99 TPOT 11.99 ms, edge 14.88 ms."""
    from tests.conftest import run_cli

    r = run_cli("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--disagg", "--num-prompts", "300",
                "--request-rate", "6", "--random-input-len", "8000", "--random-output-len",
                "300", "--slo", "ttft:p99:2000", "--slo", "tpot:p99:15", "--workers", "1",
                "--slo-margin", "band", "--json")
    assert r.code == 0, r.err
    joint = r.json()["joint"]
    best = joint["best_disaggregated"]
    assert best is not None
    assert all(c["met_at_edge"] for c in best["slo_at_band_edge"]), best["slo_at_band_edge"]
    tpot = next(c for c in best["slo_at_band_edge"] if c["key"] == "p99_tpot_ms")
    high = tpot["band"][1] / tpot["value"]  # the decode pool's ratio, the what-ifs' too
    assert all(lever["binding_ms"] * high <= 15 for lever in joint["levers"]
               if lever["meets_slo"])
