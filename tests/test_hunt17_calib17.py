"""hunt17 (calib17): `kvplan calibrate` - a static fit pinned at 0, static points beside serving
runs, the refusal line, the simplex search's shrink, the server flags vLLM's file lacks, and the
one-line errors of CSV sweeps and vllm bench serve files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

MODEL = "meta-llama/Llama-3.1-8B"
SHAPES = ((1, 512, 64), (32, 2048, 128), (8, 1024, 128))


def _static_csv(path: Path, scale: float) -> Path:
    """kvplan latency's own TTFT / TPOT of SHAPES on H100 (bundled profile), times ``scale``."""
    rows = ["model,gpu,batch,prompt,output,ttft_ms,tpot_ms"]
    for b, p, o in SHAPES:
        d = run_cli("latency", MODEL, "--gpu", "h100", "--batch", str(b), "--prompt", str(p),
                    "--output", str(o), "--json").json()
        rows.append(f"{MODEL},h100,{b},{p},{o},{d['ttft_s'] * 1e3 * scale!r},"
                    f"{d['tpot_s'] * 1e3 * scale!r}")
    path.write_text("\n".join(rows) + "\n")
    return path


# ------------------------------------------- a static fit whose step overhead wants to go below 0


def test_static_fit_with_step_overhead_pinned_at_zero_is_refused(tmp_path: Path) -> None:
    """Static batches 20% faster than kvplan latency's own (bundled H100 profile, step overhead
    0.9346 ms): no step overhead >= 0 explains them, so the fit put step_overhead_s at its bound
    0 and wrote the profile with exit 0 and no word (median |error| 15.6%, under the 20% limit;
    the six errors were 8.7, 10.9, 14.9, 16.2, 24.3 and 24.9%). The serving fit refuses the same
    thing (test_overhead_fitted_to_its_floor_is_refused); every engine step costs vLLM host
    time. Now: refused, one line, nothing written; --force writes it with a warning."""
    csv = _static_csv(tmp_path / "fast.csv", 0.8)
    out = tmp_path / "p.json"
    r = run_cli("calibrate", str(csv), "--out", str(out))
    assert_one_line_error(r)
    assert "step_overhead_s pinned at its lower bound 0" in r.err and not out.exists()
    forced = run_cli("calibrate", str(csv), "--out", str(out), "--force", "--json")
    assert forced.code == 0 and "warning: " in forced.err
    assert json.loads(out.read_text())["profiles"][0]["step_overhead_s"] == 0.0


def test_static_fit_of_exact_numbers_keeps_prefill_overhead_zero(tmp_path: Path) -> None:
    """The bundled prefill overhead is 0: a fit that lands there is not refused (kvplan
    latency's own numbers fit back to step 0.9346 ms, prefill 0, exit 0)."""
    csv = _static_csv(tmp_path / "exact.csv", 1.0)
    r = run_cli("calibrate", str(csv), "--json")
    assert r.code == 0, r.err
    assert r.json()["profiles"][0]["prefill_overhead_s"] == 0.0


# ------------------------------------ static points beside serving runs: the static path's checks


def _serving_run(path: Path) -> Path:
    from kvplan.analysis.metrics import compute_metrics, save_result_json
    from kvplan.analysis.serving import simulate_serving
    from kvplan.specs.requests.workload import WorkloadArgs
    from kvplan.specs.serving import EngineConfig

    args = WorkloadArgs(num_prompts=8, random_input_len=2000, random_output_len=100,
                        max_concurrency=1)
    run = simulate_serving(MODEL, "H100-SXM-80GB", EngineConfig(), args)
    path.write_text(json.dumps(save_result_json(run.result, compute_metrics(run.result),
                                                run.header(args))))
    return path


