"""fuzz-3 R8 and A1 (issue 19 item 4): values a person could not mean are refused with the
allowed range named, and the Python API checks its arguments' types: one TypeError (also a
KvplanError) naming the argument, not an AttributeError from deep inside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.errors import ArgumentTypeError, KvplanError
from tests.fuzz2_support import CFG1B, L1B, assert_error, run_case

PLAN = ["plan", "Qwen/Qwen2.5-7B", "--gpu", "H100", "--num-prompts", "20",
        "--sample-requests", "20", "--json"]
HEADER = ("gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
          "source_url,observed_on,transcribed_by\n")

# ------------------------------------------------- R8: absurd values, refused by range

ABSURD = {
    "slo-1e308": ([*PLAN, "--slo", "ttft:p99:1e308", "--price", "H100=2"],
                  ("--slo 'ttft:p99:1e308'", "[0.001, 86,400,000] ms")),
    "slo-tiny": ([*PLAN, "--slo", "ttft:p99:1e-9"], ("[0.001, 86,400,000] ms",)),
    "slo-inf": ([*PLAN, "--slo", "ttft:p99:inf"], ("must be finite",)),
    "plan-goodput": ([*PLAN, "--goodput", "ttft:1e300"], ("[0.001, 86,400,000] ms",)),
    "sim-goodput": (["simulate", L1B, "--num-prompts", "2", "--goodput", "ttft:1e300"],
                    ("--goodput 'ttft:1e300'", "[0, 86,400,000] ms")),
    "sim-goodput-nan": (["simulate", L1B, "--num-prompts", "2", "--goodput", "ttft:nan"],
                        ("--goodput 'ttft:nan'",)),
    "price-1e300": (["prices", "--price", "H100=1e300", "--provider", "lambda", "--json"],
                    ("--price 'H100=1e300'", "[0.0001, 10,000] USD per GPU-hour")),
    "price-tiny": (["prices", "--price", "H100=1e-9", "--json"], ("[0.0001, 10,000]",)),
    "max-cost": ([*PLAN, "--slo", "ttft:p99:5000", "--max-cost-per-hour", "1e300"],
                 ("--max-cost-per-hour must be a number in [0.0001, 1e+09]",)),
}


@pytest.mark.parametrize("case", sorted(ABSURD))
def test_absurd_flag_values_are_refused_with_the_range(case: str, tmp_path: Path) -> None:
    """Was: exit 0 with "limit_ms": 1e+308 (an SLO that can never bind) or
    "usd_per_gpu_hour": 1e+300 (only positive-and-finite was checked)."""
    argv, fragments = ABSURD[case]
    assert_error(run_case(tmp_path, argv), *fragments)


@pytest.mark.parametrize("usd,gpus", [("1e300", "1"), ("1e-9", "1"), ("2.5", "100000")])
def test_absurd_prices_in_a_price_file_are_refused(usd: str, gpus: str, tmp_path: Path) -> None:
    row = f"H100-SXM-80GB,me,box,{gpus},{gpus},{usd},https://x,2026-01-01,me\n"
    result = run_case(tmp_path, ["prices", "--prices", "p.csv", "--json"],
                      {"p.csv": HEADER + row})
    assert_error(result, "--prices p.csv line 2")


def _config(**fields: Any) -> str:
    return json.dumps({**json.loads(CFG1B), **fields})


CONFIGS = {
    "rope-factor-1e30": ({"rope_scaling": {"rope_type": "yarn", "factor": 1e30}},
                         ("rope_scaling.factor", "[0.01, 1024]")),
    "rope-factor-0": ({"rope_scaling": {"rope_type": "linear", "factor": 0}},
                      ("rope_scaling.factor",)),
    "rope-parameters": ({"rope_parameters": {"rope_type": "yarn", "factor": "x"}},
                        ("rope_parameters.factor",)),
    "rope-beta-nan": ({"rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": "NaN"}},
                      ("rope_scaling.beta_fast",)),
    "rope-original-len": ({"rope_scaling": {"rope_type": "yarn", "factor": 4,
                                            "original_max_position_embeddings": 1e30}},
                          ("rope_scaling.original_max_position_embeddings",)),
    "tie-string": ({"tie_word_embeddings": "false"}, ("tie_word_embeddings", "true or false")),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_absurd_config_values_are_refused_by_name(case: str, tmp_path: Path) -> None:
    """Was: a rope_scaling factor of 1e30 accepted by kv, capacity, simulate...; and the
    string "false" read as true."""
    fields, fragments = CONFIGS[case]
    text = _config(**fields).replace('"NaN"', "NaN")
    result = run_case(tmp_path, ["kv", "config.json", "--json"], {"config.json": text})
    assert_error(result, "config.json", *fragments)


def test_real_rope_scaling_blocks_still_load() -> None:
    """The catalog's own (Llama 3 llama3 8.0, DeepSeek yarn 40, Qwen yarn 4...) all pass."""
    from kvplan.specs.catalog import catalog, load_model

    with_rope = [e for e in catalog().values()
                 if "rope_scaling" in e.path.read_text() and '"factor"' in e.path.read_text()]
    assert len(with_rope) >= 3
    for entry in with_rope:
        assert load_model(entry.hf_id).num_layers > 0


