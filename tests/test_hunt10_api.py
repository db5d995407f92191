"""hunt10-api: the Python API and notebook displays (kvplan/__init__.py's names, their results)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import ArgumentTypeError

A_STR_FOR_A_LIST = {
    "parse_slo": (lambda: kvplan.parse_slo("ttft:p99:2000"), "parse_slo(): argument 'items'"),
    "parse_goodput_slo": (lambda: kvplan.parse_goodput_slo("ttft:2000"),
                          "parse_goodput_slo(): argument 'items'"),
    "price_table": (lambda: kvplan.price_table(overrides="H100=2.5"),
                    "price_table(): argument 'overrides'"),
}


@pytest.mark.parametrize("case", sorted(A_STR_FOR_A_LIST))
def test_a_bare_string_for_a_list_of_strings_is_a_type_error(case: str) -> None:
    """A str is a Sequence[str] of its characters: parse_slo("ttft:p99:2000") was refused as
    "--slo 't': use METRIC:pPCT:MS" (a valid bound blamed), price_table(overrides="H100=2.5")
    as "--price 'H'". Now one ArgumentTypeError naming the argument and the list it takes."""
    call, fragment = A_STR_FOR_A_LIST[case]
    with pytest.raises(ArgumentTypeError) as caught:
        call()
    assert fragment in str(caught.value) and "got str" in str(caught.value), str(caught.value)


def test_a_list_of_strings_still_parses() -> None:
    (bound,) = kvplan.parse_slo(["ttft:p99:2000"])
    assert (bound.metric, bound.percentile, bound.limit_ms) == ("ttft", 99.0, 2000.0)
    assert kvplan.parse_goodput_slo(("ttft:2000",)) == (("ttft", 2000.0),)


def _plain(html: str) -> str:
    """The text of rich's exported HTML (tags dropped, entities read)."""
    import html as h
    import re

    return h.unescape(re.sub(r"<[^>]+>", "", html))


def _words_after_table(text: str) -> str:
    """What follows the metrics table's bottom border, whitespace collapsed (the CLI wraps at
    the pipe's width, the notebook at its own)."""
    return " ".join(text.rpartition("┘")[2].split())


SERVING = {
    # 200 prompts of 2,000-6,000 tokens (+128) against max_model_len 4,096: 113 rejected; the
    # rest arrive at ~9.6 req/s on one L4, which finishes none in the second half: overloaded
    "rejected-overloaded": ("meta-llama/Llama-3.1-8B", "L4", {"max_model_len": 4096},
                            {"num_prompts": 200, "random_input_len": 4000,
                             "random_range_ratio": 0.5, "random_output_len": 128,
                             "request_rate": 20.0},
                            ["113 requests rejected", "overloaded: accepted requests",
                             "band (10-90%", "note: L4 is not in the calibration set"]),
    # a MoE model on 2 DP ranks in lockstep (the balancer: 32 and 28 requests since the fleet
    # passes the API server's serial admission, 31 and 29 before)
    "dp-2": ("Qwen/Qwen3-30B-A3B", "H100", {"data_parallel_size": 2},
             {"num_prompts": 60, "random_input_len": 512, "random_output_len": 32,
              "request_rate": 20.0},
             ["DP 2 ranks in lockstep", "rank 0: 32 requests", "rank 1: 28 requests",
              "band (10-90%"]),
}


@pytest.mark.parametrize("case", sorted(SERVING))
def test_a_serving_run_shows_what_simulate_prints_under_its_table(case: str) -> None:
    """The notebook showed the metrics table alone: an overloaded run (latencies that grow
    with the trace, no steady state), rejected requests and a DP fleet's ranks looked like a
    clean run. Now the lines under the table are the CLI's, word for word."""
    from kvplan.report.views import notebook
    from tests.conftest import run_cli

    model, gpu, engine, work, expected = SERVING[case]
    run = kvplan.simulate_serving(model, gpu, kvplan.EngineConfig(**engine),
                                  kvplan.WorkloadArgs(**work))
    shown = _words_after_table(_plain(notebook.html(run)))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**engine, **work}.items()]
    cli = run_cli("simulate", model, "--gpu", gpu, *flags)
    assert cli.code == 0, cli.err
    assert shown == _words_after_table(cli.out)
    for fragment in expected:
        assert fragment in shown, (fragment, shown)


CAPACITY = {
    # 2 DP ranks of one H100: 417,472 tokens each, 834,944 for the fleet (2 x 417,472)
    "dp-2": ("meta-llama/Llama-3.1-8B", {"data_parallel_size": 2},
             ["2 DP ranks x 1 GPUs", "fleet (2 ranks): 834,944 tokens"]),
    # EP over 2 DP ranks: 128 experts, 64 per GPU
    "dp-2-ep": ("Qwen/Qwen3-30B-A3B", {"data_parallel_size": 2, "enable_expert_parallel": True},
                ["routed experts: EP 2: 64 of 128 experts per GPU", "fleet (2 ranks)"]),
}


