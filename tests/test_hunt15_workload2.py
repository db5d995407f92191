"""Hunt 15, workloads 2: traces and calibrate against `vllm bench serve`'s loaders and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import TraceError
from kvplan.specs.requests.traces import load_csv_trace
from tests.conftest import assert_one_line_error, run_cli

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_rows_with_zero_output_tokens_are_dropped_with_one_note(tmp_path: Path) -> None:
    # vLLM's BurstGPTDataset keeps rows with 'Response tokens' > 0 (a 0 is a failed request);
    # kvplan refused the whole file at the first 0. Row 1 (10 in, 0 out) is dropped: one
    # request is left, 12 in / 5 out, arriving at 0 s (arrivals count from the first kept row)
    path = _csv(tmp_path, AZURE + "2023-11-16 18:17:03.98,10,0\n2023-11-16 18:17:04.98,12,5\n")
    trace = load_csv_trace(path)
    assert (list(trace.prompt_tokens), list(trace.output_tokens)) == ([12], [5])
    assert list(trace.arrival_s) == [0.0] and trace.dropped_rows == 1
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(path), "--json")
    assert r.code == 0, r.err
    notes = [line for line in r.err.splitlines() if "0 output tokens" in line]
    assert notes == [f"note: {path}: dropped the 1 of its 2 rows with 0 output tokens (failed "
                     "requests; vLLM's BurstGPT loader drops them too); 1 requests left"]
    assert r.json()["completed"] == 1


def test_a_trace_with_no_usable_row_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _csv(tmp_path, AZURE + "2023-11-16 18:17:03.98,10,0\n2023-11-16 18:17:04.98,12,0\n")
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(path))
    assert_one_line_error(r)
    assert "no usable request: all 2 rows have 0 output tokens" in r.err
    neg = _csv(tmp_path, "t,p,g\n0,10,3\n1,20,-4\n", "n.csv")  # a negative count is still wrong
    with pytest.raises(TraceError, match=r"line 3, column 'g': output tokens must be a whole "
                                         r"number >= 0"):
        load_csv_trace(neg, "arrival=t,input=p,output=g")


def test_more_hash_ids_than_the_prompt_fills_are_refused_naming_the_row(tmp_path: Path) -> None:
    # Mooncake's hash_ids hold one id per 512-token block of the prompt: a 100-token prompt
    # fills cdiv(100, 512) = 1 block, so 8 ids cannot be its blocks (they were taken as is:
    # the planner's bound subtracted 8 x 512 cached tokens from a 100-token prompt)
    head = "timestamp,input_length,output_length,hash_ids\n"
    bad = _csv(tmp_path, head + "0,600,10,1 2\n5,100,20,1 2 3 4 5 6 7 8\n")
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(bad))
    assert_one_line_error(r)
    assert (f"{bad}, line 3, column 'hash_ids': 8 hash ids for a 100-token prompt, which fills "
            "at most 1 block(s) of 512 tokens") in r.err
    # 600 tokens fill cdiv(600, 512) = 2 blocks: 2 ids fit, and fewer (a hashed prefix) too
    good = _csv(tmp_path, head + "0,600,10,1 2\n5,100,20,1\n6,1024,5,\n", "g.csv")
    assert [len(h) for h in load_csv_trace(good).prefix_hashes or ()] == [2, 1, 0]
    # at hash_block_tokens=16 a 100-token prompt fills cdiv(100, 16) = 7 blocks, not 8
    cols = "arrival=timestamp,arrival_unit=ms,input=input_length,output=output_length," \
           "hashes=hash_ids,hash_block_tokens=16"
    with pytest.raises(TraceError, match=r"line 3, .*8 hash ids .* at most 7 block\(s\) of 16"):
        load_csv_trace(bad, cols)


def test_calibrate_replays_a_kvplan_run_with_its_own_seed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # kvplan simulate --seed 7 --save-result did not write the seed, so calibrate drew the
    # arrivals with seed 0. At 5 req/s, 4 prompts, vLLM's legacy stream
    # (np.random.RandomState(seed).gamma, rescaled so the last lands at 4 / 5 = 0.8 s) sends
    # at 0.0184, 0.3688, 0.5024, 0.8 s with seed 7 and 0.1692, 0.4363, 0.6326, 0.8 s with 0
    import json
    import logging

    import numpy as np

    from kvplan.analysis.calibration.measurements import Defaults
    from kvplan.analysis.calibration.serving_fit import run_workload
    from kvplan.analysis.calibration.serving_runs import read_serving

    path = tmp_path / "r.json"
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--request-rate", "5", "--seed", "7",
                "--num-prompts", "4", "--save-result", str(path))
    assert r.code == 0, r.err
    doc = json.loads(path.read_text())
    assert doc["seed"] == 7
    (run,) = read_serving(path, Defaults())
    assert np.round(run_workload(run).arrival_s, 4).tolist() == [0.0184, 0.3688, 0.5024, 0.8]
    # vLLM's own file has no seed: seed 0, said once for a rated run
    del doc["seed"]
    path.write_text(json.dumps(doc))
    with caplog.at_level(logging.INFO, logger="kvplan"):
        (run,) = read_serving(path, Defaults())
    assert np.round(run_workload(run).arrival_s, 4).tolist() == [0.1692, 0.4363, 0.6326, 0.8]
    assert "records no seed" in caplog.text and "--seed 0" in caplog.text


def test_a_seedless_sweep_says_so_once(tmp_path: Path) -> None:
    # one note a file, not one per CSV row (each row's line number made each note new)
    sweep = _csv(tmp_path, "model,gpu,request_rate,num_prompts,input_len,output_len,"
                           "mean_ttft_ms,mean_tpot_ms\n"
                           "meta-llama/Llama-3.1-8B,H100,2,50,512,64,40,8\n"
                           "meta-llama/Llama-3.1-8B,H100,4,50,512,64,45,9\n", "sweep.csv")
    r = run_cli("calibrate", str(sweep), "--out", str(tmp_path / "p.json"))
    assert [line for line in r.err.splitlines() if "records no seed" in line] == [
        f"note: {sweep}: the file records no seed (vllm bench serve writes none; its --metadata "
        "seed=N adds one): a run at a finite request_rate is replayed on the arrivals --seed 0 "
        "draws, and one with another --seed sent at other times"]


@pytest.mark.parametrize("failed", [{"failed": 1}, {}])
def test_a_summary_with_failures_is_replayed_on_every_send_time(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, failed: dict[str, int]) -> None:
    # 5 sent at 2 req/s, 4 completed, no 'errors' list (saved without --save-detailed): vLLM
    # drew 5 gaps, the last send at 5 / 2 = 2.5 s (seed 0: 0.4613, 1.1892, 1.7243, 2.1806,
    # 2.5 s); the replay drew 4, ending at 4 / 2 = 2.0 s (0.4231, 1.0907, 1.5815, 2.0). Which
    # one failed is unknown: the send at position (2 * 0 + 1) * 5 // 2 = 2 is left out.
    # Without a 'failed' key the count is num_prompts - completed = 1.
    import json
    import logging

    import numpy as np

    from kvplan.analysis.calibration.measurements import Defaults
    from kvplan.analysis.calibration.serving_fit import run_workload
    from kvplan.analysis.calibration.serving_runs import read_serving

    doc = {"model_id": "meta-llama/Llama-3.1-8B", "gpu": "H100", "num_prompts": 5,
           "completed": 4, **failed, "request_rate": 2.0, "burstiness": 1.0,
           "max_concurrency": None, "total_input_tokens": 400, "total_output_tokens": 40,
           "mean_ttft_ms": 30.0, "mean_tpot_ms": 8.0, "output_throughput": 16.0}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with caplog.at_level(logging.INFO, logger="kvplan"):
        (run,) = read_serving(path, Defaults())
    w = run_workload(run)
    assert list(w.prompt_tokens) == [100] * 4
    assert np.round(w.arrival_s, 4).tolist() == [0.4613, 1.1892, 2.1806, 2.5]
    assert "1 of the 5 requests sent failed" in caplog.text
    assert "their lengths are unknown" in caplog.text


def test_a_timed_trace_with_no_time_span_says_why_the_plan_is_a_capacity_plan(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # mooncake-conversation's first rows all have timestamp 0: 5 of them span 0 s, so the plan
    # has no target rate and answers one replica's capacity; only the title said so
    import logging

    from kvplan.analysis.plan.traffic import plan_traffic
    from kvplan.specs.requests.workload import WorkloadArgs

    with caplog.at_level(logging.INFO, logger="kvplan"):
        t = plan_traffic(WorkloadArgs(dataset="mooncake-conversation", num_prompts=5))
    assert t.target is None and t.rate_rps is None
    assert ("mooncake-conversation: its 5 requests taken all arrive at 0 s (the trace's own "
            "times span 0 s), so there is no rate to serve: the plan answers the capacity of "
            "one replica instead") in caplog.text
    # random and length-only traces are capacity plans by design: no note
    caplog.clear()
    plain = _csv(tmp_path, "num_prefill_tokens,num_decode_tokens\n100,10\n200,20\n", "p.csv")
    with caplog.at_level(logging.INFO, logger="kvplan"):
        plan_traffic(WorkloadArgs(dataset="sharegpt", num_prompts=30))
        plan_traffic(WorkloadArgs(trace=plain))
    assert "no rate to serve" not in caplog.text



def test_the_verify_line_keeps_sharegpts_judged_conversations() -> None:
    # sharegpt at --seed 5: vLLM's ShareGPTDataset shuffles with random.seed(--seed), so a
    # Verify line with --seed 5 would send other conversations than the seed-0 sample the
    # plan judged; since 2026-12-08 (test_hunt19_trace19) it keeps vLLM's default seed and
    # the plan warns that vLLM then draws the send times with seed 0
    from kvplan.analysis.plan.traffic import plan_traffic
    from kvplan.analysis.plan.why.verdict import bench_dataset
    from kvplan.specs.requests.workload import WorkloadArgs

    seeded = plan_traffic(WorkloadArgs(dataset="sharegpt", num_prompts=30, seed=5,
                                       request_rate=4), seed=5)
    assert "--seed" not in bench_dataset(seeded)
    plain = plan_traffic(WorkloadArgs(dataset="sharegpt", num_prompts=30, request_rate=4))
    assert "--seed" not in bench_dataset(plain)
