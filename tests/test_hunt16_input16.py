"""Hunt 16 (input16): bad input across the CLI and the web API, each refused with one line.

Every test here is a reproducer of a defect found by hand fuzzing in session 16."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliResult, assert_one_line_error, run_cli

L1B = "meta-llama/Llama-3.2-1B"
MOONCAKE_HEADER = "timestamp,input_length,output_length,hash_ids\n"


def _trace(tmp_path: Path, rows: str) -> str:
    path = tmp_path / "t.csv"
    path.write_text(MOONCAKE_HEADER + rows)
    return str(path)


@pytest.mark.parametrize("command", ["simulate", "plan"])
def test_trace_arrivals_past_the_float_clock_are_refused(tmp_path: Path, command: str) -> None:
    # Two Mooncake rows (timestamps in ms) 5e307 ms = 5e304 s apart. Float seconds at 5e304
    # have a spacing of ~1e288 s, so the second request's ~25 ms of work rounded away: it was
    # reported with TTFT 0.000 ms (mean 27.1 = half of the first request's 54.2 ms) and plan
    # targeted 2e-305 req/s. Microsecond detail holds up to 2^52 us = 4.5e9 s (~142 years).
    trace = _trace(tmp_path, "1e308,100,10,1\n1.5e308,100,10,1\n")
    extra = ["--slo", "ttft:p99:500", "--price", "H100=2"] if command == "plan" else []
    r = run_cli(command, L1B, "--trace", trace, *extra, "--json")
    assert_one_line_error(r)
    # refused by the last-arrival check (the same 2^52 us, test_hunt16_bench16) first
    assert "5e+304 s" in r.err and "2^52 us" in r.err, r.err


def test_trace_arrivals_within_the_clock_still_run(tmp_path: Path) -> None:
    # 1e12 ms = 1e9 s (~32 years) apart: within 4.5e9 s, so it runs as before; the lone
    # request's TTFT is the same as the first one's (an idle server each time; another hash
    # id, as an equal one now shares the first prompt's 96 cached tokens: hunt 17)
    trace = _trace(tmp_path, "0,100,10,1\n1e12,100,10,2\n")
    r = run_cli("simulate", L1B, "--trace", trace, "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["duration"] == pytest.approx(1e9, rel=1e-6)
    assert d["std_ttft_ms"] == pytest.approx(0.0, abs=1e-3)


def test_time_scale_that_stretches_a_trace_past_the_clock_is_refused(tmp_path: Path) -> None:
    # 1e10 ms = 1e7 s apart, x --time-scale 1e6 = 1e13 s > 4.5e9 s
    trace = _trace(tmp_path, "0,100,10,1\n1e10,100,10,1\n")
    r = run_cli("simulate", L1B, "--trace", trace, "--time-scale", "1e6")
    assert_one_line_error(r)
    # (the last-arrival check, the same 2^52 us, test_hunt16_bench16, refuses it first)
    assert "--time-scale" in r.err and "1e+13 s" in r.err, r.err


CAL_HEADER = "model,gpu,batch,prompt,output,ttft_ms\n"


def test_calibrate_refuses_two_ttft_points_that_cannot_split_the_overheads(
        tmp_path: Path) -> None:
    # Two TTFT-only runs, each prompt one prefill step: the step overhead and the prefill
    # overhead both add once to each TTFT, so d log TTFT / d log term is (term / TTFT) for
    # both and the two sensitivity vectors are parallel (cosine 1). The fit split them
    # arbitrarily (step 10.07 ms, prefill 0) and wrote it: the separability check also
    # counted the predicted TPOT, e2e and throughput that no run measured.
    m = tmp_path / "m.csv"
    m.write_text(CAL_HEADER + f"{L1B},H100,1,512,64,12\n{L1B},H100,1,1024,64,14\n")
    r = run_cli("calibrate", str(m), "--out", str(tmp_path / "p.json"))
    assert_one_line_error(r)
    assert "cannot separate step_overhead_s from prefill_overhead_s" in r.err, r.err
    assert not (tmp_path / "p.json").exists()


def test_calibrate_refuses_one_point_given_twice(tmp_path: Path) -> None:
    # one measured TTFT read twice (the same file twice, or a repeated row) is still one
    # value for two factors: it was fitted exactly (error -0.0%) and written
    m = tmp_path / "m.csv"
    m.write_text(CAL_HEADER + f"{L1B},H100,1,512,64,12\n")
    dup = tmp_path / "dup.csv"
    dup.write_text(CAL_HEADER + f"{L1B},H100,1,512,64,12\n" * 2)
    for argv in ([str(m), str(m)], [str(dup)]):
        r = run_cli("calibrate", *argv, "--json")
        assert_one_line_error(r)
        assert "cannot separate step_overhead_s from prefill_overhead_s" in r.err, r.err


def test_calibrate_still_fits_ttft_and_tpot_of_one_run(tmp_path: Path) -> None:
    # TTFT (one prefill step: step + prefill overhead) and TPOT (decode steps: step overhead
    # only) measured on one run separate the two terms: the fit is kept
    m = tmp_path / "m.csv"
    m.write_text("model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
                 f"{L1B},H100,1,512,64,12,3\n{L1B},H100,8,1024,64,20,4\n")
    r = run_cli("calibrate", str(m), "--json")
    assert r.code == 0, r.err
    assert {p["metric"] for p in r.json()["points"]} == {"ttft_s", "tpot_s"}


def _saved_plan(tmp_path: Path) -> dict[str, object]:
    import json

    r = run_cli("plan", L1B, "--num-prompts", "20", "--sample-requests", "20", "--gpu", "H100",
                "--slo", "ttft:p99:2000", "--price", "H100=2", "--json")
    assert r.code == 0, r.err
    plan: dict[str, object] = json.loads(r.out)
    return plan


def test_report_of_a_saved_plan_says_a_bad_slo_bound_once(tmp_path: Path) -> None:
    import json

    plan = _saved_plan(tmp_path)
    no_inputs = {k: v for k, v in plan.items() if k != "inputs"}
    bad_bound = json.loads(json.dumps(plan))
    bad_bound["inputs"]["slo"]["bounds"] = [{"metric": 5}]
    (tmp_path / "a.json").write_text(json.dumps(no_inputs))
    (tmp_path / "b.json").write_text(json.dumps(bad_bound))
    # inputs may be absent (load_plan_json accepts it): the report is written without the
    # SLO chart, not refused with "KeyError('inputs')" wrapped in a second message
    r = run_cli("report", "--plan", str(tmp_path / "a.json"), "-o", str(tmp_path / "a.html"))
    assert r.code == 0, r.err
    assert (tmp_path / "a.html").exists()
    # a bound kvplan never writes: the chart's one message, not nested in another
    r = run_cli("report", "--plan", str(tmp_path / "b.json"), "-o", str(tmp_path / "b.html"))
    assert_one_line_error(r)
    assert r.err.count("save it again") == 1 and "InputError" not in r.err, r.err


def _web(*argv: str) -> CliResult:
    """`kvplan web ARGV` that must refuse at once (a server that starts is killed at 30 s)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "kvplan", "web", *argv], capture_output=True,
                          text=True, timeout=30)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("seconds", ["nan", "inf", "-1"])