def test_static_point_beside_a_serving_run_is_checked_like_alone(tmp_path: Path) -> None:
    """A static point of 200,000 prompt tokens on Llama-3.1-8B (context 131,072) is refused
    alone ('exceeds the model's context'), but beside a serving run it was priced and fitted
    (exit 0 under --force, its TTFT -30%): static_point skipped check_point. And a TP 3 point
    (32 heads) said '--tensor-parallel-size 3 must divide ...' without its file and line."""
    run = _serving_run(tmp_path / "run.json")
    big = tmp_path / "big.csv"
    big.write_text(f"model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
                   f"{MODEL},h100,1,200000,64,30000,20\n")
    for argv in ([str(big)], [str(run), str(big), "--force"]):
        r = run_cli("calibrate", *argv)
        assert_one_line_error(r)
        assert f"{big}:2: prompt 200,000 + output 64 tokens exceeds the model's context" \
            in r.err, r.err
    tp3 = tmp_path / "tp3.csv"
    tp3.write_text(f"model,gpu,batch,prompt,output,ttft_ms,tpot_ms,tensor_parallel_size\n"
                   f"{MODEL},h100,1,2000,64,300,20,3\n")
    r = run_cli("calibrate", str(run), str(tp3), "--force")
    assert_one_line_error(r)
    assert f"{tp3}:2: " in r.err and "must divide num_attention_heads 32" in r.err, r.err


# ------------------------------------------------------- a CSV sweep naming its model as vLLM does


def test_csv_sweep_with_a_model_id_column_is_read(tmp_path: Path) -> None:
    """A sweep whose model column is vLLM's key, model_id: the run reader takes model_id
    (serving_runs._run), but the row check before it read only 'model' and refused the file:
    "missing 'model' (give it in the file or as --model)". Now both name the model."""
    rows = "num_prompts,input_len,output_len,max_concurrency,mean_ttft_ms,mean_tpot_ms\n"
    body = "8,2000,100,1,60,7.8\n64,500,200,32,121,11.4\n"
    sweep = tmp_path / "sweep.csv"
    sweep.write_text(f"model_id,gpu,{rows}" + "".join(f"{MODEL},H100,{r}"
                                                      for r in body.splitlines(True)))
    plain = tmp_path / "plain.csv"
    plain.write_text(sweep.read_text().replace("model_id,", "model,", 1))
    a = run_cli("calibrate", str(sweep), "--force", "--json")
    b = run_cli("calibrate", str(plain), "--force", "--json")
    assert a.code == 0, a.err
    assert a.json()["profiles"] == b.json()["profiles"]


# ------------------------------------------------ a TPOT of a static batch with one output token


def test_static_tpot_of_a_one_token_output_is_refused(tmp_path: Path) -> None:
    """Output 1 has no second token, so no time per output token (vLLM's TPOT skips such
    requests and writes 0); kvplan compared the measured 7 ms TPOT with the predicted TTFT
    (static_batch_latency's tpot None -> ttft: 11.53 ms on H100 for 512 tokens), fitting the
    TPOT as a prefill. Now one line naming the row."""
    csv = tmp_path / "o1.csv"
    csv.write_text(f"model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
                   f"{MODEL},h100,1,512,1,12,7\n{MODEL},h100,8,1024,128,75,8.4\n")
    r = run_cli("calibrate", str(csv), "--force")
    assert_one_line_error(r)
    assert f"{csv}:2: 'tpot_ms' needs an output of at least 2 tokens" in r.err, r.err
    ok = tmp_path / "ttft.csv"  # its TTFT alone is a measurement
    ok.write_text(f"model,gpu,batch,prompt,output,ttft_ms\n{MODEL},h100,1,512,1,12\n")
    assert run_cli("calibrate", str(ok), "--force").code == 0


# ------------------------------------------- a refusal of many reasons says every one of them


