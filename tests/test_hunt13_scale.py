"""Hunt 13, scale: time and memory at the edges of what kvplan accepts (limits.py)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from kvplan.errors import TraceError
from kvplan.specs.requests import trace_csv as tc

ROWS = 200_000


def _trace(tmp_path: Path, rows: int = ROWS) -> Path:
    """arrival k/4 s, input k % 50 + 1, output k % 7 + 1 for k = 0 .. rows - 1."""
    path = tmp_path / "t.csv"
    with path.open("w") as f:
        f.write("t,i,o\n")
        f.writelines(f"{k / 4},{k % 50 + 1},{k % 7 + 1}\n" for k in range(rows))
    return path


FMT = tc.TraceFormat(input="i", output="o", arrival="t")


def test_a_big_trace_is_read_without_holding_every_cell(tmp_path: Path) -> None:
    # every row was kept as a list of str cells (~400 B a row: a 2M-row trace took 795 MB, a
    # 10^7-row one, inside MAX_TRACE_ROWS, ~4 GB); now the cells of one chunk at a time
    path = _trace(tmp_path)
    tracemalloc.start()
    try:
        trace = tc.read_csv_trace(path, FMT, "t")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 25e6  # the columns are 4.8 MB; all the cells at once took 53 MB
    k = np.arange(ROWS)
    assert trace.arrival_s is not None
    assert trace.arrival_s.tolist() == (k / 4).tolist()
    assert trace.prompt_tokens.sum() == 5_100_000  # 4,000 x (1 + ... + 50)
    assert trace.output_tokens.tolist() == (k % 7 + 1).tolist()


def _dates(tmp_path: Path, cells: list[str]) -> Path:
    path = tmp_path / "d.csv"
    path.write_text("t,i,o\n" + "".join(f"{c},10,2\n" for c in cells))
    return path


def test_dates_read_in_chunks_are_those_of_one_read(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fmt = tc.TraceFormat(input="i", output="o", arrival="t", arrival_unit="datetime")
    cells = [f"2023-11-16 18:17:{s:02d}.9799600" for s in range(10)]
    cells[7] = "20231116T181707.97996"  # numpy cannot read it: every cell is read per cell
    path = _dates(tmp_path, cells)
    whole = tc.read_csv_trace(path, fmt, "d").arrival_s
    monkeypatch.setattr(tc, "_CHUNK_ROWS", 3, raising=False)
    chunked = tc.read_csv_trace(path, fmt, "d").arrival_s
    assert whole is not None and chunked is not None
    assert whole.tobytes() == chunked.tobytes()
    assert chunked[9] == pytest.approx(9.0, abs=1e-6)
    cells[7] = "2023-11-16 18:17:07.9799600"
    cells[3] = cells[1]  # back in time, in the second chunk's first row: sorted (hunt 17)
    moved = tc.read_csv_trace(_dates(tmp_path, cells), fmt, "d")
    assert moved.arrival_s is not None and moved.reordered_rows == 2  # rows 2 and 3 swap
    assert moved.arrival_s[:4] == pytest.approx([0.0, 1.0, 1.0, 2.0], abs=1e-6)


def test_save_detailed_itls_are_written_a_chunk_at_a_time() -> None:
    # --save-detailed built every gap as a Python float in lists of lists, then the whole
    # text (1e7 output tokens: 25 s, 1.68 GB RSS; 1e8, inside the limits, ~16 GB): now the
    # itls stay as the emission runs and are written ~65k tokens at a time, byte for byte
    from kvplan.analysis.metrics import compute_metrics, save_result_json
    from kvplan.analysis.serving import simulate_serving
    from kvplan.report.json_out import dumps, dumps_chunks
    from kvplan.specs.requests.workload import WorkloadArgs

    args = WorkloadArgs(num_prompts=1000, random_input_len=32, random_output_len=1000)
    r = simulate_serving("Qwen/Qwen3-8B", "H100", workload=args).result
    m = compute_metrics(r)
    tracemalloc.start()
    try:
        doc = save_result_json(r, m, {}, flat_itls=True)
        size = sum(len(piece) for piece in dumps_chunks(doc))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16e6  # the 999,000 gaps as lists and text: ~80 MB
    whole = save_result_json(r, m, {})
    assert "".join(dumps_chunks(doc)) == dumps(whole) + "\n"
    assert size == len(dumps(whole)) + 1
    itls = whole["itls"]
    assert [len(row) for row in itls] == [999] * 1000  # 1000 tokens, 999 gaps each
    e2el_minus_ttft = (r.finish_s - r.first_token_s)[0]
    assert sum(itls[0]) == pytest.approx(e2el_minus_ttft, rel=1e-9)


def _moe_run(budget: int, seqs: int | None = None) -> tuple[float, int]:
    """100 random 1024/128 requests on Qwen3-30B-A3B (MI300X, 20 GiB of KV): the duration,
    and how many tokens the compiled core's step-time tables hold."""
    from kvplan.analysis.serving import simulate_serving
    from kvplan.sim import core
    from kvplan.specs.requests.workload import WorkloadArgs
    from kvplan.specs.serving import EngineConfig

    engine = EngineConfig(kv_cache_memory_bytes=20 * 2**30, max_num_batched_tokens=budget,
                          max_num_seqs=seqs)
    run = simulate_serving("Qwen/Qwen3-30B-A3B", "MI300X", engine,
                           WorkloadArgs(num_prompts=100))
    form = next(reversed(core._FORMS.values()))[1]
    assert form is not None  # the compiled core ran
    return float(run.result.finish_s.max()), int(str(form[0]))


