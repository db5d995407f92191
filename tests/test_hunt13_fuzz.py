"""Hunt 13, fuzz: defects the fuzzer found on the surfaces added since fuzz-4 (calibrate's
inputs, disaggregated fleets, pasted lines, profiles, prices, sweeps, report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz2_support import assert_error, run_case, strict_json

L1B = "meta-llama/Llama-3.2-1B"
_HEAD = "model,gpu,batch,prompt,output,ttft_ms\n"


def test_calibrate_points_of_two_files_are_told_apart(tmp_path: Path) -> None:
    """Was: every unnamed CSV row got the id 'line-N', so two files' per-point errors in
    --json were 'line-2', 'line-3', 'line-2', 'line-3' (which file?)."""
    files = {"a.csv": _HEAD + f"{L1B},H100,1,512,64,12\n{L1B},H100,4,1024,64,30\n",
             "b.csv": _HEAD + f"{L1B},H100,1,2048,64,40\n{L1B},H100,8,256,64,25\n"}
    result = run_case(tmp_path, ["calibrate", "a.csv", "b.csv", "--force", "--json"], files)
    assert result.code == 0, result.err
    ids = [p["id"] for p in strict_json(result.out)["points"]]
    assert ids == ["a.csv:2", "a.csv:3", "b.csv:2", "b.csv:3"]


def test_calibrate_floor_refusal_names_the_file_and_line(tmp_path: Path) -> None:
    """Was: 'error: line-2: measured E2E 5.00 ms is below its physical floor 11.83 ms' (a CSV
    row) and 'error: point-0: ...' (a JSON point): no file, so the user could not find it.
    The floor: 16 steps (1 prefill + 15 decode), each reading the 1B model's 2.47 GB of bf16
    weights at 3.35 TB/s: 16 x 0.739 ms."""
    files = {"e.csv": "model,gpu,batch,prompt,output,e2e_ms\n" f"{L1B},H100,1,128,16,5\n"}
    assert_error(run_case(tmp_path, ["calibrate", "e.csv"], files),
                 "error: e.csv:2: measured E2E 5.00 ms is below its physical floor 11.83 ms")
    files = {"p.json": f'[{{"model": "{L1B}", "gpu": "H100", "batch": 1, "prompt": 128,'
                       ' "output": 16, "e2e_ms": 5}]'}
    assert_error(run_case(tmp_path, ["calibrate", "p.json"], files), "error: p.json:1: ")


def test_calibrate_own_ids_are_kept(tmp_path: Path) -> None:
    files = {"a.csv": "id," + _HEAD + f"run-a,{L1B},H100,1,512,64,12\n"
                      f"run-b,{L1B},H100,4,1024,64,30\n"}
    result = run_case(tmp_path, ["calibrate", "a.csv", "--force", "--json"], files)
    assert [p["id"] for p in strict_json(result.out)["points"]] == ["run-a", "run-b"]


def test_pasted_line_given_quoted_as_one_word_is_read(tmp_path: Path) -> None:
    """Was: `kvplan capacity -- "vllm serve openai/gpt-oss-20b --max-model-len 8192"` (the line
    quoted, e.g. from a shell variable) -> error: unknown model 'vllm serve openai/gpt-oss-20b
    --max-model-len 8192'. Now read as the unquoted line is: the same JSON."""
    line = ["CUDA_VISIBLE_DEVICES=0", "vllm", "serve", "openai/gpt-oss-20b", "--max-model-len",
            "8192", "--kv-cache-dtype", "fp8"]
    words = run_case(tmp_path, ["capacity", "--json", "--", *line])
    quoted = run_case(tmp_path, ["capacity", "--json", "--",
                                 " ".join(line[:4]) + " \\\n  " + " ".join(line[4:])])
    assert quoted.code == 0, quoted.err
    assert strict_json(quoted.out) == strict_json(words.out)
    assert strict_json(quoted.out)["max_model_len"] == 8192


def test_pasted_line_with_an_unclosed_quote_is_one_error(tmp_path: Path) -> None:
    result = run_case(tmp_path, ["capacity", "--", "vllm serve 'openai/gpt-oss-20b"])
    assert_error(result, "cannot split the pasted line", "No closing quotation")


_PRICE_HEAD = ("gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
               "source_url,observed_on,transcribed_by\n")


def _price_row(**cells: str) -> str:
    row = {"gpu": "H100", "provider": "me", "instance": "8x", "gpus_per_instance": "8",
           "gpus_per_node": "8", "usd_per_instance_hour": "20", "source_url": "https://x",
           "observed_on": "2026-01-01", "transcribed_by": "me", **cells}
    return _PRICE_HEAD + ",".join(row.values()) + "\n"


@pytest.mark.parametrize(("cells", "said"), [
    ({"gpus_per_instance": "abc"}, "gpus_per_instance must be a whole number, got 'abc'"),
    ({"gpus_per_node": ""}, "gpus_per_node must be a whole number, got ''"),
    ({"usd_per_instance_hour": "abc"}, "usd_per_instance_hour must be a number, got 'abc'"),
    ({"observed_on": "01/02/2026"}, "observed_on must be a date YYYY-MM-DD, got '01/02/2026'"),
])
def test_price_file_bad_cell_names_its_column(cells: dict[str, str], said: str,
                                               tmp_path: Path) -> None:
    """Was: 'error: --prices p.csv line 2: invalid literal for int() with base 10: 'abc';
    observed_on is YYYY-MM-DD, counts whole numbers' (Python's words; which column?)."""
    result = run_case(tmp_path, ["prices", "--prices", "p.csv"], {"p.csv": _price_row(**cells)})
    assert_error(result, f"error: --prices p.csv line 2: {said}")