# ------------------------------------------------- A1: wrong types at the API's door


def _model() -> Any:
    return kvplan.load_model(L1B)


WRONG = {
    "kv_spec-nan": (lambda: kvplan.kv_spec(float("nan")), "kv_spec(): argument 'model'"),
    "plan_memory-None": (lambda: kvplan.plan_memory(_model(), None, kvplan.EngineConfig()),
                         "plan_memory(): argument 'hw'"),
    "parse_slo-5": (lambda: kvplan.parse_slo(5), "parse_slo(): argument 'items'"),
    "parse_goodput_slo-5": (lambda: kvplan.parse_goodput_slo(5),
                            "parse_goodput_slo(): argument 'items'"),
    "parse_slo-bytes": (lambda: kvplan.parse_slo(b"x"), "argument 'items'"),
    "plan-workload-0": (lambda: kvplan.plan(_model(), 0, None), "plan(): argument 'workload'"),
    "plan-slo-True": (lambda: kvplan.plan(_model(), kvplan.WorkloadArgs(num_prompts=3), True),
                      "plan(): argument 'slo'"),
    "plan-gpus-int": (lambda: kvplan.plan(_model(), kvplan.WorkloadArgs(num_prompts=3),
                                          kvplan.Slo(bounds=kvplan.parse_slo(["ttft:p99:50"])),
                                          gpus=5), "PlanOptions: field 'gpus'"),
    "price_table-today": (lambda: kvplan.price_table("lambda", today="x"),
                          "price_table(): argument 'today'"),
    "request_timeline-kv": (lambda: kvplan.request_timeline(None, 100, 10),
                            "request_timeline(): argument 'kv'"),
    "engine-kv-dtype-None": (lambda: kvplan.EngineConfig(kv_cache_dtype=None),
                             "EngineConfig: field 'kv_cache_dtype' must be str"),
    "engine-prefix-str": (lambda: kvplan.EngineConfig(enable_prefix_caching="no"),
                          "field 'enable_prefix_caching' must be bool"),
    "slo-bounds-str": (lambda: kvplan.Slo(bounds="ttft:p99:5"), "Slo: field 'bounds'"),
    "build_workload-None": (lambda: kvplan.build_workload(None),
                            "build_workload(): argument 'args'"),
    "simulate-gpu-int": (lambda: kvplan.simulate_serving(L1B, 5),
                         "simulate_serving(): argument 'gpu'"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_wrong_type_is_one_type_error_naming_the_argument(case: str) -> None:
    """Was AttributeError from library code (``'float' object has no attribute 'dtype'``,
    ``'bool' object has no attribute 'warmup'``...)."""
    call, fragment = WRONG[case]
    with pytest.raises(TypeError) as caught:
        call()
    assert isinstance(caught.value, ArgumentTypeError)
    assert fragment in str(caught.value), str(caught.value)


def test_the_type_error_is_also_a_kvplan_error() -> None:
    """The CLI prints any KvplanError as one line; Python callers may catch TypeError."""
    with pytest.raises(KvplanError, match=r"got float nan"):
        kvplan.kv_spec(float("nan"))


def test_percentile_bounds_built_directly_are_range_checked() -> None:
    from kvplan.specs.slo import PercentileBound

    with pytest.raises(KvplanError, match=r"\[0.001, 86,400,000\] ms"):
        PercentileBound(metric="ttft", percentile=99.0, limit_ms=1e308)
    with pytest.raises(KvplanError, match="metric"):
        PercentileBound(metric="nope", percentile=99.0, limit_ms=100.0)


def test_right_types_still_pass_through() -> None:
    """An int where a float is annotated passes; the wrapped function keeps its name."""
    kv = kvplan.kv_spec(_model(), tensor_parallel_size=1)
    assert kv.bytes_per_token == 32768  # Llama-3.2-1B: 16 layers x 2 x 8 heads x 64 x 2 B
    assert kvplan.EngineConfig(gpu_memory_utilization=1).gpu_memory_utilization == 1
    assert kvplan.kv_spec.__name__ == "kv_spec"