def _vllm_v011_result(path: Path) -> Path:
    """A `vllm bench serve --save-result` file as v0.11.0 writes it (vllm/benchmarks/serve.py:
    the setup keys, request_rate "inf", burstiness, max_concurrency, then benchmark()'s
    result with mean/median/std/p99 per metric), its numbers not from any engine kvplan knows:
    100 prompts of 1,024 tokens at concurrency 16, TTFT 120 ms, TPOT 15 ms."""
    doc = {"date": "20251010-120000", "endpoint_type": "openai", "backend": "openai",
           "label": None, "model_id": MODEL, "tokenizer_id": MODEL, "num_prompts": 100,
           "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 16, "duration": 20.5,
           "completed": 100, "failed": 0, "total_input_tokens": 102400,
           "total_output_tokens": 12800, "request_throughput": 4.87, "request_goodput": None,
           "output_throughput": 624.0, "total_token_throughput": 5620.0,
           "max_output_tokens_per_s": 900.0, "max_concurrent_requests": 16}
    for metric, (mean, median, std, p99) in {"ttft": (120.0, 110.0, 20.0, 200.0),
                                             "tpot": (15.0, 14.8, 1.0, 18.0),
                                             "itl": (15.0, 14.0, 3.0, 30.0)}.items():
        doc |= {f"mean_{metric}_ms": mean, f"median_{metric}_ms": median,
                f"std_{metric}_ms": std, f"p99_{metric}_ms": p99}
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_a_refusal_of_many_reasons_names_each_in_its_one_line(tmp_path: Path) -> None:
    """This run fits to six problems (three terms at a bound, the median error, a term no
    value sees, two terms inseparable); each carried its own advice and the joined line ran
    to ~950 characters, which the CLI cuts to 500 in the middle: the refusal read '...explains
    eve... runs that differ in batch size', the pinned API term, the unseen term and the
    inseparable pair cut away. Now each reason is said once, the advice once, within 500."""
    run = _vllm_v011_result(tmp_path / "serve.json")
    r = run_cli("calibrate", str(run), "--gpu", "H100")
    assert_one_line_error(r)
    forced = run_cli("calibrate", str(run), "--gpu", "H100", "--force", "--json")
    problems = forced.json()["problems"]
    assert len(problems) >= 4, problems
    line = r.err.strip()
    assert len(line) <= 500 and "..." not in line, line
    said = line.split(": ", 2)[2]  # after 'error: the fit cannot be trusted: '
    for p in problems:  # each reason's terms and numbers, in the order the fit found them
        head = p.split(": ", 1)[1].split(" (")[0]
        for token in re.findall(r"\b[a-z]+(?:_[a-z]+)*_s\b|\d[\d.e-]*%?", head):
            assert token in said, (token, p, line)
            said = said[said.index(token) + len(token):]
    assert "pinned at its lower bound 1e-06 s" in line and "cannot separate" in line
    assert "--force" in line


# ------------------------------------------------- which runs the docs say are replayed, and are


def test_docs_say_which_runs_are_replayed_as_the_code_does(tmp_path: Path) -> None:
    """docs/formulas-latency.md said calibrate 'replays only runs at concurrency unset or 1',
    but serving_fit.to_point replays only concurrency 1 or one prompt (a run with no limit
    queues at the API server's serial admission, which the replay approximates) and simulates
    the rest again. Both now say the rule the code follows."""
    from kvplan.analysis.calibration import serving_fit as sc
    from kvplan.analysis.calibration.measurements import Defaults

    doc = (Path(__file__).parent.parent / "docs" / "formulas-latency.md").read_text()
    text = " ".join(doc.split())
    assert "replays only runs at concurrency 1 (or of one prompt)" in text
    assert "concurrency unset or 1" not in text
    run = _serving_run(tmp_path / "one.json")
    doc1 = json.loads(run.read_text())
    (at_one,) = sc.read_serving(run, Defaults())
    doc1["max_concurrency"] = None
    run.write_text(json.dumps(doc1))
    (unset,) = sc.read_serving(run, Defaults())
    assert "Replay" in sc.to_point(at_one).predict.__qualname__
    assert "_resimulate" in sc.to_point(unset).predict.__qualname__


