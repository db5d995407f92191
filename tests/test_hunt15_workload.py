"""Hunt 15, workloads: trace layouts, datasets and flags against `vllm bench serve`."""

from __future__ import annotations

from pathlib import Path

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
