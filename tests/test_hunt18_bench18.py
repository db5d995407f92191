"""Hunt 18 (bench18): kvplan against `vllm bench serve` (vllm/benchmarks/serve.py and
datasets.py): what simulate reports, and calibrate reading vLLM's printed summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

MODEL = "Qwen/Qwen3-8B"

# vllm/benchmarks/serve.py benchmark() prints each line as "{:<40} {:<10}" (counts) or
# "{:<40} {:<10.2f}" (rates, ms); "Maximum request concurrency:" only when set and "Request
# rate configured (RPS):" only for a finite rate; the value's padding is kept (ljust below).
_LINES = """\
INFO 10-01 12:00:00 [__init__.py:216] Automatically detected platform cuda.
tip: install termplotlib and gnuplot to plot the metrics
============ Serving Benchmark Result ============
Successful requests:                     100
Failed requests:                         0
Maximum request concurrency:             32
Benchmark duration (s):                  20.51
Total input tokens:                      102400
Total generated tokens:                  12800
Request throughput (req/s):              4.88
Output token throughput (tok/s):         624.10
Peak output token throughput (tok/s):    1100.00
Peak concurrent requests:                40.00
Total Token throughput (tok/s):          5616.87
---------------Time to First Token----------------
Mean TTFT (ms):                          80.12
Median TTFT (ms):                        75.33
P99 TTFT (ms):                           150.21
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          9.80
Median TPOT (ms):                        9.70
P99 TPOT (ms):                           12.01
---------------Inter-token Latency----------------
Mean ITL (ms):                           9.75
Median ITL (ms):                         9.50
P99 ITL (ms):                            20.33
==================================================
"""
SUMMARY = "".join(line.ljust(51) + "\n" for line in _LINES.splitlines())


def _read(path: Path) -> list:
    from kvplan.analysis.calibration.measurements import Defaults
    from kvplan.analysis.calibration.serving_runs import is_serving_file, read_serving

    assert is_serving_file(path)
    return read_serving(path, Defaults(model=MODEL, gpu="h100"))


def test_calibrate_reads_vllm_bench_serves_printed_summary(tmp_path: Path) -> None:
    # The help says calibrate reads "vllm bench output"; the summary vllm bench serve prints
    # (pasted from a terminal) was refused: "bench.txt:1: not valid JSON (column 1: Expecting
    # value)". Its lines hold what the replay needs: 100 requests, 102,400 / 100 = 1,024
    # input and 12,800 / 100 = 128 output tokens each, concurrency 32, no rate line (inf).
    path = tmp_path / "bench.txt"
    path.write_text(SUMMARY)
    (run,) = _read(path)
    assert run.num_prompts == 100
    assert run.input_lens == (1024,) * 100 and run.output_lens == (128,) * 100
    assert run.max_concurrency == 32 and run.request_rate is None and run.burstiness == 1.0
    assert run.measured == pytest.approx({"ttft_s": 0.08012, "tpot_s": 0.0098,
                                          "itl_s": 0.00975, "output_throughput_tok_s": 624.10})
    assert run.failed_at == () and run.id == "bench.txt"


def test_a_printed_rate_and_failed_requests_are_replayed(tmp_path: Path) -> None:
    # 9 successful + 1 failed = 10 sent at 2.00 req/s; the failed one's send is left out at
    # position (2 * 0 + 1) * 10 // 2 = 5, as for a save-result JSON without --save-detailed.
    text = SUMMARY.replace("Failed requests:                         0 ",
                           "Failed requests:                         1 ")
    text = text.replace("Successful requests:                     100 ",
                        "Successful requests:                     9   ")
    text = text.replace("Maximum request concurrency:             32 ",
                        "Request rate configured (RPS):           2.00 ")
    text = text.replace("102400", "9216").replace("12800", "1152")  # 1,024 / 128 each
    path = tmp_path / "rated.log"
    path.write_text(text)
    (run,) = _read(path)
    assert (run.num_prompts, run.request_rate, run.max_concurrency) == (9, 2.0, None)
    assert run.input_lens == (1024,) * 9 and run.failed_at == (5,)


def test_two_pasted_summaries_are_two_runs_named_by_line(tmp_path: Path) -> None:
    second = SUMMARY.replace("Maximum request concurrency:             32 ",
                             "Maximum request concurrency:             8  ")
    path = tmp_path / "sweep.txt"
    path.write_text(SUMMARY + "\nsome server log line: 3\n" + second)
    runs = _read(path)
    assert [r.id for r in runs] == ["sweep.txt:3", "sweep.txt:32"]
    assert [r.max_concurrency for r in runs] == [32, 8]


def test_a_summary_missing_a_needed_line_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.txt"
    path.write_text("\n".join(x for x in SUMMARY.splitlines()
                              if not x.startswith("Total generated tokens")))
    r = run_cli("calibrate", str(path), "--gpu", "h100", "--model", MODEL)
    assert_one_line_error(r)
    assert "cut.txt:3:" in r.err and "'Total generated tokens:'" in r.err


def test_the_printed_summary_fits_as_its_save_result_json(tmp_path: Path) -> None:
    # kvplan simulate's run at 8 req/s, saved as JSON and printed as vLLM prints it (two
    # decimals): both files fit the same profile to the rounding of the printed figures.
    saved = tmp_path / "run.json"
    r = run_cli("simulate", MODEL, "--num-prompts", "32", "--random-input-len", "500",
                "--random-output-len", "50", "--request-rate", "8", "--save-result", str(saved))
    assert r.code == 0, r.err
    d = json.loads(saved.read_text())
    lines = ["=" * 12 + " Serving Benchmark Result " + "=" * 12,
             f"{'Successful requests:':<40} {d['completed']:<10}",
             f"{'Request rate configured (RPS):':<40} {8.0:<10.2f}",
             f"{'Total input tokens:':<40} {d['total_input_tokens']:<10}",
             f"{'Total generated tokens:':<40} {d['total_output_tokens']:<10}",
             f"{'Output token throughput (tok/s):':<40} {d['output_throughput']:<10.2f}"]
    lines += [f"{f'Mean {m.upper()} (ms):':<40} {d[f'mean_{m}_ms']:<10.2f}"
              for m in ("ttft", "tpot", "itl")]
    text = tmp_path / "run.txt"
    text.write_text("\n".join([*lines, "=" * 50]) + "\n")
    fits = [run_cli("calibrate", str(f), "--gpu", "h100", "--model", MODEL, "--json").json()
            for f in (saved, text)]
    for a, b in zip(fits[0]["profiles"], fits[1]["profiles"], strict=True):
        for key in ("step_overhead_s", "api_request_s"):  # the per-request term is weakly
            assert a[key] == pytest.approx(b[key], rel=0.03), key  # tied to 2 decimals
    assert [p["metric"] for p in fits[1]["points"]] == [p["metric"] for p in fits[0]["points"]]
    assert [p["measured"] for p in fits[1]["points"]] == \
        pytest.approx([p["measured"] for p in fits[0]["points"]], rel=1e-3)
    assert all(abs(p["error"]) < 0.005 for p in fits[1]["points"])


def test_the_lines_printed_before_the_summary_give_the_exact_rate_and_burstiness(
        tmp_path: Path) -> None:
    # benchmark() prints "Traffic request rate: 0.125" (full precision) and "Burstiness
    # factor: 0.5 (Gamma distribution)" before it sends; the block prints the rate at two
    # decimals (0.12, 4 % slow). A whole-terminal paste is replayed at 0.125 and 0.5.
    start = ("Starting main benchmark run...\nTraffic request rate: 0.125\n"
             "Burstiness factor: 0.5 (Gamma distribution)\nMaximum request concurrency: None\n")
    text = start + SUMMARY.replace("Maximum request concurrency:             32 ",
                                   "Request rate configured (RPS):           0.12 ")
    path = tmp_path / "shell.txt"
    path.write_text(text)
    (run,) = _read(path)
    assert (run.request_rate, run.burstiness, run.max_concurrency) == (0.125, 0.5, None)


def test_a_pasted_ramp_up_run_is_refused_in_one_line(tmp_path: Path) -> None:
    start = ("Traffic ramp-up strategy: linear.\nWill increase RPS from 1 to 10 RPS over the "
             "duration of the benchmark.\nBurstiness factor: 1.0 (Poisson process)\n")
    path = tmp_path / "ramp.txt"
    path.write_text(start + SUMMARY)
    r = run_cli("calibrate", str(path), "--gpu", "h100", "--model", MODEL)
    assert_one_line_error(r)
    assert "ramp.txt:6:" in r.err  # the banner, after 3 + 2 lines and "from 1 to 10 req/s" in r.err


LATENCY_OUT = """\
INFO 10-01 12:00:00 [llm.py:306] Supported tasks: ['generate']
Profiling iterations: 100%|██████████| 30/30 [00:34<00:00,  1.13s/it]
Avg latency: 1.1337455780386605 seconds
10% percentile latency: 1.1201 seconds
50% percentile latency: 1.1330 seconds
99% percentile latency: 1.1502 seconds
"""


def test_calibrate_reads_vllm_bench_latencys_printed_average(tmp_path: Path) -> None:
    # vllm/benchmarks/latency.py prints f"Avg latency: {np.mean(latencies)} seconds" in full
    # precision, what its --output-json writes as avg_latency; the printed output was refused
    # ("lat.txt:1: not valid JSON"). Read, it is the same static point: e2e 1.1337... s of
    # the --batch 8 --prompt 512 --output 128 shape, located at its line (3).
    from kvplan.analysis.calibration.measurements import Defaults, read_measurements

    d = Defaults(model=MODEL, gpu="h100", batch=8, prompt=512, output=128)
    (tmp_path / "lat.txt").write_text(LATENCY_OUT)
    (tmp_path / "lat.json").write_text(json.dumps({"avg_latency": 1.1337455780386605}))
    (text,) = read_measurements(tmp_path / "lat.txt", d)
    (saved,) = read_measurements(tmp_path / "lat.json", d)
    assert text.measured == saved.measured == {"e2e_s": 1.1337455780386605}
    assert (text.shape, text.engine) == (saved.shape, saved.engine)
    assert text.where.endswith("lat.txt:3")


def test_two_pasted_latency_runs_in_one_file_are_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "two.txt"
    path.write_text(LATENCY_OUT + LATENCY_OUT)
    r = run_cli("calibrate", str(path), "--gpu", "h100", "--model", MODEL, "--batch", "8",
                "--prompt", "512", "--output", "128")
    assert_one_line_error(r)
    assert "two.txt:9:" in r.err and "its own file" in r.err


def test_a_file_with_no_json_and_no_vllm_output_says_what_calibrate_reads(
        tmp_path: Path) -> None:
    # kvplan simulate's own table (or any text) pasted: "t.txt:1: not valid JSON (column 1:
    # Expecting value)" named a parser, not what to give; a broken JSON file keeps its
    # line and column.
    path = tmp_path / "t.txt"
    path.write_text("│ Successful requests │ 50 │\n")
    r = run_cli("calibrate", str(path), "--gpu", "h100")
    assert_one_line_error(r)
    assert "t.txt:1: not a measurement file" in r.err and "Avg latency:" in r.err
    broken = tmp_path / "b.json"
    broken.write_text('{"a":\n')
    r = run_cli("calibrate", str(broken), "--gpu", "h100")
    assert_one_line_error(r)
    assert "b.json:2: not valid JSON (column 1" in r.err