# ------------------------------------------- the simplex search keeps every vertex after a shrink


def test_nelder_mead_shrink_keeps_n_plus_one_distinct_vertices() -> None:
    """A shrink moves every vertex but the best halfway to it; _next then returned the
    worst shrunk vertex *object* to replace the last one, so when that was not the last the
    simplex held one vertex twice (the same list) and lost the shrunk last one: n + 1 points
    spanning n - 1 dimensions, a direction the search can no longer move in. Hand case:
    simplex (0.5, 0.5) f 0, (1, 0.5) f 1, (0.5, 1) f 2; centre of the best two (0.75, 0.5):
    reflection (1, 0), expansion (1, 0) clamped, contraction (0.625, 0.75) all f 3 >= 2, so
    it shrinks to (0.75, 0.5) f 5 and (0.5, 0.75) f 4. Before: [(0.5, 0.5), (0.75, 0.5),
    (0.75, 0.5)]; now all three kept."""
    from kvplan.analysis.calibration.nelder_mead import _next

    table = {(0.5, 0.5): 0.0, (1.0, 0.5): 1.0, (0.5, 1.0): 2.0, (0.75, 0.5): 5.0,
             (0.5, 0.75): 4.0}

    def f(u: list[float]) -> float:
        return table.get((u[0], u[1]), 3.0)

    simplex = [[0.5, 0.5], [1.0, 0.5], [0.5, 1.0]]
    values = [f(u) for u in simplex]
    simplex[-1], values[-1] = _next(f, simplex, values, [0.75, 0.5])
    assert sorted(map(tuple, simplex)) == [(0.5, 0.5), (0.5, 0.75), (0.75, 0.5)]
    assert values == [f(u) for u in simplex]


# ------------------------------------------ a forced static fit's JSON says why it was refused


def test_forced_static_json_lists_its_problems_as_the_serving_json_does(tmp_path: Path) -> None:
    """`calibrate --force --json` on serving runs prints "problems": [...] beside the profile;
    on static batches the key was missing, so a script saw a forced, untrusted fit as a clean
    one (the reasons only on stderr). The 20%-fast batches above: the step overhead at 0."""
    csv = _static_csv(tmp_path / "fast.csv", 0.8)
    r = run_cli("calibrate", str(csv), "--force", "--json")
    assert r.code == 0, r.err
    problems = r.json()["problems"]
    assert any("step_overhead_s pinned at its lower bound 0" in p for p in problems), problems
    clean = run_cli("calibrate", str(_static_csv(tmp_path / "exact.csv", 1.0)), "--json")
    assert clean.json()["problems"] == []


# ------------------------------------------------ a CSV sweep's bad cell named by its own column


def test_csv_sweep_errors_name_the_sweeps_own_columns(tmp_path: Path) -> None:
    """The sweep's row check went through the static reader's names: an input_len of 0 was
    "'prompt' must be positive" and a mean_ttft_ms of nan "'ttft_ms' must be positive" -
    columns the file does not have. Now the file's own column is named."""
    head = "model,gpu,num_prompts,input_len,output_len,max_concurrency,mean_ttft_ms,mean_tpot_ms\n"
    for cells, said in ((f"{MODEL},H100,10,0,64,1,20,8", "'input_len' must be positive, got '0'"),
                        (f"{MODEL},H100,10,512,64,1,nan,8",
                         "'mean_ttft_ms' must be positive, got 'nan'"),
                        (f"{MODEL},H100,10,512,-3,1,20,8",
                         "'output_len' must be positive, got '-3'")):
        sweep = tmp_path / "s.csv"
        sweep.write_text(head + cells + "\n")
        r = run_cli("calibrate", str(sweep))
        assert_one_line_error(r)
        assert f"{sweep}:2: {said}" in r.err, r.err


# --------------------------------------------- a vllm bench serve file without its 'completed' key