def test_a_huge_token_budget_builds_tables_the_workload_can_use() -> None:
    # the core's step-time tables were built for every token count up to
    # --max-num-batched-tokens (10^8, inside MAX_TOKENS: 40 s, 4.8 GB RSS for 100 requests);
    # no step holds more than max_num_seqs requests' prompt + output tokens, 1024 + 128 each
    pytest.importorskip("kvplan.sim._core")
    end, table_tokens = _moe_run(10**7)
    assert table_tokens == 100 * (1024 + 128) + 1
    assert _moe_run(115_201) == (end, table_tokens)  # the same schedule, to the bit
    end, table_tokens = _moe_run(10**7, seqs=10)
    assert table_tokens == 10 * (1024 + 128) + 1
    assert _moe_run(11_521, seqs=10) == (end, table_tokens)


def test_a_plan_space_of_millions_is_refused_at_once() -> None:
    # every flag list was taken whole: --max-num-seqs 1..3000 x --max-num-batched-tokens of
    # 3,000 values = 9,000,000 configurations, screened at ~5 ms each (12+ hours, growing RSS)
    from tests.conftest import assert_one_line_error, run_cli

    seqs = ",".join(str(n) for n in range(1, 3001))
    chunks = ",".join(str(n) for n in range(2048, 5048))
    r = run_cli("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "-tp", "1", "--max-num-seqs", seqs,
                "--max-num-batched-tokens", chunks, "--request-rate", "20",
                "--slo", "ttft:p99:2000", "--num-prompts", "50", "--json")
    assert_one_line_error(r)
    assert "9,000,000 configurations (--max-num-seqs 3000, --max-num-batched-tokens 3000" in r.err
    assert "at most 100,000" in r.err


def test_a_plan_space_at_the_limit_is_accepted() -> None:
    from kvplan.analysis.plan.space import SearchSpace
    from kvplan.errors import InputError
    from kvplan.specs.hardware import load_gpu

    h100 = (load_gpu("H100"),)
    seqs = tuple(range(1, 101))
    assert SearchSpace(gpus=h100, tensor_parallel_sizes=(1,), max_num_seqs=seqs,
                       max_num_batched_tokens=tuple(range(1000, 2000))).size == 100_000
    with pytest.raises(InputError, match="100,100 configurations"):
        SearchSpace(gpus=h100, tensor_parallel_sizes=(1,), max_num_seqs=seqs,
                    max_num_batched_tokens=tuple(range(1000, 2001)))


