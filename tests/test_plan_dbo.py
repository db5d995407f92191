"""Dual batch overlap in the planner: the --enable-dbo what-if of an MoE DP + EP winner
(verified as every lever), the exchange written on the serve line as VLLM_ALL2ALL_BACKEND,
and vLLM's refusals (docs/planner.md, *Data and expert parallelism*)."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from kvplan.analysis.plan.fleet import replica, simulate_fleet
from kvplan.analysis.plan.parallel.levers import dbo_variant
from kvplan.analysis.plan.planner import plan
from kvplan.analysis.plan.traffic import plan_traffic
from kvplan.cli.pasted import parse_vllm_command
from kvplan.errors import InputError
from kvplan.report.plan.plan_json import plan_json
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment, vllm_serve_env
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli
from tests.plan_helpers import FAST, poisson_workload, slo

LITE = "deepseek-ai/DeepSeek-V2-Lite"
H200 = "H200-SXM-141GB"
PRICE = (f"{H200}=4",)
"""$4 per GPU-hour: a DP2 replica costs 2 x 4 = $8/h."""
SLO = slo("ttft:p99:2000", "tpot:p99:100")
DBO_LL = "--enable-dbo with VLLM_ALL2ALL_BACKEND=deepep_low_latency"
REFUSED = ("--enable-dbo needs --data-parallel-size > 1 and --enable-expert-parallel "
           "(vLLM runs DBO for DP + EP only)")


def _work():  # type: ignore[no-untyped-def]
    return poisson_workload(160, 8.0, prompt=512, output=48, seed=3)


def _plan(model: str = LITE, **kw: object):  # type: ignore[no-untyped-def]
    opts = {"gpus": [H200], "tensor_parallel_sizes": (1,), "max_num_batched_tokens": (None,),
            "price_overrides": PRICE, **FAST, **kw}
    return plan(model, _work(), SLO, **opts)


def test_dp_ep_winner_gets_a_verified_dbo_row() -> None:
    """DeepSeek-V2-Lite, a space of DP2 + EP on H200: the winner (priced with vLLM's default
    exchange, written on its serve line) is tried with --enable-dbo over DeepEP's
    low-latency kernels (TPOT binds: mostly decode); the row is verified, 1 replica x 2 GPUs
    x $4 = $8/h, and its p99 TPOT is the one the DBO deployment's fleet of the winner's
    size gives on the whole trace, simulated here again."""
    p = _plan(data_parallel_sizes=(2,), expert_parallel=(True,))
    w = p.winner
    assert w is not None and w.replicas == 1
    assert p.serve_command.startswith(
        f"VLLM_ALL2ALL_BACKEND=allgather_reducescatter vllm serve {LITE} ")
    assert "--enable-dbo" not in p.serve_command
    row = next(lv for lv in p.levers if lv.change == DBO_LL)
    assert row.binding_key == "p99_tpot_ms" and row.verified and row.note == ""
    assert (row.replicas, row.usd_per_hour, row.delta_usd_per_hour) == (1, 8.0, 0.0)
    (label, d), = dbo_variant(w.deployment.with_replicas(1), "p99_tpot_ms")
    assert label == DBO_LL and d.engine.enable_dbo
    assert d.engine == replace(w.deployment.engine, enable_dbo=True,
                               all2all_backend="deepep_low_latency")
    target = plan_traffic(_work(), sample=FAST["sample_requests"]).target
    assert target is not None
    run = simulate_fleet(replica(d), target, 1, SLO)
    assert row.binding_p99_ms == dict(run.verdict.achieved)["p99_tpot_ms"]
    assert row.delta_binding_p99_ms == pytest.approx(
        row.binding_p99_ms - dict(w.fleet.achieved)["p99_tpot_ms"], abs=1e-12)  # type: ignore[union-attr]
    doc = plan_json(p)
    assert [x["change"] for x in doc["levers"]].count(DBO_LL) == 1


def test_dense_plan_has_no_dbo_row_and_no_exchange_on_its_serve_line() -> None:
    """Llama-3.1-8B: no experts, no DP group: no --enable-dbo row, the serve line is the
    plain `vllm serve ...` it always was."""
    p = _plan("meta-llama/Llama-3.1-8B")
    assert p.winner is not None
    assert not any("dbo" in lv.change for lv in p.levers)
    assert p.serve_command.startswith("vllm serve meta-llama/Llama-3.1-8B ")
    assert "VLLM_ALL2ALL_BACKEND" not in p.serve_command


def test_dp_winner_without_ep_gets_vllms_refusal_as_the_dbo_note() -> None:
    """A DP2 winner with TP-sharded experts: vLLM runs DBO for DP + EP only, so the row is
    a note with that reason (the EP-flip row is the layout DBO needs), no figures."""
    p = _plan(data_parallel_sizes=(2,), expert_parallel=(False,))
    assert p.winner is not None and not p.winner.deployment.engine.enable_expert_parallel
    row = next(lv for lv in p.levers if lv.change == DBO_LL)
    assert row.note == REFUSED and not row.verified
    assert (row.replicas, row.usd_per_hour, row.binding_p99_ms) == (None, None, None)
    assert "--enable-expert-parallel" in [lv.change for lv in p.levers]


def _dp2(model: str = LITE, gpu: str = "H200", **kw: object) -> Deployment:
    fields: dict[str, object] = {"data_parallel_size": 2, "enable_expert_parallel": True,
                                 "max_model_len": 4096, **kw}
    engine = EngineConfig(**fields)  # type: ignore[arg-type]
    return Deployment(model=load_model(model), gpu=load_gpu(gpu), engine=engine)


@pytest.mark.parametrize(("key", "gpu", "backend"), [
    ("p99_tpot_ms", "H200", "deepep_low_latency"),   # decode binds
    (None, "H200", "deepep_low_latency"),            # goodput: no percentile term
    ("p90_ttft_ms", "H200", "deepep_high_throughput"),  # prefill binds
    ("p99_ttft_ms", "L40S", "deepep_low_latency"),   # SM count unknown: LL needs none
])
def test_dbo_exchange_follows_vllms_advice(key: str | None, gpu: str, backend: str) -> None:
    """vLLM docs/design/dbo.md: deepep_low_latency for mostly decode, deepep_high_throughput
    for mostly prefill (whose SM share kvplan prices only where it knows the SM count)."""
    (label, d), = dbo_variant(_dp2(gpu=gpu), key)
    assert label == f"--enable-dbo with VLLM_ALL2ALL_BACKEND={backend}"
    assert d.engine.all2all_backend == backend and d.engine.enable_dbo


def test_dbo_variant_only_for_an_moe_dp_group() -> None:
    """None for one engine (TP winner), a dense model, or a winner already overlapping; a
    winner already on DeepEP keeps its exchange and changes only --enable-dbo."""
    one = _dp2()
    assert dbo_variant(replace(one, engine=replace(one.engine, data_parallel_size=1)), None) == []
    dense = _dp2("meta-llama/Llama-3.1-8B", enable_expert_parallel=False)
    assert dbo_variant(dense, None) == []
    on = _dp2(all2all_backend="deepep_high_throughput", enable_dbo=True)
    assert dbo_variant(on, None) == []
    (label, d), = dbo_variant(_dp2(all2all_backend="deepep_high_throughput"), "p99_tpot_ms")
    assert label == "--enable-dbo" and d.engine.all2all_backend == "deepep_high_throughput"


def test_serve_env_names_the_exchange_of_a_dp_group_only() -> None:
    """VLLM_ALL2ALL_BACKEND for an MoE DP group (kvplan's `deepep` as vLLM's name), nothing
    for one engine or a dense model."""
    assert vllm_serve_env(_dp2()) == ["VLLM_ALL2ALL_BACKEND=allgather_reducescatter"]
    assert vllm_serve_env(_dp2(all2all_backend="deepep")) == [
        "VLLM_ALL2ALL_BACKEND=deepep_low_latency"]
    one = _dp2()
    assert vllm_serve_env(replace(one, engine=replace(one.engine, data_parallel_size=1))) == []
    dense = _dp2("meta-llama/Llama-3.1-8B", enable_expert_parallel=False)
    assert vllm_serve_env(dense) == []


def test_pasted_environment_is_read_and_a_bad_backend_refused() -> None:
    """The plan's serve line reads back: `NAME=value` prefixes are the environment,
    VLLM_ALL2ALL_BACKEND sets the exchange, others are ignored by name; an exchange kvplan
    does not price is refused in one line, as `capacity -- ...` says (exit 2)."""
    found, ignored = parse_vllm_command(
        ["VLLM_ALL2ALL_BACKEND=deepep_low_latency", "CUDA_VISIBLE_DEVICES=0,1", "vllm",
         "serve", LITE, "--data-parallel-size", "2", "--enable-expert-parallel"])
    assert found == {"all2all_backend": "deepep_low_latency", "model": LITE,
                     "data_parallel_size": 2, "enable_expert_parallel": True}
    assert ignored == ["CUDA_VISIBLE_DEVICES"]
    with pytest.raises(InputError, match="VLLM_ALL2ALL_BACKEND='pplx'"):
        parse_vllm_command(["VLLM_ALL2ALL_BACKEND=pplx", "vllm", "serve", LITE])
    r = run_cli("capacity", "--gpu", "H200", "--", "VLLM_ALL2ALL_BACKEND=pplx", "vllm",
                "serve", LITE, "-dp", "2", "--enable-expert-parallel")
    assert_one_line_error(r)
    assert "kvplan prices the token exchanges" in r.err


def test_cli_plan_json_serve_line_reads_back_through_capacity() -> None:
    """`kvplan plan ... -dp 2 --enable-expert-parallel on --json`: summary.vllm_serve starts
    with the exchange, the DBO row is in `levers`, and the serve line pasted after
    `capacity --` gives the candidate's own KV pool per rank."""
    r = run_cli("plan", LITE, "--gpu", H200, "-tp", "1", "--price", PRICE[0],
                "--num-prompts", "120", "--random-input-len", "512", "--random-output-len",
                "48", "--request-rate", "6", "--sample-requests", "80", "--workers", "1",
                "--max-num-batched-tokens", "default", "--slo", "ttft:p99:2000",
                "tpot:p99:100", "-dp", "2", "--enable-expert-parallel", "on", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    serve = doc["summary"]["vllm_serve"]
    assert serve.startswith("VLLM_ALL2ALL_BACKEND=allgather_reducescatter vllm serve ")
    row = next(x for x in doc["levers"] if x["change"] == DBO_LL)
    assert row["verified"] and row["usd_per_hour"] == 8.0 * row["replicas"]
    back = run_cli("capacity", "--gpu", H200, "--json", "--", *shlex.split(serve))
    assert back.code == 0, back.err
    assert back.json()["kv_cache_tokens"] == doc["candidates"][0]["kv_cache_tokens"]
