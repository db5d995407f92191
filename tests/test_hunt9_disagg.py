"""hunt9-disagg: regressions found in the disaggregated prefill/decode path."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.disagg.floors import cached_timer, floor_latencies
from kvplan.analysis.disagg.plan import enumerate_disagg
from kvplan.analysis.disagg.serving import plan_pool, simulate_disagg_serving
from kvplan.analysis.plan.judge import latencies
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig

LLAMA_8B = load_model("meta-llama/Llama-3.1-8B")


def _fleet_1p1d(model=LLAMA_8B, engine=None, link="ib-ndr"):
    (dd,) = enumerate_disagg(model, [load_gpu("H100")], engine or EngineConfig(max_model_len=16384),
                             load_link(link), tps=(1,), max_instances=1)[:1]
    return dd


def test_zero_load_ttft_floor_counts_prefix_cache_hits() -> None:
    """A trace whose 8,192-token prompts share 15 hashed 512-token blocks (7,680 tokens):
    the prefill pool caches them, so after the first request only 512 tokens are computed.
    The floor priced all 8,192 (301.8 ms at p90 on H100 against 129.4 ms simulated) and
    `kvplan plan --disagg` pruned every fleet that exhaustive search verified.
    Floor prefill now: 8,192 - 15 x 512 = 512 tokens in one step at no context."""
    n = 20
    shared = np.arange(15, dtype=np.int64)
    work = Workload(name="prefix", arrival_s=np.arange(n) * 0.5,
                    prompt_tokens=np.full(n, 8192, dtype=np.int64),
                    output_tokens=np.full(n, 32, dtype=np.int64),
                    prefix_hashes=(shared,) * n,  # the last 512 tokens: unhashed, own
                    hash_block_tokens=512)
    dd = _fleet_1p1d()
    pre, dec = plan_pool("prefill", dd.prefill), plan_pool("decode", dd.decode)
    low = floor_latencies(dd, pre, dec, work)
    sim = latencies(simulate_disagg_serving(dd, work).result.client)
    assert (sim.ttft_ms < 1e6).all()  # every request served
    assert (low.ttft_ms <= sim.ttft_ms + 1e-9).all()  # a floor: never above the simulation
    # the prefill part of the floor is one 512-token step at no context
    tp, td = cached_timer(pre), cached_timer(dec)
    p = np.array([8192])
    api = float(tp.api_delays_s(p)[0] + td.api_delays_s(p)[0])
    step512 = float(tp.step_time_s(np.array([512]), np.array([0])))
    # link: 8,192 tokens x 131,072 B (32 layers x 8 heads x 128 x 2 x 2 B) / 50e9 + 5 us
    moved = 8192 * 131072 / 50e9 + 5e-6
    first = float(td.step_time_s(np.array([1]), np.array([8191])))
    assert abs(low.ttft_ms[0] - 1000 * (api + step512 + moved + first)) < 1e-9


def test_sliding_window_model_moves_every_prompt_page() -> None:
    """Mistral-7B-v0.1 (every layer a 4,096-token window) under NixlConnector: the decode
    instance allocates cdiv(8,000, 16) = 500 blocks for the prompt and `_read_blocks` reads
    every one of them on every layer (only Llama 4's chunked layers are clipped). kvplan
    moved the window's pages only: 500 - (8,000 - 4,096) // 16 = 256.
    Per layer and page: 16 tokens x 8 KV heads x 128 x 2 (K, V) x 2 B = 65,536 B;
    32 layers x 500 pages x 65,536 B = 1,048,576,000 B (was 536,870,912);
    wire 1,048,576,000 / 50e9 = 20.97152 ms, + 5 us latency = 20.97652 ms."""
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment

    model = load_model("mistralai/Mistral-7B-v0.1")
    gpu, engine = load_gpu("H100"), EngineConfig(max_model_len=16384)
    pool = Deployment(model=model, gpu=gpu, engine=engine, replicas=1)
    dd = DisaggDeployment(prefill=pool, decode=pool, link=load_link("ib-ndr"))
    work = Workload(name="one", arrival_s=np.zeros(1), prompt_tokens=np.array([8000]),
                    output_tokens=np.array([4]))
    run = simulate_disagg_serving(dd, work)
    assert run.result.moved_bytes == 32 * 500 * 65_536 == 1_048_576_000
    t = run.result.transfers
    assert abs(float(t.transfer_s[0]) - (1_048_576_000 / 50e9 + 5e-6)) < 1e-12


def test_decode_tp_above_kv_heads_needs_a_replicated_prefill() -> None:
    """Qwen3-30B-A3B has 4 KV heads. Prefill TP1 holds all 4 on one GPU (block of 4 heads);
    decode TP8 holds one replicated head per GPU. vLLM 0.11's NixlConnector.add_remote_agent
    (is_kv_replicated = prefill TP // 4 >= 1 is False) asserts the prefill block equals the
    decode block x tp_ratio: 4 heads != 1 x 8, so vLLM does not start. kvplan simulated it;
    now it refuses (exit 2) and the planner's grid drops (1, 8) and (2, 8) but keeps (4, 8)
    (prefill TP4 replicates too: 1 head each side, equal blocks) and (2, 4)."""

    from tests.conftest import assert_one_line_error, run_cli

    model = load_model("Qwen/Qwen3-30B-A3B")
    r = run_cli("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--disagg", "1P1D",
                "--prefill-tp", "1", "--decode-tp", "8", "--num-prompts", "4")
    assert_one_line_error(r)
    assert "4 KV heads" in r.err and "--decode-tp <= 4" in r.err, r.err
    fleets = enumerate_disagg(model, [load_gpu("H100")], EngineConfig(max_model_len=8192),
                              load_link("ib-ndr"), tps=(1, 2, 4, 8), max_instances=1)
    pairs = {(d.prefill.engine.tensor_parallel_size, d.decode.engine.tensor_parallel_size)
             for d in fleets}
    assert (1, 8) not in pairs and (2, 8) not in pairs
    assert {(4, 8), (8, 8), (2, 4), (1, 4), (1, 1)} <= pairs


def test_plan_output_rate_is_simulates_output_throughput() -> None:
    """`kvplan plan --disagg`'s best_disaggregated.output_tokens_per_s divided the output
    tokens by (last finish - first arrival), while `kvplan simulate --disagg`'s
    output_throughput and the aggregated fleets' rate divide by vLLM's benchmark duration
    (t = 0 to the last finish): 1,166.80 against 1,164.59 tok/s for the same fleet and
    traffic (8,000 / 300 tokens at 4 req/s). Now both are tokens / last finish."""
    from kvplan.analysis import metrics as mx
    from kvplan.analysis.disagg.candidates import JointCandidate
    from kvplan.analysis.disagg.joint_levers import disagg_bands
    from kvplan.analysis.plan.judge import judge
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload
    from kvplan.specs.slo import PercentileBound, Slo

    work = build_workload(WorkloadArgs(num_prompts=40, random_input_len=1000,
                                       random_output_len=50, request_rate=0.5, seed=2))
    assert work.arrival_s.min() > 0.1  # the first request is sent after a gap
    dd = _fleet_1p1d()
    run = simulate_disagg_serving(dd, work)
    slo = Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=5000.0),))
    c = JointCandidate(id="d0000", kind="disaggregated", stage="verified", reason="",
                       gpus=2, usd_per_hour=1.0, index=0, disagg=dd,
                       verdict=judge(latencies(run.result.client), slo), run=run)
    client = run.result.client
    want = mx.compute_metrics(client).output_throughput
    done = client.finished
    assert want == float(client.output_tokens[done].sum()) / float(client.finish_s[done].max())
    assert disagg_bands(c, slo).output_tokens_per_s == want
