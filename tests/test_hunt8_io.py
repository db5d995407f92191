"""Eighth hunt round, user-facing entries (commands, files read and written, web API): each
defect pinned by a hand-checkable golden value."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kvplan.costs.step.profiles import default_profiles
from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings
from tests.conftest import assert_one_line_error, run_cli

SMALL = "meta-llama/Llama-3.2-1B"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=60)))


# -------------------- D1: max_output_tokens_per_s allocated one float per simulated second
# vLLM's calculate_metrics sums the tokens in np.zeros(ceil(duration) + 1) one-second buckets;
# kvplan did the same, so a trace spanning 8e9 s (or azure-code --time-scale 1e6: 3.4e9 s,
# 25.6 GiB) died in np.bincount(minlength=span) with a MemoryError traceback, exit 1.
# Two requests 4e9 s apart (4e9 one-second buckets: 32 GB had they been allocated; a span
# past 2^52 us = 4.5e9 s, such as the 1e13 s this test used, is now refused, see
# test_hunt16_input16), outputs 5 and 7 tokens, each decoded within one second of its
# arrival (TTFT ~60 ms + 6 x ~3 ms): the fullest one-second bucket holds the second
# request's 7 tokens.
def test_peak_output_throughput_on_a_long_trace(tmp_path: Path) -> None:
    trace = tmp_path / "far.csv"
    trace.write_text("ts,p,o\n0,10,5\n4000000000,10,7\n")
    r = run_cli("simulate", SMALL, "--trace", str(trace),
                "--trace-columns", "arrival=ts,input=p,output=o", "--json")
    assert r.code == 0, r.err
    assert r.json()["max_output_tokens_per_s"] == 7.0


# -------------------- D2: --trace-columns hash_block_tokens had no upper bound
# hash_block_tokens=99999999999999999999 (past int64) died in the trace cache's
# np.array(..., dtype=int64) with an OverflowError traceback; '²' passed str.isdigit() and
# died in int(). Tokens per hash block are a token count: 1 .. MAX_TOKENS (10^8), as every
# other length; one line naming --trace-columns and the range.
@pytest.mark.parametrize("block", ["99999999999999999999", "²", "0", "100000001"])
def test_hash_block_tokens_out_of_range_is_one_line(tmp_path: Path, block: str) -> None:
    trace = tmp_path / "h.csv"
    trace.write_text("p,o,hh\n10,5,1 2\n10,5,1 2\n")
    r = run_cli("simulate", SMALL, "--trace", str(trace), "--trace-columns",
                f"input=p,output=o,hashes=hh,hash_block_tokens={block}")
    assert_one_line_error(r)
    assert "--trace-columns: hash_block_tokens" in r.err and "100,000,000" in r.err


# -------------------- D3: a recognised layout missing its arrival or hash column
# A header with Mooncake's input_length/output_length/timestamp but no hash_ids was taken as
# the Mooncake layout and refused with "no column 'hash_ids' for the prefix-block hash ids;
# the header has ..." - what is wrong, not what to do. Now the line names the missing column
# and the --trace-columns that reads the file as it is, and that suggestion works.
def test_partial_mooncake_header_says_what_to_give(tmp_path: Path) -> None:
    trace = tmp_path / "m.csv"
    trace.write_text("timestamp,input_length,output_length\n0,10,5\n1000,20,5\n")
    r = run_cli("simulate", SMALL, "--trace", str(trace))
    assert_one_line_error(r)
    suggested = ("arrival=timestamp,arrival_unit=ms,input=input_length,"
                 "output=output_length")
    assert "no 'hash_ids' column" in r.err and f"--trace-columns {suggested}" in r.err
    ok = run_cli("simulate", SMALL, "--trace", str(trace), "--trace-columns", suggested,
                 "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["total_input_tokens"] == 30  # 10 + 20


# -------------------- D4: a header naming the same column twice
# "num_prefill_tokens,num_decode_tokens,num_prefill_tokens" was read as the Vidur layout from
# the first of the two columns, silently: input 10, though the file also says 99. A column in
# use that the header names twice is ambiguous; one line asks to rename the others. A
# duplicate that is not read (x,x below) is no matter.
def test_duplicated_trace_column_is_refused(tmp_path: Path) -> None:
    twice = tmp_path / "twice.csv"
    twice.write_text("num_prefill_tokens,num_decode_tokens,num_prefill_tokens\n10,5,99\n")
    r = run_cli("simulate", SMALL, "--trace", str(twice))
    assert_one_line_error(r)
    assert "column 'num_prefill_tokens' 2 times" in r.err
    unused = tmp_path / "unused.csv"
    unused.write_text("p,o,x,x\n10,5,1,2\n")
    ok = run_cli("simulate", SMALL, "--trace", str(unused), "--trace-columns",
                 "input=p,output=o", "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["total_input_tokens"] == 10


# -------------------- D5: a --gpu file without a compute rate
# id/memory_gb/mem_bw_tbps are the required fields; a file with only those was refused at
# pricing time with "GPU X has no peak FLOP/s or bandwidth figure": the bandwidth was given,
# and the line named neither the flag nor the field to add. bf16 is Llama's compute
# precision; fp8 weights fall back to the bf16 rate, so bf16_tflops_dense is what to add.
def test_gpu_file_without_rates_names_the_field(tmp_path: Path) -> None:
    gpu = tmp_path / "g.yaml"
    gpu.write_text("id: X\nmemory_gb: 80\nmem_bw_tbps: 3\n")
    r = run_cli("latency", SMALL, "--gpu", str(gpu), "--prompt", "100", "--output", "10")
    assert_one_line_error(r)
    assert "no peak bfloat16 FLOP/s: give bf16_tflops_dense in its --gpu file" in r.err
    gpu.write_text("id: X\nmemory_gb: 80\nmem_bw_tbps: 3\nbf16_tflops_dense: 900\n")
    ok = run_cli("latency", SMALL, "--gpu", str(gpu), "--prompt", "100", "--output", "10")
    assert ok.code == 0, ok.err


# -------------------- D6: profile entries that were silently never used
# A profile is picked by exact (GPU id, precision). An entry written "H100" (the alias every
# --gpu takes) or "bf16" (vLLM's --dtype spelling) matched nothing, and the bundled profile
# priced the run with no word; of two entries for the same (GPU, precision) the first was
# used and the second ignored. Now aliases are read as the catalog's id and vLLM's dtype
# names, an unknown precision and a repeated entry are one-line refusals.
# Golden: step_overhead_s 10 ms instead of the bundled ~0.93 ms: a 10-token request's TPOT
# grows by about 9 ms per decode step (bundled 2.43 ms -> 11.49 ms, as with the exact id).
def _profile(tmp_path: Path, *entries: dict[str, object]) -> str:
    base = next(p for p in default_profiles().profiles
                if (p.gpu, p.precision) == ("H100-SXM-80GB", "bfloat16"))
    doc = {"schema": "kvplan-profile/1",
           "profiles": [{**asdict(base), **e} for e in entries]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _tpot(*args: str) -> float:
    r = run_cli("latency", SMALL, "--gpu", "H100", "--prompt", "100", "--output", "10",
                "--json", *args)
    assert r.code == 0, r.err
    return float(r.json()["tpot_s"])


def test_profile_aliases_are_read(tmp_path: Path) -> None:
    exact = _tpot("--profile", _profile(tmp_path, {"step_overhead_s": 0.01}))
    assert exact > _tpot() + 0.008  # 9 more ms per step than the bundled profile
    for spelling in ({"gpu": "H100"}, {"precision": "bf16"}):
        path = _profile(tmp_path, {"step_overhead_s": 0.01, **spelling})
        assert _tpot("--profile", path) == exact


@pytest.mark.parametrize(("entries", "says"), [
    (({"precision": "fp64"},), "precision must be one of float16, bfloat16, fp8, fp4"),
    (({}, {"step_overhead_s": 0.02}), "profiles[1] repeats profiles[0]"),
])
def test_profile_entries_never_used_are_refused(
        tmp_path: Path, entries: tuple[dict[str, object], ...], says: str) -> None:
    r = run_cli("latency", SMALL, "--gpu", "H100", "--prompt", "100", "--output", "10",
                "--profile", _profile(tmp_path, *entries))
    assert_one_line_error(r)
    assert says in r.err


# -------------------- D7: the web page showed a too-long --context beside BATCH
# batch_footprint refused "--batch 1 x --context 99999999999 is absurd; ..." and the API
# takes the first --flag of a message as its field, so /api/levers answered
# field "batch" for a bad context. Each bound now has its own line, led by its own flag.
def test_levers_context_bound_names_context(client: TestClient) -> None:
    r = client.get("/api/levers", params={"model": SMALL, "batch": 1, "context": 99999999999})
    assert r.status_code == 422
    assert r.json()["field"] == "context"
    cli = run_cli("levers", SMALL, "--batch", "1", "--context", "99999999999")
    assert_one_line_error(cli)
    assert cli.err == "error: --context must be at most 100,000,000 tokens, got 99999999999\n"


# -------------------- D8: --random-range-ratio out of range blamed --num-prompts
# The token-total bound ran before the ratio's own range check, so --random-range-ratio 1e30
# (or inf) answered "--num-prompts 5 x up to 1,151,999,...,744 tokens each is 5.76e+33
# tokens; ..." and the web API's field was num_prompts. The ratio must be in [0, 1), as
# vLLM's RandomDataset asserts (0 <= range_ratio < 1).
@pytest.mark.parametrize("ratio", ["1e30", "inf"])
def test_range_ratio_out_of_range_names_itself(client: TestClient, ratio: str) -> None:
    r = run_cli("simulate", SMALL, "--num-prompts", "5", "--random-range-ratio", ratio)
    assert_one_line_error(r)
    assert r.err.startswith("error: --random-range-ratio must be in [0, 1), got ")
    w = client.get("/api/simulate", params={"model": SMALL, "num_prompts": 5,
                                            "random_range_ratio": ratio})
    assert w.status_code == 422
    assert w.json()["field"] == "random_range_ratio"


# -------------------- D9: request's length bound named no flag
# "prompt + output = 100000000000000000009 tokens is absurd; use lengths up to 100,000,000":
# no --flag, so /api/request answered field null and the page showed it under no field.
# Each length past 10^8 tokens now leads with its own flag.
@pytest.mark.parametrize(("prompt", "output", "field"), [
    ("99999999999999999999", "10", "prompt"), ("100", "99999999999999999999", "output")])
def test_request_length_bound_names_its_flag(client: TestClient, prompt: str, output: str,
                                             field: str) -> None:
    r = run_cli("request", SMALL, "--prompt", prompt, "--output", output)
    assert_one_line_error(r)
    assert r.err.startswith(f"error: --{field} must be at most 100,000,000 tokens, got ")
    w = client.get("/api/request", params={"model": SMALL, "prompt": prompt, "output": output})
    assert w.status_code == 422
    assert w.json()["field"] == field


# -------------------- D10: an unknown --prefill-gpu / --decode-gpu named no flag
# "unknown GPU 'x': choose one of ..." for --decode-gpu x: the user cannot tell which of
# --gpu, --prefill-gpu and --decode-gpu it is about, and /api/simulate answered field "gpu"
# (the page marked the wrong box). Now the line leads with the flag, the field follows it.
@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_unknown_pool_gpu_names_its_flag(client: TestClient, role: str) -> None:
    r = run_cli("simulate", SMALL, "--disagg", "1P1D", f"--{role}-gpu", "x",
                "--num-prompts", "5")
    assert_one_line_error(r)
    assert r.err.startswith(f"error: --{role}-gpu: unknown GPU 'x'")
    w = client.get("/api/simulate", params={"model": SMALL, "num_prompts": 5,
                                            "disagg": "1P1D", f"{role}_gpu": "x"})
    assert w.status_code == 422
    assert w.json()["field"] == f"{role}_gpu"


# -------------------- D11: /api/plan's unreadable max_model_len named no flag
# The CLI says "--max-model-len not a whole number: 'x' (e.g. 8192, 8k, 32K)"; the plan page
# parsed the same field outside the comma-list reader, so the bare ValueError reached the
# API: "not a whole number: 'x' ...", field null. Now the CLI's line and field max_model_len.
def test_plan_api_max_model_len_names_its_flag(client: TestClient) -> None:
    w = client.get("/api/plan", params={"model": SMALL, "max_model_len": "x",
                                        "slo": "ttft:p99:1000", "num_prompts": 20})
    assert w.status_code == 422
    assert w.json() == {"detail": "--max-model-len not a whole number: 'x' (e.g. 8192, 8k, "
                                  "32K)", "field": "max_model_len"}
    r = run_cli("plan", SMALL, "--max-model-len", "x", "--slo", "ttft:p99:1000",
                "--request-rate", "1", "--num-prompts", "20")
    assert_one_line_error(r)
    assert r.err == f"error: {w.json()['detail']}\n"


# -------------------- D12: the notebook and the HTML report dropped the E2EL rows
# `kvplan simulate` reports ttft,tpot,itl,e2el by default (docs/metrics.md: vLLM's ttft,tpot,itl
# plus e2el); the notebook's ServingRun display and `kvplan report --dataset`'s simulation
# called compute_metrics with the Python default (vLLM's three), so neither showed an E2EL
# row and the report's embedded answer had no *_e2el_ms keys. Golden: the CLI's own p99 E2EL
# for the same run, as the table prints it.
def test_notebook_and_report_show_e2el(tmp_path: Path) -> None:
    import html as entities
    import re

    import kvplan
    from kvplan.report.durations import fmt_ms
    from kvplan.report.views.notebook import html

    cli = run_cli("simulate", SMALL, "--num-prompts", "20", "--request-rate", "5",
                  "--random-input-len", "2048", "--random-output-len", "256", "--json")
    assert cli.code == 0, cli.err
    p99 = fmt_ms(cli.json()["p99_e2el_ms"])
    run = kvplan.simulate_serving(
        kvplan.load_model(SMALL), kvplan.load_gpu("H100"), kvplan.EngineConfig(),
        kvplan.WorkloadArgs(num_prompts=20, request_rate=5, random_input_len=2048,
                            random_output_len=256))
    shown = entities.unescape(re.sub(r"<[^>]+>", "", html(run)))
    assert re.search(r"P99 E2EL\s*│\s*" + re.escape(p99), shown), shown
    out = tmp_path / "r.html"
    rep = run_cli("report", SMALL, "--dataset", "random", "--num-prompts", "20",
                  "--request-rate", "5", "-o", str(out))
    assert rep.code == 0, rep.err
    assert f'"p99_e2el_ms": {cli.json()["p99_e2el_ms"]!r}' in out.read_text()


# -------------------- D13: --price given twice for one GPU; an unknown --price GPU
# `--price H100=2 --price H100=3` priced H100 at $3.00 with no word (the last item won), though
# the two contradict; the project refuses contradictions. And `--price FOO=2` answered "unknown
# GPU 'FOO': ... or pass a YAML/JSON file ..." without naming --price.
@pytest.mark.parametrize(("argv", "says"), [
    (("--price", "H100=2", "--price", "h100-sxm=3"),
     "error: --price gives H100-SXM-80GB two prices (2 and 3 USD per GPU-hour); keep one"),
    (("--price", "FOO=2"), "error: --price 'FOO=2': unknown GPU 'FOO'"),
])
def test_price_contradiction_and_unknown_gpu(argv: tuple[str, ...], says: str) -> None:
    r = run_cli("prices", *argv)
    assert_one_line_error(r)
    assert r.err.startswith(says)


def test_price_same_value_twice_is_fine() -> None:
    r = run_cli("prices", "--price", "H100=2", "--price", "H100=2", "--json")
    assert r.code == 0, r.err
    rows = [x for x in r.json()["rows"] if x["override"]]
    assert [(x["gpu"], x["usd_per_instance_hour"]) for x in rows] == [("H100-SXM-80GB", 2.0)]


# -------------------- D14: `kvplan prices --price` did not read a comma list
# `kvplan plan --price H100=2,L40S=1` prices both GPUs; `kvplan prices --price H100=2,L40S=1`
# (the command to check what plan will use) refused it: "--price 'H100=2,L40S=1': use
# GPU=USD_PER_GPU_HOUR". Both read --price the same way now.
def test_prices_reads_price_lists_as_plan_does() -> None:
    r = run_cli("prices", "--price", "H100=2,L40S=1", "--json")
    assert r.code == 0, r.err
    rows = [(x["gpu"], x["usd_per_instance_hour"]) for x in r.json()["rows"] if x["override"]]
    assert rows == [("H100-SXM-80GB", 2.0), ("L40S", 1.0)]


# -------------------- D15: CSV files saved with a byte-order mark (Excel's "CSV UTF-8")
# Traces drop a BOM (utf-8-sig); calibrate's CSVs and --prices did not, so the first column was
# named '\ufeffmodel' / '\ufeffprovider': "cal.csv:2: missing 'model' (give it in the file or
# as --model)" and "--prices p.csv: missing price column(s) provider", though both are there.
CAL = ("model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
       "meta-llama/Llama-3.1-8B,H100,1,1000,100,80,8\n"
       "meta-llama/Llama-3.1-8B,H100,8,1000,100,300,9\n"
       "meta-llama/Llama-3.1-8B,H100,32,1000,100,1200,12\n")


def test_calibrate_csv_with_bom_reads_as_without(tmp_path: Path) -> None:
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_text(CAL)
    marked.write_bytes(b"\xef\xbb\xbf" + CAL.encode())
    a = run_cli("calibrate", str(plain), "--force", "--json")
    b = run_cli("calibrate", str(marked), "--force", "--json")
    assert a.code == 0 and b.code == 0, b.err
    assert json.dumps(b.json()).replace("marked.csv", "plain.csv") == json.dumps(a.json())


def test_prices_csv_with_bom(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_bytes(b"\xef\xbb\xbf" + (
        b"provider,gpu,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
        b"source_url,observed_on,transcribed_by\n"
        b"me,H100,1x H100,1,8,4.29,https://example.com,2026-09-25,me\n"))
    r = run_cli("prices", "--prices", str(p), "--json")
    assert r.code == 0, r.err
    assert [(x["gpu"], x["usd_per_instance_hour"]) for x in r.json()["rows"]] == [
        ("H100-SXM-80GB", 4.29)]


# -------------------- D16: calibrate and --prices CSVs naming a column twice
# csv.DictReader keeps the last column's cell under a repeated name, so a calibrate CSV with
# ttft_ms twice (80 and 999) was fitted to 999 ms with no word (median TTFT error 89%), and a
# price file's second 'provider' column silently replaced the first. As for traces (D4), a
# repeated column is one line: which, and to keep one.
@pytest.mark.parametrize(("command", "text", "says"), [
    ("calibrate", "model,gpu,batch,prompt,output,ttft_ms,tpot_ms,ttft_ms\n"
                  "meta-llama/Llama-3.1-8B,H100,1,1000,100,80,8,999\n", "'ttft_ms' twice"),
    ("calibrate", "model,gpu,num_prompts,input_len,output_len,max_concurrency,mean_ttft_ms,"
                  "mean_ttft_ms\nmeta-llama/Llama-3.1-8B,H100,10,100,10,1,50,60\n",
     "'mean_ttft_ms' twice"),
    ("prices", "provider,gpu,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
               "source_url,observed_on,transcribed_by,provider\n"
               "me,H100,1x H100,1,8,4.29,https://example.com,2026-09-25,me,other\n",
     "'provider' twice"),
])
def test_csv_with_a_repeated_column_is_refused(tmp_path: Path, command: str, text: str,
                                               says: str) -> None:
    f = tmp_path / "f.csv"
    f.write_text(text)
    r = run_cli(command, str(f), "--force") if command == "calibrate" else run_cli(
        "prices", "--prices", str(f))
    assert_one_line_error(r)
    assert f"the header names column {says}; keep one" in r.err