@pytest.mark.parametrize("case", sorted(CAPACITY))
def test_a_dp_memory_plan_shows_the_per_rank_and_fleet_lines(case: str) -> None:
    """`kvplan capacity --data-parallel-size 2` prints the layout, per-rank and fleet lines
    under vLLM's; the notebook's MemoryPlan stopped at vLLM's lines."""
    from kvplan.report.views import notebook
    from tests.conftest import run_cli

    model, engine, expected = CAPACITY[case]
    plan = kvplan.plan_memory(kvplan.load_model(model), kvplan.load_gpu("H100"),
                              kvplan.EngineConfig(**engine))
    shown = " ".join(_plain(notebook.html(plan)).split())
    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f"={v}")
             for k, v in engine.items()]
    cli = run_cli("capacity", model, "--gpu", "H100", *flags)
    assert cli.code == 0, cli.err
    tail = cli.out.rpartition("Maximum concurrency")[2].partition("\n")[2]
    assert tail.strip() and " ".join(tail.split()) in shown
    for fragment in expected:
        assert fragment in shown, (fragment, shown)


def _shape(batch: int) -> kvplan.RequestShape:
    return kvplan.RequestShape(batch=batch, prompt_tokens=2048, output_tokens=128)


def test_request_latency_spreads_the_batch_over_dp_ranks_as_the_cli_does() -> None:
    """`kvplan latency --data-parallel-size 2 --batch 8` prices 4 requests per rank (ceil(8 /
    2)); kvplan.request_latency priced all 8 on one rank: Llama-3.1-8B on H100, TTFT 328.9 ms
    where the CLI says 165.8 ms. A dense model's DP ranks are independent engines, so DP 2 at
    batch 8 is DP 1 at batch 4 with twice the output throughput."""
    model, gpu = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")
    dp2 = kvplan.request_latency(model, gpu, kvplan.EngineConfig(data_parallel_size=2),
                                 _shape(8))
    one = kvplan.request_latency(model, gpu, kvplan.EngineConfig(), _shape(4))
    assert (dp2.ttft_s, dp2.tpot_s, dp2.e2e_s) == (one.ttft_s, one.tpot_s, one.e2e_s)
    assert dp2.shape.batch == 8
    assert dp2.output_throughput_tok_s == pytest.approx(8 * 128 / dp2.e2e_s)  # the fleet's
    assert dp2.output_throughput_tok_s == pytest.approx(2 * one.output_throughput_tok_s)


def test_request_latency_of_an_ep_fleet_is_the_clis() -> None:
    from tests.conftest import run_cli

    engine = kvplan.EngineConfig(data_parallel_size=2, enable_expert_parallel=True)
    r = kvplan.request_latency(kvplan.load_model("Qwen/Qwen3-30B-A3B"), kvplan.load_gpu("H100"),
                               engine, _shape(4))
    cli = run_cli("latency", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--batch", "4", "--prompt",
                  "2048", "--output", "128", "--data-parallel-size", "2",
                  "--enable-expert-parallel", "--json").json()
    assert cli["parallel"]["batch_per_rank"] == 2
    assert (r.ttft_s, r.tpot_s, r.e2e_s) == pytest.approx(
        (cli["ttft_s"], cli["tpot_s"], cli["e2e_s"]), rel=1e-12)


def test_the_api_functions_pickle_for_a_process_pool() -> None:
    """The type-checking wrapper kept the wrapped function's module and name, so pickle found
    the unwrapped function there ("not the same object as kvplan.specs.kv.kv_spec") and
    ProcessPoolExecutor().submit(kvplan.kv_spec, ...) failed; now it pickles as kvplan.NAME."""
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    for name in ("kv_spec", "plan_memory", "simulate_serving", "plan"):
        fn = getattr(kvplan, name)
        assert pickle.loads(pickle.dumps(fn)) is fn, name
    model = kvplan.load_model("meta-llama/Llama-3.1-8B")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        kv = pool.submit(kvplan.kv_spec, model, "fp8").result(timeout=120)
    assert kv.bytes_per_token == 65536  # 32 layers x (K + V) x 8 heads x 128 x 1 B (fp8)


def test_a_gpus_rates_are_read_only() -> None:
    """HardwareSpec is frozen, but its peak_flops / achievable dicts were not, and load_gpu
    hands every caller the same cached spec: gpu.peak_flops["bfloat16"] = 1e13 on A10G (a
    notebook what-if) made every later load_gpu("A10G") answer 12.5x slower (Llama-3.1-8B,
    batch 8 x 2,048: TTFT 2.18 s -> 27.2 s). Now the edit is a TypeError naming
    dataclasses.replace, which still makes a changed copy; pickling keeps working."""
    import dataclasses
    import pickle

    gpu = kvplan.load_gpu("A10G")
    try:
        with pytest.raises(TypeError, match="read-only"):
            gpu.peak_flops["bfloat16"] = 1e13
        with pytest.raises(TypeError, match="read-only"):
            gpu.achievable.update({"mem_bw": 1.0})
    finally:  # without the fix the catalog's spec was changed: put it back for other tests
        dict.__setitem__(gpu.peak_flops, "bfloat16", 125e12)
    assert kvplan.load_gpu("A10G").peak_flops["bfloat16"] == 125e12  # datasheet 125 TFLOP/s
    slower = dataclasses.replace(gpu, peak_flops={**gpu.peak_flops, "bfloat16": 1e13})
    assert slower.peak_flops["bfloat16"] == 1e13 and gpu.peak_flops["bfloat16"] == 125e12
    assert pickle.loads(pickle.dumps(gpu)) == gpu


