"""`--dataset sharegpt` is what `vllm bench serve --dataset-name sharegpt` sends, checked against
public runs (sources in src/kvplan/data/traces/sharegpt/SOURCES.md); the multi-turn file keeps
a name of its own."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.analysis.calibration.public_set import raw_points
from kvplan.errors import InputError, UnknownNameError
from kvplan.specs.requests.traces import load_trace
from kvplan.specs.requests.workload import WorkloadArgs, build_workload

# vllm-project/vllm PR 17004 (2025-04-22): `benchmark_serving.py --model Llama-3.1-8B-Instruct
# --dataset-name sharegpt`, 1000 prompts, four runs, each printing "Total input tokens: 215196"
# and these "Total generated tokens" (a request stops at EOS or at its reply's length).
PR_17004_INPUT = 215_196
PR_17004_GENERATED = (197_328, 196_961, 197_190, 197_134)


def _sharegpt_runs(min_prompts: int) -> list[dict]:
    """The calibration set's public ShareGPT runs (printed means) of at least MIN_PROMPTS; runs
    whose page prints no totals (``workload.lengths_assumed``: GPUStack's quantization page) are
    not printed means and are left out."""
    return [p["workload"] for p in raw_points()
            if p["workload"].get("dataset") == "sharegpt"
            and not p["workload"].get("lengths_assumed")
            and p["workload"]["num_prompts"] >= min_prompts]


def test_first_1000_prompts_total_what_vllm_bench_serve_prints() -> None:
    trace = load_trace("sharegpt")
    assert int(trace.prompt_tokens[:1000].sum()) == PR_17004_INPUT
    assert int(trace.output_tokens[:1000].sum()) == 198_343
    assert int(trace.output_tokens[:1000].sum()) >= max(PR_17004_GENERATED)


def test_first_ten_are_lambdas_per_request_prompt_lengths() -> None:
    # Lambda's benchmark_serving.py --save-result JSON for Meta-Llama-3-70B-Instruct (Llama 3's
    # tokenizer, 10 prompts, seed 0) lists each request's prompt length and generated tokens.
    point = next(p for p in raw_points() if p["id"] == "lambda-meta-llama-3-70b-instruct_tp8-h100")
    trace = load_trace("sharegpt")
    assert trace.prompt_tokens[:10].tolist() == point["workload"]["input_lens"]
    assert np.all(np.array(point["workload"]["output_lens"]) <= trace.output_tokens[:10])


def test_means_match_every_public_run_of_100_prompts_or_more() -> None:
    # GPUStack (gpt-oss, Qwen3, DeepSeek tokenizers) and vLLM PR 23696: other tokenizers than
    # Llama 3's move the input mean by up to 4%, the generated mean (until EOS) by up to 6%.
    runs = _sharegpt_runs(100)
    assert len(runs) >= 20
    trace = load_trace("sharegpt")
    for w in runs:
        n = w["num_prompts"]
        assert w["mean_input_len"] == pytest.approx(trace.prompt_tokens[:n].mean(), rel=0.04)
        assert w["mean_output_len"] == pytest.approx(trace.output_tokens[:n].mean(), rel=0.06)


def test_the_public_band_is_215_to_233_in_and_190_to_221_out() -> None:
    # The lowest generated mean, 189.963, is vLLM PR 29217's Qwen3-VL-32B-Instruct-FP8 run (one
    # L40S, /v1/completions): replies end at EOS sooner than the other tokenizers' runs.
    ins = [w["mean_input_len"] for w in _sharegpt_runs(100)]
    outs = [w["mean_output_len"] for w in _sharegpt_runs(100)]
    assert (min(ins), max(ins)) == (215.31, 232.6)
    assert (min(outs), max(outs)) == (189.963, 220.61)


@pytest.mark.parametrize("n", [100, 1000, 16_384])
def test_sharegpt_means_lie_in_the_public_band_and_multiturn_does_not(n: int) -> None:
    trace = load_trace("sharegpt")
    assert 215 <= trace.prompt_tokens[:n].mean() <= 233
    assert 194 <= trace.output_tokens[:n].mean() <= 221
    multi = load_trace("sharegpt-multiturn")
    assert multi.prompt_tokens[:n].mean() > 1.5 * 233


def test_every_row_passes_vllms_length_filter_and_its_bounds_are_reached() -> None:
    # vllm/benchmarks/dataset_utils.py is_valid_sequence defaults: prompt and output >= 4
    # (min_len), prompt <= 1024 (max_prompt_len), prompt + output <= 2048 (max_total_len).
    trace = load_trace("sharegpt")
    p, o = trace.prompt_tokens, trace.output_tokens
    assert (int(p.min()), int(o.min()), int(p.max())) == (4, 4, 1024)
    assert int((p + o).max()) <= 2048
    multi = load_trace("sharegpt-multiturn")
    assert np.mean(multi.prompt_tokens > 1024) > 0.5  # not vLLM's sampling


def test_sharegpt_sends_vllms_1000_prompts_by_default() -> None:
    assert len(build_workload(WorkloadArgs(dataset="sharegpt"))) == 1000
    assert len(build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=16_384))) == 16_384
    with pytest.raises(InputError, match="at most 16384"):
        build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=16_385))
    assert len(build_workload(WorkloadArgs(dataset="sharegpt-multiturn"))) == 30_731


def test_a_near_miss_of_the_multiturn_name_is_pointed_to_it() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'sharegpt-multiturn'"):
        WorkloadArgs(dataset="sharegpt-multi-turn")