def test_a_disaggregated_fleet_no_machine_holds_is_refused_at_once() -> None:
    # every engine keeps every request's state and its own KV pool: --prefill-instances 100000
    # with 10 requests passed 7 GB in 30 s; 64P64D x 10^6 requests needs ~27 GB
    from tests.conftest import assert_one_line_error, run_cli

    base = ("simulate", "Qwen/Qwen3-8B", "--random-input-len", "128", "--random-output-len",
            "16", "--request-rate", "1000", "--json")
    r = run_cli(*base, "--prefill-instances", "100000", "--num-prompts", "10")
    assert_one_line_error(r)
    assert "100000P1D has 100,001 engines" in r.err and "at most 1,024" in r.err
    r = run_cli(*base, "--disagg", "64P64D", "--num-prompts", "1000000")
    assert_one_line_error(r)
    assert "128 engines x 1,000,000 requests = 128,000,000 request states" in r.err
    assert "give at most 156,250 requests" in r.err  # 2 x 10^7 / 128
    r = run_cli(*base, "--disagg", "64P64D", "--num-prompts", "1000")
    assert r.code == 0 and r.json()["completed"] == 1000


def test_dp_ranks_times_requests_past_the_state_limit_is_refused() -> None:
    # each DP rank keeps every request's state: DeepSeek-V3 -dp 256 x 10^5 requests took
    # 12 s and 6.6 GB (x 10^6, inside --num-prompts' limit: ~66 GB)
    from tests.conftest import assert_one_line_error, run_cli

    r = run_cli("simulate", "deepseek-ai/DeepSeek-V3", "-dp", "256", "--enable-expert-parallel",
                "--num-prompts", "100000", "--random-input-len", "128",
                "--random-output-len", "16", "--request-rate", "1000", "--json")
    assert_one_line_error(r)
    assert "--data-parallel-size 256 x 100,000 requests = 25,600,000 request states" in r.err
    assert "give at most 78,125 requests" in r.err  # 2 x 10^7 / 256


def test_a_claim_schedule_past_a_million_steps_is_refused(tmp_path: Path) -> None:
    # `kvplan request` builds one ClaimStep per step (~350 B; --json ~2.5 KB): a config.json
    # with a 10^8-token context let --output 10^8 - 100 build ~35 GB of them
    import json

    from kvplan.analysis.timeline import request_timeline
    from kvplan.errors import InputError
    from kvplan.input_file import package_file
    from kvplan.specs.catalog import load_model
    from kvplan.specs.kv import kv_spec

    config = json.loads(package_file("specs", "catalog", "models",
                                     "meta-llama--Llama-3.2-1B.json").read_text())
    config["max_position_embeddings"] = 100_000_000
    config.pop("rope_scaling", None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = load_model(str(tmp_path / "config.json"))
    kv = kv_spec(spec, "auto", 1)
    with pytest.raises(InputError, match=r"1 prefill step \+ 1,000,000 decode steps = "
                                         r"1,000,001; kvplan lists at most 1,000,000"):
        request_timeline(kv, 100, 1_000_000, max_tokens=spec.max_position_embeddings)
    with pytest.raises(InputError, match=r"5,000,000 prefill chunks \+ 10 decode steps"):
        request_timeline(kv, 5_000_000, 10, chunk_tokens=1,
                         max_tokens=spec.max_position_embeddings)
    tl = request_timeline(kv, 100, 1000, max_tokens=spec.max_position_embeddings)
    assert len(tl.steps) == 1001 and tl.steps[-1].logical_bytes == 1100 * 32_768


def test_calibrate_reads_many_points_in_one_pass(tmp_path: Path) -> None:
    # each point's line (for error messages) was found by a search from the file's top and a
    # newline count up to it: quadratic, 20,000 points took 42 s to read; now ~1.7 s
    import json
    import time

    from kvplan.analysis.calibration import static_fit as cal

    pts = [{"id": f"p{i}", "model": "Qwen/Qwen3-8B", "gpu": "H100", "batch": 1 + i % 8,
            "prompt": 128, "output": 16, "e2e_ms": 500.0} for i in range(20_000)]
    pts[19_000]["e2e_ms"] = -1
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"points": pts}, indent=1))
    start = time.perf_counter()
    with pytest.raises(TraceError, match=r"points.json:171004: 'e2e_ms' must be positive"):
        cal.read_measurements(path, cal.Defaults())  # "id" of point k on line 4 + 9 k
    assert time.perf_counter() - start < 12.0