def test_a_request_timeline_shows_the_request_commands_totals() -> None:
    """The notebook showed the claim table alone; `kvplan request` prints the totals under it,
    among them where vLLM's request ends. Llama-2-70B fp8, 2,048 + 128 tokens in chunks of
    512: 163,840 B/token x 2,048 = 335,544,320 B of prefill; vLLM ends at 2,048 + 127 = 2,175
    tokens = 356,352,000 B."""
    from kvplan.report.views import notebook
    from tests.conftest import run_cli

    kv = kvplan.kv_spec(kvplan.load_model("meta-llama/Llama-2-70b-hf"), "fp8")
    tl = kvplan.request_timeline(kv, 2048, 128, chunk_tokens=512)
    shown = " ".join(_plain(notebook.html(tl).rpartition("</svg>")[2]).split())
    cli = run_cli("request", "meta-llama/Llama-2-70b-hf", "--prompt", "2048", "--output", "128",
                  "--chunk", "512", "--kv-cache-dtype", "fp8")
    assert cli.code == 0, cli.err
    totals = " ".join(cli.out.partition("bytes/token (fp8_e4m3)")[2].split())
    assert totals.startswith("prefill claims 320.00 MiB (335,544,320 bytes) in 4 chunked")
    assert "it ends at 2,175 tokens, 339.84 MiB (356,352,000 bytes)" in totals
    assert shown.endswith(totals)


DEPLOYMENT_FIELDS = {
    "model-name": ({"model": "meta-llama/Llama-3.1-8B"}, "field 'model' must be ModelSpec"),
    "replicas-float": ({"replicas": 2.5}, "field 'replicas' must be int, got float 2.5"),
    "replicas-str": ({"replicas": "2"}, "field 'replicas' must be int, got str '2'"),
    "engine-none": ({"engine": None}, "field 'engine' must be EngineConfig, got NoneType"),
}


@pytest.mark.parametrize("case", sorted(DEPLOYMENT_FIELDS))
def test_a_deployment_checks_its_field_types(case: str) -> None:
    """kvplan.Deployment (exported, as EngineConfig and Slo are) checked no types: replicas=2.5
    made a fleet of 2.5 GPUs, a model name passed and failed later as an AttributeError,
    replicas="2" was "'<' not supported between 'str' and 'int'"."""
    given, fragment = DEPLOYMENT_FIELDS[case]
    fields = {"model": kvplan.load_model("meta-llama/Llama-3.2-1B"),
              "gpu": kvplan.load_gpu("H100"), "engine": kvplan.EngineConfig(), **given}
    with pytest.raises(ArgumentTypeError) as caught:
        kvplan.Deployment(**fields)
    assert f"Deployment: {fragment}" in str(caught.value), str(caught.value)


def test_numpy_integers_are_whole_numbers() -> None:
    """A notebook's batch sizes come from numpy (``for b in np.arange(1, 65)``): the argument
    checks let np.int64 through as an int, then EngineConfig, kv_spec and RequestShape said
    "--tensor-parallel-size must be a whole number in [1, 4,096], got np.int64(2)". Now each
    takes it and keeps a Python int."""
    import numpy as np

    model = kvplan.load_model("meta-llama/Llama-3.2-1B")
    engine = kvplan.EngineConfig(tensor_parallel_size=np.int64(2), max_model_len=np.int64(4096))
    assert (engine.tensor_parallel_size, engine.max_model_len) == (2, 4096)
    assert type(engine.tensor_parallel_size) is int and type(engine.max_model_len) is int
    kv = kvplan.kv_spec(model, tensor_parallel_size=np.int64(2))
    assert kv.bytes_per_token == 16384  # 16 layers x (K + V) x 4 heads per GPU x 64 x 2 B
    shape = kvplan.RequestShape(batch=np.int64(8), prompt_tokens=np.int32(512),
                                output_tokens=np.int64(16))
    assert shape == kvplan.RequestShape(batch=8, prompt_tokens=512, output_tokens=16)
    assert type(shape.batch) is int
    with pytest.raises(kvplan.InputError, match=r"positive whole number, got 8\.5"):
        kvplan.RequestShape(batch=np.float64(8.5), prompt_tokens=512, output_tokens=16)


def test_docs_name_every_plan_option() -> None:
    """docs/planner.md lists kvplan.plan's options as PlanOptions' fields; it left out
    data_parallel_sizes, expert_parallel and async_scheduling."""
    import dataclasses
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "planner.md").read_text(encoding="utf-8")
    listed = " ".join(text.partition("The options of `kvplan.plan` are")[2]
                      .partition("Each verified candidate")[0].split())
    missing = [f.name for f in dataclasses.fields(kvplan.PlanOptions)
               if f"`{f.name}`" not in listed]
    assert missing == []
