"""Hunt 19 (trace19): workloads and metrics as `vllm bench serve` defines them."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.analysis.metrics import compute_metrics
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import workload
from tests.conftest import run_cli
from tests.test_api_delay import ApiTimer

LIM = Limits(max_num_batched_tokens=100, max_num_seqs=10)


def _sim(w, timer, fast):
    return simulate(w, timer=timer, num_blocks=1000, block_size=4, limits=LIM,
                    max_model_len=100, fast=fast, validate=True)


@pytest.mark.parametrize("fast", [False, True])
def test_a_closed_loop_refusal_ends_the_duration_when_it_frees_its_slot(fast) -> None:
    """vLLM bench: a request the server refuses ends its task when the error reaches the
    client; that one moment releases its --max-concurrency slot and is when
    benchmark_duration (asyncio.gather of every task) can stop. kvplan freed the slot at
    the refusal's return but counted the failure at its send. LinearTimer (1 s a step),
    API path 0.5 s, concurrency 1, max_model_len 100:
    A (4 + 2) sent 0, at the engine 0.5, tokens 1.5, 2.5: done 2.5;
    B (300 + 2 > 100) sent 2.5, refused as it would reach the engine: 2.5 + 0.5 = 3.0,
    its slot frees then (C is sent at 3.0);
    C (4 + 2) sent 3.0, engine 3.5, tokens 4.5, 5.5.
    Without C the run ends with B's refusal: duration 3.0 s (was 2.5, B's send)."""
    timer = ApiTimer(api_s=0.5)
    r = _sim(workload([0, 0, 0], [4, 300, 4], [2, 2, 2], concurrency=1), timer, fast)
    assert list(r.rejected) == [1]
    assert r.sent_s.tolist() == [0.0, 2.5, 3.0]  # C follows B's freed slot at 3.0
    assert compute_metrics(r).duration_s == 5.5
    r = _sim(workload([0, 0], [4, 300], [2, 2], concurrency=1), timer, fast)
    assert r.sent_s.tolist() == [0.0, 2.5]
    assert compute_metrics(r).duration_s == 3.0
    assert compute_metrics(r).output_throughput == 2 / 3.0


@pytest.mark.parametrize("fast", [False, True])
def test_an_open_loop_refusal_returns_after_the_api_servers_admission(fast) -> None:
    """The API server refuses a too-long prompt after admitting (tokenising) it: vLLM
    checks prompt + max_tokens against max_model_len on the token ids. API path 0.5 s,
    admission 0.25 s (FIFO): A (4 + 2) sent 0: admitted 0.25, engine 0.75, tokens 1.75,
    2.75. B (300 + 2) sent 10: admitted 10.25, its failure back at 10.25 + 0.5 = 10.75,
    when a served request would reach the engine. Duration 10.75 s (was 10.0)."""
    r = _sim(workload([0, 10], [4, 300], [2, 2]), ApiTimer(api_s=0.5, admit_s=0.25), fast)
    assert list(r.rejected) == [1] and r.finish_s[0] == 2.75
    m = compute_metrics(r)
    assert m.duration_s == 10.75 and m.failed == 1
    assert np.isnan(r.failed_s[0]) and r.failed_s[1] == 10.75


def test_a_prefix_only_random_prompt_is_vllms_valid_input() -> None:
    """vLLM RandomDataset (0.11.0, get_sampling_params): --random-input-len 0 samples input
    lengths on [floor(0), ceil(0)] = [0, 0] (after max(0, 0 - special tokens)), so every
    prompt is the --random-prefix-len prefix alone. kvplan refused it ('--random-input-len
    must be a whole number >= 1, got 0'); prompts are 100 + 0 = 100 tokens, outputs 8. A
    0-token prompt (no prefix either) is still refused."""
    from kvplan.errors import InputError
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    w = build_workload(WorkloadArgs(num_prompts=4, random_input_len=0, random_prefix_len=100,
                                    random_output_len=8, random_range_ratio=0.5))
    assert w.prompt_tokens.tolist() == [100] * 4
    assert w.output_tokens.min() >= 4 and w.output_tokens.max() <= 12  # [8 * 0.5, 8 * 1.5]
    with pytest.raises(InputError, match="can draw 0-token prompts"):
        WorkloadArgs(random_input_len=0)


def test_simulate_runs_a_prefix_only_random_workload() -> None:
    """The CLI: 3 prompts of the 64-token prefix alone, 4 outputs each: 192 input tokens."""
    r = run_cli("simulate", "meta-llama/Llama-3.2-1B", "--random-input-len", "0",
                  "--random-prefix-len", "64", "--random-output-len", "4",
                "--num-prompts", "3", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["total_input_tokens"] == 192 and d["completed"] == 3


def test_a_prefill_side_refusal_returns_after_the_prefill_api_path() -> None:
    """A disaggregated fleet: the proxy forwards the request to a prefill server, whose API
    server refuses it after admitting it, as the decode side's refusal already counted
    its API path (test_hunt15_disagg3). tests/test_disagg_trace.py's pools (a step 1 s +
    0.25 s a token, max_model_len 10), the prefill side with a 0.5 s API path: r0 (8 + 2)
    is done well before 20 s; r1 (t = 20, 10 + the proxy's max_tokens 1 = 11 > 10) is
    refused by the prefill server at 20 + 0.5 = 20.5 s, the duration's end (was 20.0)."""
    from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
    from tests.test_disagg_trace import COST, LIMITS, SHAPE, TIMER
    from tests.test_hunt15_disagg3 import _HopTimer

    def pool(timer):
        return PoolSim(instances=1, timer=timer, num_blocks=64, shape=SHAPE, limits=LIMITS,
                       max_model_len=10)

    w = workload([0.0, 20.0], [8, 10], [2, 1])
    r = simulate_disagg(w, prefill=pool(_HopTimer(base_s=1.0, per_token_s=0.25)),
                        decode=pool(TIMER), transfer=COST, validate=True)
    c = r.client
    assert list(c.rejected) == [1] and "prefill side" in c.rejected[1]
    assert float(c.finish_s[0]) < 20.0
    assert compute_metrics(c).duration_s == 20.5


def _plan_sharegpt(*extra: str) -> dict:
    r = run_cli("plan", "meta-llama/Llama-3.2-1B", "--gpu", "H100", "--dataset", "sharegpt",
                "--num-prompts", "200", "--slo", "ttft:p99:2000", "--json", *extra)
    assert r.code == 0, r.err
    doc: dict = r.json()
    return doc


def test_a_sharegpt_plans_verify_line_sends_the_conversations_it_judged() -> None:
    """vLLM 0.11.0: ShareGPTDataset shuffles with random.seed(--seed) before it takes the
    first turns, so `vllm bench serve --dataset-name sharegpt --seed 7` sends other
    conversations than the seed-0 sample kvplan bundles and judged (kvplan's --seed moves
    only the arrivals). The Verify line passed --seed 7 and no warning said so; it now
    keeps vLLM's default seed (the judged conversations) and says that vLLM then draws
    the send times with seed 0, not 7 (at --request-rate, or in capacity mode at the rate
    found: kvplan draws those gaps from --seed 7's stream too)."""
    for extra in (("--request-rate", "10"), ()):
        doc = _plan_sharegpt("--seed", "7", *extra)
        bench = doc["summary"]["vllm_bench_serve"]
        assert "--dataset-name sharegpt" in bench and "--seed" not in bench
        assert any("kvplan drew them with --seed 7" in w for w in doc["warnings"]), doc
    doc = _plan_sharegpt("--request-rate", "10")
    assert not any("kvplan drew them" in w for w in doc["warnings"]), doc["warnings"]


def test_the_zero_token_refusal_names_the_prefix_way_out() -> None:
    """--random-input-len 0 at ratio 0 was told 'raise the length or lower the ratio' (a
    ratio of 0 cannot go lower); a shared --random-prefix-len makes such prompts valid."""
    from kvplan.errors import InputError
    from kvplan.specs.requests.workload import WorkloadArgs

    with pytest.raises(InputError, match="or give a shared --random-prefix-len"):
        WorkloadArgs(random_input_len=0)


def test_a_result_says_the_time_scale_it_replayed_at() -> None:
    """`--dataset mooncake-synthetic --time-scale 0.5` replays the trace twice as fast, yet
    its --save-result / --json header read as the trace at its own pace (dataset
    mooncake-synthetic, request_rate "trace", no word of the scale): two files of different
    load looked alike. The header now carries time_scale where it is not 1."""
    args = ("simulate", "meta-llama/Llama-3.2-1B", "--dataset", "mooncake-synthetic",
            "--num-prompts", "5", "--json")
    r = run_cli(*args, "--time-scale", "0.5")
    assert r.code == 0, r.err
    d = r.json()
    assert d["request_rate"] == "trace" and d["time_scale"] == 0.5
    r = run_cli(*args)
    assert "time_scale" not in r.json()
    r = run_cli(*args, "--time-scale", "0.5", "--disagg", "1P1D", "--seed", "3")
    assert r.code == 0, r.err
    d = r.json()  # the disaggregated run's header too, with the seed one server's writes
    assert d["time_scale"] == 0.5 and d["seed"] == 3


def test_the_sharegpt_seed_note_says_what_the_seed_changes(caplog) -> None:
    """Without --request-rate every sharegpt request is sent at t = 0, so kvplan's --seed 5
    changes nothing, yet the note said it 'changes only the arrival times here'."""
    import logging

    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    with caplog.at_level(logging.INFO, logger="kvplan"):
        build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=3, seed=5))
    assert "--seed 5 changes nothing (every request at t = 0) here" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kvplan"):
        build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=3, seed=5,
                                    request_rate=2))
    assert "--seed 5 changes only the arrival times here" in caplog.text
