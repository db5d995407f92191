"""Workloads: vllm bench serve's random lengths and gamma arrivals, WorkloadArgs, trace replay."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import InputError, KvplanError, UnknownNameError
from kvplan.specs.requests.traces import load_trace
from kvplan.specs.requests.workload import (
    DATASETS,
    RequestSpec,
    Workload,
    WorkloadArgs,
    build_workload,
    gamma_arrivals,
    length_bounds,
    random_workload,
    synthetic_workload,
)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# --- random lengths ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "ratio", "floor_at", "bounds"),
    [
        (1024, 0.0, 0, (1024, 1024)),
        (1024, 0.1, 0, (921, 1127)),  # floor(921.6), ceil(1126.4)
        (128, 0.5, 1, (64, 192)),
        (1, 0.5, 1, (1, 2)),  # floor(0.5) = 0 -> output floor 1; ceil(1.5) = 2
        (1, 0.5, 0, (0, 2)),  # inputs may draw 0 when a shared prefix keeps the prompt >= 1
        (10, 0.99, 1, (1, 20)),
    ],
)
def test_length_bounds_are_vllms_floor_and_ceil(length, ratio, floor_at, bounds):
    assert length_bounds(length, ratio, floor_at=floor_at) == bounds


def test_random_lengths_cover_exactly_the_inclusive_range():
    w = random_workload(num_prompts=5000, input_len=10, output_len=4, range_ratio=0.25, rng=rng())
    assert (w.prompt_tokens.min(), w.prompt_tokens.max()) == (7, 13)  # floor 7.5, ceil 12.5
    assert (w.output_tokens.min(), w.output_tokens.max()) == (3, 5)


def test_random_prefix_adds_tokens_and_shares_the_prefix_as_one_hash_block():
    # one hash block of prefix_len tokens: the simulator cuts it at any --block-size
    # (tests/test_hunt16_sched16.py)
    w = random_workload(num_prompts=3, input_len=50, output_len=5, prefix_len=100, rng=rng())
    assert w.prompt_tokens.tolist() == [150, 150, 150]
    assert w.hash_block_tokens == 100
    assert w.request(2).prefix_hashes == (0,)
    assert w.prefix_hashes is not None
    assert w.prefix_hashes[0] is w.prefix_hashes[2]  # one shared array, not one per request
    short = random_workload(num_prompts=3, input_len=50, output_len=5, prefix_len=15, rng=rng())
    assert short.hash_block_tokens == 15 and short.prompt_tokens[0] == 65
    none = random_workload(num_prompts=3, input_len=50, output_len=5, prefix_len=0, rng=rng())
    assert none.prefix_hashes is None and none.hash_block_tokens == 0


def test_same_seed_same_workload_other_seed_differs():
    args = WorkloadArgs(num_prompts=200, random_range_ratio=0.5, request_rate=4.0, seed=7)
    a, b = build_workload(args), build_workload(args)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    c = build_workload(dataclasses.replace(args, seed=8))
    assert not np.array_equal(a.prompt_tokens, c.prompt_tokens)


def test_lengths_are_drawn_first_in_vllms_order():
    # vLLM's RandomDataset: rng = default_rng(seed); integers(in_low, in_high + 1, n), then outputs.
    w = build_workload(WorkloadArgs(num_prompts=50, random_range_ratio=0.3, seed=3))
    expected = rng(3)
    inputs = expected.integers(716, 1332 + 1, size=50)  # floor(1024*0.7), ceil(1024*1.3)
    outputs = expected.integers(89, 167 + 1, size=50)  # floor(128*0.7), ceil(128*1.3)
    assert w.prompt_tokens.tolist() == inputs.tolist()
    assert w.output_tokens.tolist() == outputs.tolist()


# --- arrivals ------------------------------------------------------------------------------------


def test_infinite_rate_sends_everything_at_zero():
    w = build_workload(WorkloadArgs(num_prompts=10))
    assert w.is_offline and w.arrival_s.tolist() == [0.0] * 10
    assert len(w) == 10


def test_infinite_burstiness_is_evenly_spaced():
    arrivals = gamma_arrivals(4, 2.0, math.inf, rng())
    assert arrivals.tolist() == [0.5, 1.0, 1.5, 2.0]


def test_last_arrival_is_rescaled_to_n_over_rate_as_vllm_does():
    arrivals = gamma_arrivals(1000, 5.0, 1.0, rng(1))
    assert arrivals[-1] == pytest.approx(200.0, rel=1e-12)
    assert arrivals[0] > 0  # the first request waits one gap, as in vLLM's get_request


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_burstiness_sets_the_gap_coefficient_of_variation(burstiness):
    # Gamma(shape=b, scale=1/(rate*b)): mean 1/rate, CV = 1/sqrt(b); b=1 is Poisson.
    gaps = np.diff(gamma_arrivals(200_000, 10.0, burstiness, rng(5)), prepend=0.0)
    assert gaps.mean() == pytest.approx(0.1, rel=1e-9)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.02)


def test_poisson_arrivals_have_the_mean_rate_and_exponential_gaps():
    arrivals = gamma_arrivals(100_000, 3.0, 1.0, rng(11))
    gaps = np.diff(arrivals, prepend=0.0)
    assert len(arrivals) / arrivals[-1] == pytest.approx(3.0)
    # P(gap < mean) = 1 - 1/e for an exponential distribution.
    assert np.mean(gaps < gaps.mean()) == pytest.approx(1 - math.exp(-1), abs=0.005)
    # Counts per 10 s window: Poisson with mean 30 and variance 30.
    counts = np.bincount((arrivals // 10).astype(int))[:-1]
    assert counts.mean() == pytest.approx(30, rel=0.01)
    assert counts.var() == pytest.approx(30, rel=0.1)


# --- Workload ------------------------------------------------------------------------------------


def test_workload_request_view_and_read_only_arrays():
    w = Workload(
        name="w",
        arrival_s=[0.0, 1.5],
        prompt_tokens=[10, 20],
        output_tokens=[3, 4],
        prefix_hashes=(np.array([1, 2]), np.array([1])),
        hash_block_tokens=16,
    )
    assert w.request(1) == RequestSpec(
        request_id=1, arrival_s=1.5, prompt_tokens=20, output_tokens=4, prefix_hashes=(1,)
    )
    assert [r.prompt_tokens for r in w.requests()] == [10, 20]
    assert w.duration_s == 1.5 and not w.is_offline
    with pytest.raises(ValueError):
        w.prompt_tokens[0] = 5


def test_workload_copies_a_callers_writable_array():
    prompts = np.array([10, 20])
    w = Workload(name="w", arrival_s=np.zeros(2), prompt_tokens=prompts, output_tokens=[1, 1])
    prompts[0] = 99
    assert w.prompt_tokens[0] == 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arrival_s": [1.0, 0.5]}, "sorted ascending"),
        ({"arrival_s": [-1.0, 0.5]}, "finite seconds >= 0"),
        ({"arrival_s": [0.0]}, "differ in length"),
        ({"prompt_tokens": [0, 1]}, ">= 1 token"),
        ({"output_tokens": [1, -1]}, ">= 1 token"),
        ({"prefix_hashes": (np.array([0]),), "hash_block_tokens": 16}, "one array per request"),
        ({"prefix_hashes": (np.array([0]),) * 2}, "hash_block_tokens >= 1"),
        ({"closed_loop_concurrency": 0}, "--max-concurrency"),
    ],
)
def test_workload_rejects_inconsistent_arrays(kwargs, message):
    base = {"name": "w", "arrival_s": [0.0, 1.0], "prompt_tokens": [1, 2], "output_tokens": [1, 2]}
    with pytest.raises(InputError, match=message):
        Workload(**{**base, **kwargs})


def test_a_million_requests_build_fast_and_small():
    w = synthetic_workload(1_000_000, 1024, 128, rate=100.0, seed=0)
    assert len(w) == 1_000_000
    assert w.arrival_s.nbytes + w.prompt_tokens.nbytes + w.output_tokens.nbytes == 24_000_000
    assert w.duration_s == pytest.approx(10_000.0)
    assert set(np.unique(w.prompt_tokens).tolist()) == {1024}


# --- WorkloadArgs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"random_input_len": -1}, "--random-input-len must be a whole number >= 0, got -1"),
        ({"random_input_len": 0}, "--random-input-len 0 with --random-range-ratio 0.0 can "
                                  "draw 0-token prompts"),
        ({"random_output_len": -5}, "--random-output-len must be a whole number >= 1"),
        ({"random_prefix_len": -1}, "--random-prefix-len must be a whole number >= 0"),
        ({"num_prompts": 0}, "--num-prompts must be a whole number >= 1"),
        ({"max_concurrency": 0}, "--max-concurrency must be a whole number >= 1"),
        ({"random_range_ratio": 1.0}, r"--random-range-ratio must be in \[0, 1\), got 1.0"),
        ({"random_range_ratio": -0.1}, r"--random-range-ratio must be in \[0, 1\)"),
        ({"random_input_len": 1, "random_range_ratio": 0.5}, "can draw 0-token prompts"),
        ({"request_rate": 0.0}, "--request-rate must be > 0 requests/s or inf, got 0.0"),
        ({"request_rate": float("nan")}, "--request-rate must be > 0"),
        ({"request_rate": 1.0, "burstiness": 0.0}, "--burstiness must be > 0"),
        ({"burstiness": 2.0}, "give a finite --request-rate too"),
        ({"time_scale": 2.0}, "--time-scale only rescales a trace's own arrival times"),
        ({"dataset": "azure-conv", "time_scale": -1.0}, "--time-scale must be a finite number > 0"),
        ({"num_prompts": "many"}, "--num-prompts: input should be a valid integer"),
        ({"num_prompts": 1.5}, "--num-prompts: input should be a valid integer"),
        ({"prompts": 10}, "unknown workload option 'prompts'"),
        ({"dataset": "bwb", "random_input_len": 10}, "--random-input-len applies only to"),
        ({"dataset": "bwb", "trace": "x.csv"}, "either --dataset NAME or --trace FILE"),
        ({"trace_columns": "input=a,output=b"}, "--trace-columns needs --trace FILE"),
        ({"dataset": "azure-conv", "burstiness": 0.5}, "give a finite --request-rate too"),
    ],
)
def test_bad_flags_raise_one_line_input_errors(kwargs, message):
    with pytest.raises(InputError, match=message) as info:
        WorkloadArgs(**kwargs)
    assert "\n" not in str(info.value)


def test_unknown_dataset_names_the_choices():
    with pytest.raises(UnknownNameError, match=r"did you mean 'sharegpt'.*choose one of random"):
        WorkloadArgs(dataset="share-gpt")


def test_inf_rate_and_burstiness_are_accepted_as_vllm_does():
    args = WorkloadArgs(request_rate="inf")
    assert math.isinf(args.request_rate) and args.dataset_name == "random"
    assert math.isinf(WorkloadArgs(request_rate=2, burstiness="inf").burstiness)


# --- traces through build_workload ----------------------------------------------------------------


def test_timed_trace_replays_its_own_arrivals_scaled():
    trace = load_trace("azure-conv")
    w = build_workload(WorkloadArgs(dataset="azure-conv", num_prompts=100, time_scale=2.0))
    assert w.name == "azure-conv" and len(w) == 100
    assert w.arrival_s.tolist() == (trace.arrival_s[:100] * 2.0).tolist()  # 2 = twice as slow
    assert w.arrival_s[1] == pytest.approx(2 * 4.314579)
    assert w.prompt_tokens.tolist() == trace.prompt_tokens[:100].tolist()


def test_whole_trace_by_default_and_too_many_prompts_is_an_error():
    assert len(build_workload(WorkloadArgs(dataset="mooncake-synthetic"))) == 3_993
    with pytest.raises(InputError, match="at most 3993"):
        build_workload(WorkloadArgs(dataset="mooncake-synthetic", num_prompts=4000))


def test_mooncake_hashes_travel_with_the_workload():
    w = build_workload(
        WorkloadArgs(dataset="mooncake-conversation", num_prompts=2, max_concurrency=8)
    )
    assert w.hash_block_tokens == 512 and w.closed_loop_concurrency == 8
    assert w.request(0).prefix_hashes == tuple(range(14))


def test_length_only_trace_gets_drawn_arrivals():
    w = build_workload(WorkloadArgs(dataset="sharegpt", num_prompts=1000, request_rate=4.0))
    assert w.prompt_tokens[:2].tolist() == [13, 25]
    assert w.arrival_s[-1] == pytest.approx(250.0)  # 1000 requests / 4 per s
    assert build_workload(WorkloadArgs(dataset="bwb", num_prompts=5)).is_offline


def test_request_rate_redraws_a_timed_traces_arrivals():
    w = build_workload(
        WorkloadArgs(
            dataset="azure-code", num_prompts=500, request_rate=50.0, burstiness=float("inf")
        )
    )
    assert w.arrival_s[:2].tolist() == [0.02, 0.04]
    assert w.prompt_tokens[0] == 4808


def test_user_trace_through_args(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("t,p,g\n10,100,5\n12,200,6\n")
    args = WorkloadArgs(trace=path, trace_columns="arrival=t,input=p,output=g", time_scale=0.5)
    w = build_workload(args)
    assert w.name == "mine" and w.arrival_s.tolist() == [0.0, 1.0]


def test_every_dataset_name_builds():
    for name in DATASETS:
        w = build_workload(WorkloadArgs(dataset=name, num_prompts=3, request_rate=1.0))
        assert len(w) == 3


# --- properties ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    input_len=st.integers(1, 5000),
    output_len=st.integers(1, 2000),
    ratio=st.floats(0.0, 0.99),
    prefix=st.integers(0, 300),
    rate=st.one_of(st.just(math.inf), st.floats(0.01, 1e4)),
    burstiness=st.one_of(st.just(math.inf), st.floats(0.05, 20.0)),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_workload_properties(
    n, input_len, output_len, ratio, prefix, rate, burstiness, seed
):
    try:
        args = WorkloadArgs(
            num_prompts=n,
            random_input_len=input_len,
            random_output_len=output_len,
            random_range_ratio=ratio,
            random_prefix_len=prefix,
            request_rate=rate,
            burstiness=burstiness if math.isfinite(rate) else 1.0,
            seed=seed,
        )
    except KvplanError:
        assert prefix + math.floor(input_len * (1 - ratio)) < 1
        return
    w = build_workload(args)
    in_low, in_high = length_bounds(input_len, ratio)
    out_low, out_high = length_bounds(output_len, ratio, floor_at=1)
    assert len(w) == n == w.arrival_s.shape[0] == w.output_tokens.shape[0]
    assert np.all(np.diff(w.arrival_s) >= 0) and w.arrival_s[0] >= 0
    assert np.all(w.prompt_tokens >= max(1, prefix + in_low))
    assert np.all(w.prompt_tokens <= prefix + in_high)
    assert np.all((w.output_tokens >= out_low) & (w.output_tokens <= out_high))
    again = build_workload(args)
    assert np.array_equal(w.arrival_s, again.arrival_s)
    assert np.array_equal(w.prompt_tokens, again.prompt_tokens)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2000),
    rate=st.floats(1e-3, 1e5),
    burstiness=st.floats(0.01, 100.0),
    seed=st.integers(0, 1000),
)
def test_gamma_arrivals_properties(n, rate, burstiness, seed):
    arrivals = gamma_arrivals(n, rate, burstiness, rng(seed))
    assert arrivals.shape == (n,)
    assert np.all(np.isfinite(arrivals)) and np.all(np.diff(arrivals) >= 0)
    assert arrivals[-1] == pytest.approx(n / rate, rel=1e-9)