def test_bench_serve_file_without_completed_is_read_by_its_own_keys(tmp_path: Path) -> None:
    """A vLLM result lacking 'completed' (hand-trimmed) went through the CSV-sweep check and
    said "missing 'prompt' (give it in the file or as an option)" - neither a key of the
    file nor a flag that applies to it. Now its num_prompts stands for completed (as the run
    reader takes it) and a file with neither names 'completed'."""
    run = _serving_run(tmp_path / "run.json")
    doc = json.loads(run.read_text())
    del doc["completed"]
    trimmed = tmp_path / "trimmed.json"
    trimmed.write_text(json.dumps(doc))
    a = run_cli("calibrate", str(run), "--force", "--json")
    b = run_cli("calibrate", str(trimmed), "--force", "--json")
    assert b.code == 0, b.err
    assert a.json()["profiles"] == b.json()["profiles"]
    del doc["num_prompts"]
    trimmed.write_text(json.dumps(doc))
    r = run_cli("calibrate", str(trimmed))
    assert_one_line_error(r)
    assert "missing 'completed'" in r.err, r.err


# ------------------------------------------- vllm bench serve results wrapped in one JSON array


def test_an_array_of_bench_serve_results_says_what_to_give(tmp_path: Path) -> None:
    """Two `vllm bench serve` results joined into one JSON array read as static points and
    said "missing 'batch' (give it in the file or as an option)"; --batch does not make
    them runs. Now the line says the runs' accepted forms."""
    one = json.loads(_serving_run(tmp_path / "run.json").read_text())
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps([one, one]))
    r = run_cli("calibrate", str(arr))
    assert_one_line_error(r)
    assert f"{arr}:1: a JSON array of vllm bench serve results" in r.err, r.err


# ------------------------------------- a vLLM run served with non-default scheduler limits


def test_server_limits_missing_from_vllms_file_can_be_given_as_flags(tmp_path: Path) -> None:
    """vLLM's save-result records none of the server's flags; a run served with
    --max-num-seqs 8 at concurrency 32 queues 24 requests in the engine, but calibrate
    replayed it at vLLM's default 1,024 seqs (mean TTFT 5.29 s measured vs 0.33 s replayed)
    and had no flag to say so: only --metadata max_num_seqs=8 at bench time. Now
    --max-num-seqs (and --max-num-batched-tokens, --max-model-len) fill what a file lacks;
    the run, simulated with the bundled profile, replays to its own numbers."""
    from kvplan.analysis.calibration import serving_fit as sc
    from kvplan.analysis.calibration.measurements import Defaults
    from kvplan.analysis.metrics import compute_metrics, save_result_json
    from kvplan.analysis.serving import simulate_serving
    from kvplan.costs.step.profiles import default_profiles
    from kvplan.specs.requests.workload import WorkloadArgs
    from kvplan.specs.serving import EngineConfig

    args = WorkloadArgs(num_prompts=64, random_input_len=1000, random_output_len=100,
                        max_concurrency=32)
    run = simulate_serving(MODEL, "H100-SXM-80GB", EngineConfig(max_num_seqs=8), args)
    doc = save_result_json(run.result, compute_metrics(run.result), run.header(args))
    del doc["max_num_seqs"]  # vLLM's file: no server flags
    path = tmp_path / "s8.json"
    path.write_text(json.dumps(doc))
    (told,) = sc.read_serving(path, Defaults(max_num_seqs=8))
    assert told.engine.max_num_seqs == 8
    bundled = default_profiles().pick("H100-SXM-80GB", "bfloat16")
    pred = sc.to_point(told).predict(bundled)
    assert pred["ttft_s"] == pytest.approx(doc["mean_ttft_ms"] / 1e3, rel=1e-6)
    r = run_cli("calibrate", str(path), "--max-num-seqs", "8", "--force", "--json")
    assert r.code == 0, r.err
    (ttft,) = [p for p in r.json()["points"] if p["metric"] == "ttft_s"]
    assert abs(ttft["error"]) < 0.05, ttft
