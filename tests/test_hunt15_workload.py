"""Hunt 15, workloads: trace layouts, datasets and flags against `vllm bench serve`."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from kvplan.errors import TraceError
from kvplan.specs.requests.workload import WorkloadArgs, build_workload


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_vidur_replay_trace_keeps_its_arrived_at_times(tmp_path: Path) -> None:
    # Vidur's replay traces (data/processed_traces/splitwise_conv.csv) are
    # arrived_at,num_prefill_tokens,num_decode_tokens with arrived_at in seconds since the
    # first request: the header was read as the lengths-only Vidur layout and every request
    # sent at t=0 (a 10.8 s replay simulated as an 0.85 s burst)
    path = _csv(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                          "2.5,1000,100\n7.5,1000,100\n12.5,1000,100\n")
    w = build_workload(WorkloadArgs(trace=path))
    assert list(w.arrival_s) == [0.0, 5.0, 10.0]  # seconds since the first row
    scaled = build_workload(WorkloadArgs(trace=path, time_scale=0.5))
    assert list(scaled.arrival_s) == [0.0, 2.5, 5.0]
    # the lengths-only layout still reads without arrivals
    plain = _csv(tmp_path, "num_prefill_tokens,num_decode_tokens\n100,10\n200,20\n", "p.csv")
    assert list(build_workload(WorkloadArgs(trace=plain)).arrival_s) == [0.0, 0.0]


def test_sharegpt_with_another_seed_says_vllm_would_send_other_requests(
        caplog: pytest.LogCaptureFixture) -> None:
    # vLLM's ShareGPTDataset shuffles with random.seed(--seed): --seed 5 samples other
    # conversations, but kvplan's bundled sharegpt is the seed-0 sample and --seed moved only
    # the arrivals, without a word (a plan's Verify line even claimed the same requests)
    with caplog.at_level(logging.INFO, logger="kvplan"):
        w = build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=3, seed=5))
    assert list(w.prompt_tokens) == [13, 25, 27]  # the seed-0 rows (SOURCES.md: Lambda's run)
    assert "vllm bench serve --seed 5 also samples other conversations" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kvplan"):
        build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=3))
    assert "other conversations" not in caplog.text


@pytest.mark.parametrize("cell", ["1700000000", "2020", "now", "-5"])
def test_a_number_in_a_datetime_arrival_column_is_refused(tmp_path: Path, cell: str) -> None:
    # numpy reads a bare number as a year: epoch seconds 1700000000 then 1700000001 were
    # arrivals 31,622,400 s (366 days) apart instead of 1 s, and 'now' read the clock
    second = str(int(cell) + 1) if cell.isdigit() else cell
    path = _csv(tmp_path, f"ts,p,o\n{cell},100,10\n{second},100,10\n")
    cols = "arrival=ts,arrival_unit=datetime,input=p,output=o"
    with pytest.raises(TraceError, match=r"line 2, column 'ts': .* arrival_unit=s"):
        build_workload(WorkloadArgs(trace=path, trace_columns=cols))
    # seconds as seconds, and real date-times, still read
    seconds = build_workload(WorkloadArgs(trace=path, trace_columns=cols.replace(
        "datetime", "s"))) if cell.isdigit() else None
    assert seconds is None or list(seconds.arrival_s) == [0.0, 1.0]
    dates = _csv(tmp_path, "ts,p,o\n2023-11-16 18:17:03.5,100,10\n2023-11-16 18:17:05,100,10\n",
                 "d.csv")
    assert list(build_workload(WorkloadArgs(trace=dates, trace_columns=cols)).arrival_s) == [
        0.0, 1.5]


def test_trace_columns_with_spaces_keep_the_arrival_column(tmp_path: Path) -> None:
    # the --trace-columns parser strips spaces around '=', but has_own_arrivals looked for the
    # text 'arrival=': 'arrival = ts' read the column and then sent every request at t=0
    # (and --time-scale was refused as if the file had no times)
    path = _csv(tmp_path, "ts,p,o\n10,100,10\n11,100,10\n13,100,10\n")
    cols = "arrival = ts, input = p, output = o"
    assert list(build_workload(WorkloadArgs(trace=path, trace_columns=cols)).arrival_s) == [
        0.0, 1.0, 3.0]  # seconds since the first row, 10
    w = build_workload(WorkloadArgs(trace=path, trace_columns=cols, time_scale=2.0))
    assert list(w.arrival_s) == [0.0, 2.0, 6.0]
    # no arrival role: lengths only, every request at t=0
    plain = WorkloadArgs(trace=path, trace_columns="input = p, output = o")
    assert not plain.has_own_arrivals
    assert list(build_workload(plain).arrival_s) == [0.0, 0.0, 0.0]


def test_calibrate_replays_a_run_with_failures_at_vllms_send_times(tmp_path: Path) -> None:
    # vllm bench serve draws one gap per request it sends (failed ones too) and rescales so
    # the last of all 5 lands at 5 / 2 = 2.5 s; a request it rejects never reaches the engine.
    # The replay drew gaps for the 4 completed ones only, ending at 4 / 2 = 2.0 s. vLLM's
    # --seed 0 sends (tests/test_calibrate_arrivals.py) are 0.4613, 1.1892, 1.7243, 2.1806,
    # 2.5 s; request 1 failed, so the engine saw the other four.
    import json

    from kvplan.analysis.calibration.measurements import Defaults
    from kvplan.analysis.calibration.serving_fit import run_workload
    from kvplan.analysis.calibration.serving_runs import read_serving

    doc = {"model_id": "meta-llama/Llama-3.1-8B", "gpu": "H100", "num_prompts": 5,
           "completed": 4, "failed": 1, "request_rate": 2.0, "burstiness": 1.0,
           "max_concurrency": None, "total_input_tokens": 400, "total_output_tokens": 40,
           "mean_ttft_ms": 30.0, "mean_tpot_ms": 8.0, "output_throughput": 16.0,
           "input_lens": [100, 9000, 100, 100, 100], "output_lens": [10, 0, 10, 10, 10],
           "errors": ["", "context too long", "", "", ""]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    (run,) = read_serving(path, Defaults())
    w = run_workload(run)
    assert list(w.prompt_tokens) == [100, 100, 100, 100]
    assert np.round(w.arrival_s, 4).tolist() == [0.4613, 1.7243, 2.1806, 2.5]