def test_web_refuses_a_sim_time_limit_that_is_not_a_positive_number(seconds: str) -> None:
    # NaN passed `max_sim_seconds <= 0` and the server started with it as every job's limit
    r = _web("--port", "1", "--max-sim-seconds", seconds)
    assert_one_line_error(r)
    assert "--max-sim-seconds must be positive (and finite)" in r.err, r.err


def test_web_says_in_one_line_why_it_cannot_listen() -> None:
    import socket

    # uvicorn printed four INFO lines and "ERROR: [Errno -2] Name or service not known", exit 3
    r = _web("--host", "bad host name", "--port", "8123")
    assert_one_line_error(r)
    assert "--host 'bad host name': not an address or a name that resolves" in r.err, r.err
    with socket.socket() as held:  # a port another program listens on
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = _web("--port", str(port))
    assert_one_line_error(r)
    assert f"--port {port}: cannot listen there (address already in use)" in r.err, r.err


def _alias_bomb(levels: int) -> str:
    """A YAML mapping whose last key holds 9^levels strings through nested aliases (~1 KB)."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        here, before = chr(97 + i), chr(96 + i)
        lines.append(f"{here}: &{here} [" + ", ".join([f"*{before}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_pasted_config_file_with_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    # vLLM's load_config_file turns every list item into a word with str(); with nine
    # aliases nine deep (9^9 = 387,420,489 strings from a 1 KB file) that ran past 20 s and
    # gigabytes. The first option past 10,000 values is refused: 'e' holds 9^5 = 59,049 (the
    # keys before it, 'd' with 9^4 = 6,561 strings and 820 lists, stay within the cap).
    # Six levels (9^6 strings: quick to expand) show it without the hang.
    (tmp_path / "serve.yaml").write_text(_alias_bomb(6))
    r = run_cli("capacity", "--json", "--", "vllm", "serve", L1B, "--config",
                str(tmp_path / "serve.yaml"))
    assert_one_line_error(r)
    assert "option 'e' holds more than 10,000 values once YAML aliases are expanded" in r.err


def test_pasted_config_file_with_a_list_value_still_reads(tmp_path: Path) -> None:
    # a flat mapping with a short list stays as vLLM reads it: --key item item
    (tmp_path / "serve.yaml").write_text("tensor-parallel-size: 2\nmax-model-len: 4096\n")
    r = run_cli("capacity", "--json", "--", "vllm", "serve", L1B, "--config",
                str(tmp_path / "serve.yaml"))
    assert r.code == 0, r.err
    assert r.json()["tensor_parallel_size"] == 2 and r.json()["max_model_len"] == 4096


def test_gpu_file_field_holding_a_yaml_alias_bomb_is_named_at_once(tmp_path: Path) -> None:
    # memory_gb pointing at 9^7 strings through aliases: the error message repr()'d the whole
    # value (minutes and gigabytes at 9^9); it now shows 3 levels of 8 items at most
    gpu = tmp_path / "gpu.yaml"
    gpu.write_text(_alias_bomb(7) + "id: MyGPU\nmemory_gb: *g\nmem_bw_tbps: 3.35\n"
                   "bf16_tflops_dense: 989\n")
    r = run_cli("capacity", L1B, "--gpu", str(gpu))
    assert_one_line_error(r)
    assert "memory_gb must be a number in [1, 10000], got [[[[...], [...]," in r.err, r.err
    assert len(r.err) < 300, r.err


@pytest.mark.parametrize("argv", [
    ["simulate", L1B, "--num-prompts", "3"],
    ["latency", L1B, "--gpu", "H100", "--prompt", "10", "--output", "2"],
])
def test_empty_profile_is_refused_not_replaced_by_the_bundled_one(argv: list[str]) -> None:
    # --profile "$UNSET": the empty path read as "no --profile", and the answer came from the
    # bundled profile with exit 0, as if the user's fit had been used
    r = run_cli(*argv, "--profile", "", "--json")
    assert_one_line_error(r)
    assert "--profile is empty" in r.err, r.err


def test_plan_says_a_bad_profile_file_is_the_error(tmp_path: Path) -> None:
    # a missing or malformed --profile read per configuration: "nothing feasible: vLLM
    # refuses every configuration in the space (/x.json: cannot read the profile ...)",
    # exit 1 (an answered no), as if vLLM had refused the space
    bad = tmp_path / "p.json"
    bad.write_text('{"schema": "kvplan-profile/1", "profiles": 5}')
    for profile, says in ((str(tmp_path / "none.json"), "cannot read the profile (no such file"),
                          (str(bad), "'profiles' must be a list of profile objects")):
        r = run_cli("plan", L1B, "--slo", "ttft:p99:100", "--price", "H100=2", "--gpu", "H100",
                    "--profile", profile, "--json")
        assert_one_line_error(r)
        assert says in r.err and "vLLM refuses" not in r.err, r.err


def test_empty_model_is_refused_by_name(tmp_path: Path) -> None:
    # MODEL "$UNSET" became Path('') = '.', read as ./config.json: "no such config file:
    # config.json" in an empty folder, and silently the config.json of whatever folder the
    # command ran in otherwise
    (tmp_path / "config.json").write_text(
        (Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
         / "meta-llama--Llama-3.2-1B.json").read_text())
    for argv in (["kv", ""], ["capacity", "--json", "--", "vllm", "serve", ""]):
        r = run_cli(*argv, cwd=str(tmp_path))
        assert_one_line_error(r)
        assert r.err == ("error: the model is empty: give a model id from 'kvplan models' or "
                         "a config.json path\n"), r.err
    assert run_cli("kv", ".", "--json", cwd=str(tmp_path)).code == 0  # '.' is still a folder


def _bench_serve_run(tmp_path: Path) -> dict[str, object]:
    import json

    out = tmp_path / "run.json"
    r = run_cli("simulate", L1B, "--num-prompts", "30", "--request-rate", "5",
                "--save-result", str(out), "--save-detailed")  # with the per-request lists
    assert r.code == 0, r.err
    run: dict[str, object] = json.loads(out.read_text())
    return run


@pytest.mark.parametrize(("burstiness", "says"), [
    ("x", "'burstiness' must be a number, got 'x'"),  # was a ValueError traceback
    ([1], "'burstiness' must be a number, got [1]"),  # was a TypeError traceback
    (-1, "'burstiness' must be positive, got -1"),  # was a traceback from numpy's gamma
    (0, "'burstiness' must be positive, got 0"),  # was read as 1.0 (0 or 1.0)
    (1e308, "'burstiness' must be in [0.001, 1000], got 1e+308"),  # --burstiness's range
])
def test_calibrate_checks_a_bench_serve_burstiness_as_the_flag(
        tmp_path: Path, burstiness: object, says: str) -> None:
    import json

    run = _bench_serve_run(tmp_path)
    run["burstiness"] = burstiness
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(run))
    r = run_cli("calibrate", str(f), "--gpu", "H100", "--json")
    assert_one_line_error(r)
    assert says in r.err, r.err


def test_calibrate_checks_a_bench_serve_request_rate_range(tmp_path: Path) -> None:
    import json

    # 1e-300 req/s passed 'must be positive' and spread 30 sends over ~1e301 s
    run = _bench_serve_run(tmp_path)
    run["request_rate"] = 1e-300
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(run))
    r = run_cli("calibrate", str(f), "--gpu", "H100", "--json")
    assert_one_line_error(r)
    assert "'request_rate' must be in [1e-06, 1e+09], got 1e-300" in r.err, r.err


@pytest.mark.parametrize(("key", "item", "says"), [
    ("input_lens", "x", "got 'x'"),  # ValueError traceback
    ("input_lens", None, "got None"),  # TypeError traceback
    ("input_lens", [1], "got [1]"),  # TypeError traceback
    ("input_lens", 1e30, "got 1e+30"),  # OverflowError building the int64 workload
    ("input_lens", 1.5, "got 1.5"),  # was cut to 1 token
    ("output_lens", -5, "got -5"),  # was read as 1 token
])
def test_calibrate_checks_each_per_request_length(tmp_path: Path, key: str, item: object,
                                                  says: str) -> None:
    import json

    run = _bench_serve_run(tmp_path)
    lens = list(run[key])  # type: ignore[call-overload]
    lens[0] = item
    run[key] = lens
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(run))
    r = run_cli("calibrate", str(f), "--gpu", "H100", "--json")
    assert_one_line_error(r)
    assert f"'{key}' item 0 must be a whole number of tokens in [" in r.err and says in r.err


@pytest.mark.parametrize(("value", "says"), [
    ("x", "'max_concurrency' must be a number, got 'x'"),  # said "'batch' must be a number"
    (1.5, "'max_concurrency' must be a whole number of requests, got 1.5"),  # read as 1
])
def test_calibrate_names_a_bad_max_concurrency(tmp_path: Path, value: object,
                                               says: str) -> None:
    import json

    run = _bench_serve_run(tmp_path)
    run["max_concurrency"] = value
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(run))
    r = run_cli("calibrate", str(f), "--gpu", "H100", "--json")
    assert_one_line_error(r)
    assert says in r.err, r.err


SWEEP_HEADER = "model,gpu,num_prompts,max_concurrency,input_len,output_len,mean_ttft_ms\n"


def test_calibrate_checks_a_sweep_rows_request_count_before_sizing_it(tmp_path: Path) -> None:
    # num_prompts 1e9 in a 100-byte CSV: two 10^9-item length tuples (8 GB) were built before
    # the count was checked (a MemoryError traceback under a 4 GiB cap)
    import resource
    import subprocess
    import sys

    def cap_memory() -> None:  # 2 GiB of heap: far more than the check needs
        resource.setrlimit(resource.RLIMIT_DATA, (2 * 2**30, resource.RLIM_INFINITY))

    f = tmp_path / "sweep.csv"
    f.write_text(SWEEP_HEADER + f"{L1B},H100,1e9,4,512,64,30\n")
    proc = subprocess.run([sys.executable, "-m", "kvplan", "calibrate", str(f), "--json"],
                          capture_output=True, text=True, timeout=120, preexec_fn=cap_memory)
    r = CliResult(proc.returncode, proc.stdout, proc.stderr)
    assert_one_line_error(r)
    assert "'num_prompts' must be a whole number of requests in [0, 1,000,000], got '1e9'" \
        in r.err, r.err


def test_calibrate_of_a_sweep_with_no_rows_does_not_blame_force(tmp_path: Path) -> None:
    f = tmp_path / "sweep.csv"
    f.write_text(SWEEP_HEADER)
    r = run_cli("calibrate", str(f), "--json")
    assert_one_line_error(r)
    assert r.err == f"error: {f}:1: no runs (need a header and at least one row)\n", r.err


def test_calibrate_does_not_offer_an_option_that_does_not_exist(tmp_path: Path) -> None:
    # a sweep row with 'completed' reads as a bench serve result, which needs the token
    # totals: "missing 'total_input_tokens' (give it in the file or as an option)", but no
    # option gives it
    f = tmp_path / "sweep.csv"
    f.write_text("model,gpu,max_concurrency,input_len,output_len,completed,mean_ttft_ms\n"
                 f"{L1B},H100,4,512,64,40,30\n")
    r = run_cli("calibrate", str(f), "--json")
    assert_one_line_error(r)
    assert "missing 'total_input_tokens' (vllm bench serve --save-result writes it; a CSV " \
        "sweep row gives num_prompts, input_len and output_len instead of completed)" in r.err


def test_calibrate_refuses_a_sweep_row_with_a_comma_too_many(tmp_path: Path) -> None:
    # input_len typed '5,12': every later cell moved one column left (output_len 12,
    # mean_ttft_ms 64, the 30 ms TTFT dropped as an extra cell) and the shifted row was fitted
    # silently; the static CSV reader already refuses such a row
    f = tmp_path / "sweep.csv"
    f.write_text(SWEEP_HEADER + f"{L1B},H100,40,4,5,12,64,30\n")
    r = run_cli("calibrate", str(f), "--json")
    assert_one_line_error(r)
    assert r.err == f"error: {f}:2: wrong number of columns (the header has 7)\n", r.err


def test_trace_row_with_a_comma_inside_a_number_is_refused(tmp_path: Path) -> None:
    # '0,1,024,10' under a 3-column header read as prompt 1, output 24 (the 10 dropped): the
    # run simulated 101 input and 34 output tokens for a trace of 1,124 and 20
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,024,10\n5,100,10\n")
    r = run_cli("simulate", L1B, "--trace", str(trace), "--json")
    assert_one_line_error(r)
    assert r.err == (f"error: {trace}, line 2: 4 cells for the header's 3 columns (a comma "
                     "inside a number?); fix or delete the row\n"), r.err
    # a trailing comma (an empty cell past the header) still reads
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,10,\n5,100,10,\n")
    r = run_cli("simulate", L1B, "--trace", str(trace), "--json")
    assert r.code == 0, r.err
    assert (r.json()["total_input_tokens"], r.json()["total_output_tokens"]) == (110, 20)


def test_trace_rows_are_read_exactly_or_refused_whatever_the_commas() -> None:
    """Hypothesis: a Vidur-layout row whose numbers may be written with thousands commas
    (unquoted, so each comma splits a cell) is either read as the numbers written or refused
    with a TraceError naming the line: never read with its cells shifted."""
    import tempfile

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import load_csv_trace

    def cell(n: int, commas: bool) -> str:
        return f"{n:,}" if commas else str(n)

    row = st.tuples(st.integers(1, 2_000_000), st.integers(1, 20_000), st.booleans(),
                    st.booleans())

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(st.lists(row, min_size=1, max_size=6))
    def check(rows: list[tuple[int, int, bool, bool]]) -> None:
        text = "num_prefill_tokens,num_decode_tokens\n" + "".join(
            f"{cell(p, cp)},{cell(o, co)}\n" for p, o, cp, co in rows)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "t.csv"
            path.write_text(text)
            try:
                trace = load_csv_trace(path)
            except TraceError as exc:
                assert ", line " in str(exc)
                return
        assert trace.prompt_tokens.tolist() == [p for p, *_ in rows]
        assert trace.output_tokens.tolist() == [o for _, o, *_ in rows]

    check()


@pytest.mark.parametrize("argv", [
    ["prices", "--json"],  # listed every provider's rows, exit 0
    ["plan", L1B, "--slo", "ttft:p99:100", "--gpu", "H100", "--json"],  # the default provider
])
def test_empty_provider_is_refused_not_read_as_unset(argv: list[str]) -> None:
    r = run_cli(*argv, "--provider", "")
    assert_one_line_error(r)
    assert r.err.startswith("error: unknown --provider '': choose one of lambda, "), r.err
