"""Hunt 13, workloads: --time-scale, plan's trace size, the saved request_rate, help words."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.specs.requests.workload import WorkloadArgs, build_workload


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_time_scale_on_a_trace_file_without_arrivals_is_refused(tmp_path: Path) -> None:
    # a Vidur layout (lengths only) has no times to rescale: --time-scale 2 was dropped
    # without a word and every request sent at t=0
    path = _csv(tmp_path, "num_prefill_tokens,num_decode_tokens\n100,10\n200,20\n")
    with pytest.raises(InputError, match="--time-scale"):
        build_workload(WorkloadArgs(trace=path, time_scale=2.0))
    assert list(build_workload(WorkloadArgs(trace=path)).arrival_s) == [0.0, 0.0]


def test_time_scale_on_a_timed_trace_file_still_scales(tmp_path: Path) -> None:
    path = _csv(tmp_path, "ts,p,o\n10,100,10\n11,100,10\n13,100,10\n")
    w = build_workload(
        WorkloadArgs(trace=path, trace_columns="arrival=ts,input=p,output=o", time_scale=2.0)
    )
    assert list(w.arrival_s) == [0.0, 2.0, 6.0]


def _header(**kw: object) -> dict[str, object]:
    from kvplan.analysis.serving import simulate_serving

    args = WorkloadArgs(**kw)
    run = simulate_serving("meta-llama/Llama-3.1-8B", "H100", workload=args)
    return {"rate": run.header(args)["request_rate"], "end": float(run.result.finish_s.max())}


def test_a_trace_under_max_concurrency_is_saved_as_trace_not_inf(tmp_path: Path) -> None:
    # the closed loop still sends each request no earlier than its trace time (the run lasts
    # past the last arrival, 3 s); 'inf' told `kvplan calibrate` to send all at t=0
    path = _csv(tmp_path, "ts,p,o\n0,100,10\n1,100,10\n1,100,10\n3,100,10\n")
    cols = "arrival=ts,input=p,output=o"
    got = _header(trace=path, trace_columns=cols, max_concurrency=2)
    assert got["rate"] == "trace" and got["end"] > 3.0  # type: ignore[operator]
    assert _header(num_prompts=4, max_concurrency=2)["rate"] == "inf"  # a burst at t=0
    assert _header(num_prompts=4, max_concurrency=2, request_rate=2)["rate"] == 2.0


@pytest.mark.parametrize(
    ("kw", "verified", "rows"),
    [
        ({"dataset": "sharegpt", "request_rate": 10}, 1000, 16384),  # was 1000
        ({"dataset": "sharegpt", "request_rate": 10, "num_prompts": 2000}, 2000, 16384),  # 2000
        ({"dataset": "azure-code", "num_prompts": 2000}, 2000, 8819),
        ({"request_rate": 5}, 1000, 1000),  # random: no trace beyond the draws
    ],
)
def test_plan_counts_every_row_of_the_trace(
    kw: dict[str, object], verified: int, rows: int
) -> None:
    # sharegpt holds 16,384 requests; the plan said "all 1,000 requests of the trace"
    from kvplan.analysis.plan.traffic import plan_traffic

    t = plan_traffic(WorkloadArgs(**kw))
    assert (t.requests, t.trace_requests) == (verified, rows)


def test_plan_help_gives_the_trace_cut_it_applies() -> None:
    # the help said "default: first 2000"; a longer trace is cut to its first 10,000
    from kvplan.analysis.plan.traffic import DEFAULT_PLAN_PROMPTS
    from kvplan.cli.cmd_plan import NUM_HELP

    assert f"first {DEFAULT_PLAN_PROMPTS}" in NUM_HELP and "2000" not in NUM_HELP
    args = WorkloadArgs(dataset="azure-conv", request_rate=None)
    from kvplan.analysis.plan.traffic import plan_traffic

    assert plan_traffic(args).requests == DEFAULT_PLAN_PROMPTS == 10000


def test_a_role_given_twice_in_trace_columns_is_refused() -> None:
    # "input=a,input=b" read column b for the prompts without a word
    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import parse_trace_columns

    with pytest.raises(TraceError, match="input= twice"):
        parse_trace_columns("input=a,input=b,output=c")
    assert parse_trace_columns("input=a,output=c").input == "a"


@pytest.mark.parametrize(
    "spec", ["input=a,output=c,arrival_unit=ms", "input=a,output=c,hash_block_tokens=64"]
)
def test_a_column_option_without_its_column_is_refused(spec: str) -> None:
    # both were dropped without a word (arrival_unit=ms with no arrival column: all at t=0)
    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import parse_trace_columns

    with pytest.raises(TraceError, match="applies to the"):
        parse_trace_columns(spec)
    fmt = parse_trace_columns(
        "arrival=t,arrival_unit=ms,input=a,output=c,hashes=h,hash_block_tokens=64"
    )
    assert (fmt.arrival_unit, fmt.hash_block_tokens) == ("ms", 64)


def test_a_json_lines_trace_is_named_as_json(tmp_path: Path) -> None:
    # Mooncake's own JSONL was told "unknown trace layout; give --trace-columns", which
    # cannot help: the header row was the first JSON object. Hunt 17 reads JSON lines
    # (test_hunt17_work17 D3); a JSON array is still named as JSON
    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import load_csv_trace

    line = '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [0]}'
    assert len(load_csv_trace(_csv(tmp_path, (line + "\n") * 2, "mooncake.jsonl"))) == 2
    path = _csv(tmp_path, f"[{line},\n{line}]\n", "mooncake.json")
    with pytest.raises(TraceError, match="this is a JSON array, not CSV"):
        load_csv_trace(path)


def test_too_many_sharegpt_prompts_does_not_say_omit_it_for_all() -> None:
    # omitting --num-prompts gives sharegpt's 1000 (vLLM's default), not all 16,384 rows
    with pytest.raises(InputError) as e:
        build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=20000))
    assert "give at most 16384" in str(e.value) and "omit" not in str(e.value)
    with pytest.raises(InputError, match="or omit it to use all"):
        build_workload(WorkloadArgs(dataset="azure-code", num_prompts=9000))
    assert len(build_workload(WorkloadArgs(dataset="sharegpt"))) == 1000


def test_a_disaggregated_trace_replay_is_saved_as_trace_not_inf(tmp_path: Path) -> None:
    # the aggregated header said 'trace' (f0b65c3); the xPyD one still said 'inf' for a
    # 3-second replay, which `kvplan calibrate` would read as every request at t=0
    import json
    import subprocess
    import sys

    path = _csv(tmp_path, "ts,p,o\n0,100,10\n1,100,10\n3,100,10\n")
    argv = [
        sys.executable,
        "-m",
        "kvplan",
        "simulate",
        "meta-llama/Llama-3.1-8B",
        "--disagg",
        "1P1D",
        "--trace",
        str(path),
        "--trace-columns",
        "arrival=ts,input=p,output=o",
        "--json",
    ]
    doc = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    assert doc["request_rate"] == "trace" and doc["duration"] > 3.0
    doc = json.loads(
        subprocess.run(
            [*argv, "--request-rate", "2"], check=True, capture_output=True, text=True
        ).stdout
    )
    assert doc["request_rate"] == 2.0


def test_an_empty_dataset_name_is_refused_not_read_as_random() -> None:
    # --dataset "" (an unset shell variable) ran 1000 random prompts without a word
    from kvplan.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown dataset ''"):
        WorkloadArgs(dataset="")
    assert WorkloadArgs().dataset_name == "random"


def test_a_bad_millisecond_arrival_is_not_called_seconds(tmp_path: Path) -> None:
    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import load_csv_trace

    path = _csv(tmp_path, "ts,p,o\n0,10,5\nsoon,10,5\n")
    with pytest.raises(TraceError, match="'soon' is not a number of milliseconds"):
        load_csv_trace(path, "arrival=ts,arrival_unit=ms,input=p,output=o")
    with pytest.raises(TraceError, match="'soon' is not a number of seconds"):
        load_csv_trace(path, "arrival=ts,input=p,output=o")


def test_the_verify_line_sends_whole_outputs_with_ignore_eos() -> None:
    # kvplan verifies the fleet with every request generating all its output tokens; the
    # `vllm bench serve` line lacked --ignore-eos, so EOS could end outputs early there
    from tests.conftest import run_cli

    r = run_cli(
        "plan",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "H100",
        "-tp",
        "1",
        "--num-prompts",
        "100",
        "--request-rate",
        "5",
        "--random-input-len",
        "256",
        "--random-output-len",
        "32",
        "--slo",
        "ttft:p99:2000",
        "--json",
    )
    assert r.code == 0, r.err
    bench = r.json()["summary"]["vllm_bench_serve"]
    assert " --request-rate 5 --ignore-eos --percentile-metrics " in bench


def test_plan_takes_num_prompts_from_a_trace_longer_than_the_run_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # plan counted the whole trace by building it without --num-prompts, which refuses a trace
    # over the 1,000,000-request cap: "give --num-prompts 1,000,000 or fewer" when it was given
    from kvplan.analysis.plan.traffic import plan_traffic
    from kvplan.specs.requests import bounds

    monkeypatch.setattr(bounds, "MAX_PROMPTS", 4)  # the cap, scaled down: a 6-row trace
    rows = "".join(f"{i},100,10\n" for i in range(6))
    path = _csv(tmp_path, "ts,p,o\n" + rows)
    args = WorkloadArgs(trace=path, trace_columns="arrival=ts,input=p,output=o", num_prompts=3)
    t = plan_traffic(args)
    assert (t.requests, t.trace_requests) == (3, 6)
