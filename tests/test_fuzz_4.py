"""fuzz-4 regressions: the disaggregated, DP / EP and web paths found by the fourth fuzz
run (each test names the command that crashed or printed a wrong number, and what it did)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fuzz2_support import assert_error, run_case, strict_json

L8B = "meta-llama/Llama-3.1-8B"
SIM = ["simulate", L8B, "--num-prompts", "3", "--json"]
PLAN = ["plan", L8B, "--gpu", "H100", "-tp", "1", "--disagg", "--num-prompts", "10",
        "--slo", "ttft:p99:2000"]


@pytest.fixture(scope="module")
def client() -> Any:
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=30)),
                      raise_server_exceptions=False)


# ------------------------------------------- D1: -pp with --disagg moved half the KV


@pytest.mark.parametrize("extra", [["-pp", "2"], ["-pp", "2", "--decode-tp", "2"]])
def test_pipeline_parallel_fleet_is_refused(extra: list[str], tmp_path: Path) -> None:
    """Was: exit 0 with kv_link_bytes 201,326,592 for three 1,024-token Llama-3.1-8B
    prompts (half of 3 x 1,024 x 128 KiB: the link moved only the first stage's layers),
    pools labelled TP1 / TP2 and a header without a pipeline size, next to '10 GPUs'."""
    result = run_case(tmp_path, [*SIM, "--disagg", "1P2D", *extra])
    assert_error(result, "--pipeline-parallel-size 2", "pipeline stages are not modelled")


def test_tp_fleet_moves_every_layer(tmp_path: Path) -> None:
    """The figure the PP fleet got wrong, on the TP fleet it stays right: 3 x 1,024 tokens x
    128 KiB (32 layers x 8 KV heads x 128 x 2 x 2 B)."""
    result = run_case(tmp_path, [*SIM, "--disagg", "1P1D"])
    assert result.code == 0, result.err
    assert strict_json(result.out)["kv_link_bytes"] == 3 * 1024 * 128 * 1024


def test_web_pipeline_parallel_fleet_is_a_422(client: Any) -> None:
    r = client.get("/api/simulate", params={"model": L8B, "pipeline_parallel_size": "2",
                                            "disagg": "1P1D", "num_prompts": "3"})
    assert r.status_code == 422, r.text
    assert "pipeline stages are not modelled" in r.json()["detail"]


# ------------------------------ D2: plan --disagg without an offered load: AssertionError


@pytest.mark.parametrize("workload", [
    ["--request-rate", "inf"],  # the check took inf for a rate
    ["--dataset", "sharegpt"],  # lengths only: every request at t = 0
    ["--dataset", "mooncake-conversation"],  # its first 10 requests all have timestamp 0
])
def test_plan_disagg_without_arrivals_is_one_line(workload: list[str], tmp_path: Path) -> None:
    """Was: a traceback ending `assert work is not None` in analysis/disagg/side.py, exit 1,
    after the whole aggregated plan had run."""
    result = run_case(tmp_path, [*PLAN, *workload, "--json"])
    assert_error(result, "--disagg compares fleets at one offered load")


def test_web_plan_disagg_at_rate_inf_is_a_422(client: Any) -> None:
    """Was: 500 Internal Server Error."""
    r = client.get("/api/plan", params={"model": L8B, "gpu": "H100",
                                        "tensor_parallel_size": "1", "disagg": "true",
                                        "num_prompts": "10", "request_rate": "inf"})
    assert r.status_code == 422, r.text
    assert "one offered load" in r.json()["detail"]


# ------------------------ D3: an MLA fleet's block sizes differ: the advice did not work


@pytest.mark.parametrize("gpu,fix", [("MI300X", "64")])
def test_mla_block_mismatch_names_a_block_both_pools_keep(gpu: str, fix: str,
                                                          tmp_path: Path) -> None:
    """Was: 'give both --block-size' (one flag sets both pools, and the H100 decode pool
    forces FlashMLA's 64 whatever is given, so --block-size 16 failed again). The block
    named must run."""
    argv = ["simulate", "deepseek-ai/DeepSeek-V2-Lite", "--disagg", "1P1D", "--prefill-gpu",
            gpu, "--num-prompts", "2", "--json"]
    assert_error(run_case(tmp_path, argv), f"give --block-size {fix}, which both pools keep")
    result = run_case(tmp_path, [*argv, "--block-size", fix])
    assert result.code == 0, result.err
    assert strict_json(result.out)["block_size"] == int(fix)


def test_planner_drops_mla_fleets_whose_pools_page_differently() -> None:
    """Was: `kvplan plan deepseek-ai/DeepSeek-V2-Lite --gpu H100,L40S -tp 1 --disagg
    --search exhaustive ...` stopped with that error line (exit 2) when it reached the
    first H100 / L40S fleet: a fleet the planner chose itself, not the user. Now such a
    fleet is `invalid` with the reason, and the same-GPU fleets still run."""
    from kvplan.analysis.disagg.plan import enumerate_disagg
    from kvplan.analysis.disagg.screen import screen_fleets
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.links import load_link
    from kvplan.specs.prices import price_table
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload
    from kvplan.specs.serving import EngineConfig
    from kvplan.specs.slo import PercentileBound, Slo

    fleets = enumerate_disagg(load_model("deepseek-ai/DeepSeek-V2-Lite"),
                              [load_gpu("H100"), load_gpu("L40S")],
                              EngineConfig(max_model_len=2048), load_link("ib-ndr"),
                              tps=(1,), max_instances=1)
    work = build_workload(WorkloadArgs(num_prompts=4, random_input_len=512,
                                       random_output_len=8, request_rate=2, seed=1))
    slo = Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=5000.0),))
    got = screen_fleets(fleets, work, slo, price_table())
    by_pair = {(c.disagg.prefill.gpu.id, c.disagg.decode.gpu.id): c
               for c in (*got.kept, *got.dropped)}
    assert len(by_pair) == 4
    for (p, d), c in by_pair.items():
        if p == d:
            assert c.stage != "invalid", c.reason
        else:
            assert c.stage == "invalid"
            assert "give --block-size 64, which both pools keep" in c.reason


# -------------- D5: plan --disagg on pools vLLM or kvplan cannot run: abort or wrong reason

JOINT = ["-tp", "1", "--disagg", "--num-prompts", "10", "--request-rate", "2", "--slo",
         "ttft:p99:2000", "--json"]


def _joint(tmp_path: Path, argv: list[str]) -> dict[str, Any]:
    result = run_case(tmp_path, ["plan", *argv, *JOINT])
    assert result.code == 0, result.err
    return strict_json(result.out)["joint"]  # type: ignore[no-any-return]


def test_plan_disagg_skips_dp_pools_on_a_gpu_without_kernel_tables(tmp_path: Path) -> None:
    """Was: exit 2 'data / expert parallel steps are priced from measured kernel tables,
    which MI300X lacks' (from the zero-load floors' timer): the whole plan stopped, where the
    aggregated side marks the same layouts invalid and answers."""
    joint = _joint(tmp_path, ["Qwen/Qwen3-30B-A3B", "--gpu", "MI300X,H100", "--price",
                              "MI300X=0.5", "-dp", "1,2"])
    bad = [c for c in joint["candidates"] if c["stage"] == "invalid"]
    assert bad and all("MI300X" in c["reason"] and "kernel tables" in c["reason"]
                       for c in bad)
    assert joint["winner"] is not None


def test_plan_disagg_names_why_a_hybrid_state_model_cannot_run(tmp_path: Path) -> None:
    """Was: every fleet `pruned_memory`, 'the prefill pool (H200-SXM-141GB TP1) cannot hold
    one max_model_len request', and 'no disaggregated fleet fits in memory', while the
    aggregated winner ran on one H200: vLLM refuses a KV connector with state layers."""
    joint = _joint(tmp_path, ["Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H200"])
    fleets = [c for c in joint["candidates"] if c["kind"] == "disaggregated"]
    assert fleets and {c["stage"] for c in fleets} == {"invalid"}
    assert all("mixes attention and state layers" in c["reason"] for c in fleets)
    assert "mixes attention and state layers" in joint["versus"]


# ------------------- D6: a TTFT goodput below one page's transfer: '--max-model-len <= 0'


def test_link_slo_below_one_page_says_no_length_fits(tmp_path: Path) -> None:
    """Was: '...; links that fit: none; or --max-model-len <= 0' (a length vLLM refuses),
    for a TTFT goodput below the link's own 5 us latency plus one page's wire time. Now a
    note (the run goes on, no request counts as good) that says no prompt fits."""
    argv = [*SIM, "--disagg", "1P1D", "--random-input-len", "100", "--goodput", "ttft:0.004"]
    result = run_case(tmp_path, argv)
    assert result.code == 0, result.err
    assert "no prompt fits: one 16-token page and the link's 5 us latency" in result.err
    assert "<= 0" not in result.err


# --------------------------- D7: a fleet's step-rule errors name the pool and its own flag


def test_dbo_on_a_dp1_pool_names_the_pool_and_its_flag(tmp_path: Path) -> None:
    """Was: '--enable-dbo needs --data-parallel-size > 1 ...' for a fleet given
    --prefill-dp 1 --decode-dp 2 (both pools take --enable-dbo; the prefill pool refused)."""
    argv = ["simulate", "Qwen/Qwen3-30B-A3B", "--disagg", "1P1D", "--prefill-dp", "1",
            "--decode-dp", "2", "--enable-expert-parallel", "--all2all-backend",
            "deepep_low_latency", "--enable-dbo", "--num-prompts", "2", "--json"]
    assert_error(run_case(tmp_path, argv), "prefill pool (H100-SXM-80GB, TP1): ",
                 "--enable-dbo needs --prefill-dp > 1")


def test_zero_instances_in_the_xpyd_form_names_it(tmp_path: Path) -> None:
    """Was: '--prefill-instances must be at least 1, got 0' for `--disagg 0P1D`."""
    argv = [*SIM, "--disagg", "0P1D"]
    assert_error(run_case(tmp_path, argv), "--disagg 0P1D: --prefill-instances must be")


# ------------------- D8: plan --disagg ignored --max-gpus / --max-cost-per-hour for fleets

LOADED = ["plan", L8B, "--gpu", "H100", "-tp", "1", "--disagg", "--num-prompts", "40",
          "--request-rate", "30", "--slo", "ttft:p99:300", "--slo", "tpot:p99:15", "--json"]


@pytest.mark.parametrize("limit,fragment", [(["--max-gpus", "1"], "> --max-gpus 1"),
                                            (["--max-cost-per-hour", "5"],
                                             "> --max-cost-per-hour 5")])
def test_fleet_limits_bind_disaggregated_fleets(limit: list[str], fragment: str,
                                                tmp_path: Path) -> None:
    """Was (--max-gpus 1): 'disaggregated wins: d0000 1P1D ...' on 2 GPUs at $7.98/h, while
    the aggregated side kept to the limit and found nothing."""
    result = run_case(tmp_path, [*LOADED, *limit])
    assert result.code in (0, 1), result.err
    joint = strict_json(result.out)["joint"]
    fleets = [c for c in joint["candidates"] if c["kind"] == "disaggregated"]
    assert fleets and all(c["stage"] == "pruned_bound" and fragment in c["reason"]
                          for c in fleets)
    assert joint["winner"] is None or joint["winner"]["kind"] == "aggregated"


def test_no_fleet_in_the_space_is_not_called_a_memory_miss(tmp_path: Path) -> None:
    """Was: 'no disaggregated fleet fits in memory' for Llama-3.1-8B on H100 TP8 over
    nvlink4: no fleet was formed at all (1P1D is 16 GPUs, a node link joins 8)."""
    result = run_case(tmp_path, ["plan", L8B, "--gpu", "H100", "-tp", "8", "--disagg",
                                 "--kv-link", "nvlink4", "--num-prompts", "10",
                                 "--request-rate", "2", "--slo", "ttft:p99:2000", "--json"])
    assert result.code == 0, result.err
    joint = strict_json(result.out)["joint"]
    assert "fits in memory" not in joint["versus"]
    assert "holds no disaggregated fleet" in joint["versus"]


# ------------- D9: a short trace at a huge rate: a fleet of more replicas than requests


def test_plan_fleet_has_no_more_replicas_than_requests(tmp_path: Path) -> None:
    """Was: 'Fleet of 231 verified ... on all 10 requests' at --request-rate 1e4 (the
    optimistic fleet, 1e4 / 43 req/s, was never capped at the requests), and at 1e9 a fleet
    of 2.3e7 replicas whose share loop ran for over 30 minutes (the web page's plan too)."""
    for rate in ("1e4", "1e9"):
        result = run_case(tmp_path, ["plan", L8B, "--gpu", "H100", "-tp", "1",
                                     "--num-prompts", "10", "--request-rate", rate,
                                     "--slo", "ttft:p99:2000", "--slo", "tpot:p99:100",
                                     "--json"])
        assert result.code == 0, result.err
        doc = strict_json(result.out)
        replicas = [c["replicas"] for c in doc["candidates"] if c.get("replicas")]
        assert replicas and max(replicas) <= 10, replicas


# ------------------------------------------- seen: a KV cache smaller than one block


def test_kv_cache_below_one_block_says_so(tmp_path: Path) -> None:
    """Was: 'the largest --max-model-len that fits is 0'. Llama-3.1-8B keeps 128 KiB per token,
    so a 16-token block is 2 MiB and 1 MiB holds none; 1 GiB holds 512 blocks = 8,192 tokens."""
    for size, says in (("1MiB", "only 1.00 MiB is available; not even one block of 16 tokens "
                                "fits"), ("1GiB", "the largest --max-model-len that fits is 8192")):
        r = run_case(tmp_path, ["capacity", L8B, "--gpu", "H100", "--kv-cache-memory", size])
        # does not fit: an answer (exit 1, one error line), not bad input
        assert r.code == 1 and not r.out and r.err.count("\n") == 1, r
        assert r.err.startswith("error: ") and says in r.err and "fits is 0" not in r.err