def test_price_file_good_row_still_read(tmp_path: Path) -> None:
    result = run_case(tmp_path, ["prices", "--prices", "p.csv", "--json"],
                      {"p.csv": _price_row(gpus_per_instance=" 8 ")})
    row = strict_json(result.out)["rows"][0]
    assert (row["usd_per_gpu_hour"], row["observed_on"]) == (2.5, "2026-01-01")


def test_request_timeline_steps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: request_timeline(kv, 10**7, 1, chunk_tokens=1) built 10^7 step objects (still
    running after 120 s; 10^6 steps took 24 s and 350 MB); a 10M-context config.json let
    `kvplan request` do the same. Now at most MAX_TIMELINE_STEPS: steps = cdiv(P, C) + O."""
    import kvplan
    from kvplan import limits
    from kvplan.errors import InputError

    kv = kvplan.kv_spec(kvplan.load_model(L1B))
    monkeypatch.setattr(limits, "MAX_TIMELINE_STEPS", 1000, raising=False)
    assert len(kvplan.request_timeline(kv, 100, 999, chunk_tokens=100).steps) == 1000
    with pytest.raises(InputError, match="= 1,001;"):
        kvplan.request_timeline(kv, 101, 999, chunk_tokens=100)  # 2 chunks + 999 tokens


def test_request_on_a_ten_million_token_context_is_refused_at_once(tmp_path: Path) -> None:
    from tests.fuzz2_support import config

    files = {"config.json": config(max_position_embeddings=10_000_000)}
    result = run_case(tmp_path, ["request", "config.json", "--prompt", "1", "--output",
                                 "9000000", "--json"], files)
    assert_error(result, "= 9,000,001", "at most 1,000,000")


@pytest.mark.parametrize(("key", "value", "said"), [
    ("mean_tpot_ms", -1, "'mean_tpot_ms' must be positive, got -1"),
    ("output_throughput", -300.0, "'output_throughput' must be positive, got -300.0"),
    ("mean_ttft_ms", "abc", "'mean_ttft_ms' must be a number, got 'abc'"),
])
def test_bench_serve_bad_value_is_named_as_in_the_file(key: str, value: object, said: str,
                                                       tmp_path: Path) -> None:
    """Was: a `vllm bench serve` result with mean_tpot_ms -1 read "'tpot_ms' must be
    positive" (and output_throughput: 'output_throughput_tok_s'): keys not in the file."""
    from tests.fuzz2_support import bench

    files = {"b.json": bench(**{key: value})}
    assert_error(run_case(tmp_path, ["calibrate", "b.json"], files), f"error: b.json:1: {said}")


def test_report_of_an_infeasible_plan_says_why_not_none() -> None:
    """Was: `kvplan report --plan` on a plan that found nothing (exit 1, status infeasible)
    showed 'best None', 'None replica(s), None GPU(s)', 'binds first None' and 'why None',
    though the saved summary holds the why."""
    from kvplan.report.plan.plan_report import plan_sections

    why = "nothing in the space meets the SLO; the closest, c0007, misses p50_e2el_ms"
    plan = {"summary": {"status": "infeasible", "best": None, "usd_per_hour": None,
                        "replicas": None, "gpus": None, "binding": None, "why": why},
            "candidates": [], "inputs": {"model": L1B, "workload": "random"}}
    card = dict(plan_sections(plan)[0].rows)
    assert card["why"] == why
    assert (card["best"], card["replicas x GPUs"], card["binds first"]) == ("-", "-", "-")
    assert not any("None" in v for v in card.values()), card


_PREFIX_RUN = ["simulate", "--gpu", "H200", "--num-prompts", "10", "--random-input-len", "1024",
               "--random-prefix-len", "512", "--random-output-len", "4", "--json"]


def test_sliding_window_shared_prefix_says_hits_are_not_modelled(tmp_path: Path) -> None:
    """Was: Mistral-7B-v0.1 (every layer a 4,096-token window) with a 512-token shared prefix
    printed prefix_cache_hit_rate 0.0 without a word, where vLLM 0.11's sliding-window
    manager hits the 32 shared blocks (the hit Llama-3.1-8B shows: 9 x 512 / 15,360 = 0.3)."""
    run = run_case(tmp_path, [_PREFIX_RUN[0], "mistralai/Mistral-7B-v0.1", *_PREFIX_RUN[1:]])
    assert run.code == 0, run.err
    assert strict_json(run.out)["prefix_cache_hit_rate"] == 0.0
    assert "note: prefix-cache hits are not modelled for sliding-window KV groups" in run.err
    full = run_case(tmp_path, [_PREFIX_RUN[0], "meta-llama/Llama-3.1-8B", *_PREFIX_RUN[1:]])
    assert strict_json(full.out)["prefix_cache_hit_rate"] == pytest.approx(9 * 512 / 15360)
    assert "not modelled" not in full.err


def test_provider_is_matched_without_case() -> None:
    """--provider LAMBDA was refused ('unknown --provider'), unlike --gpu h100."""
    from kvplan.specs.prices import price_table

    assert price_table("LAMBDA").provider == "lambda"
    assert price_table(" Lambda ").provider == "lambda"
    assert price_table("lambda").rows == price_table("LAMBDA").rows
