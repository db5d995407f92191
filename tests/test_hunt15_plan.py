"""Fifteenth hunt round, the planner (helper plan): each defect pinned by a hand-checkable
golden value."""

from __future__ import annotations

from tests.conftest import run_cli

# -------------------- D1: prefix caching on a model with state layers
# vLLM 0.11.0 turns prefix caching off for every hybrid / Mamba model whatever the flag says
# (MambaModelConfig logs "Hybrid or mamba-based model detected: disabling prefix caching
# since it is not yet supported."), and kvplan's simulator never hits the cache of a model
# with state groups. The plan still printed `--enable-prefix-caching` in the winner's serve
# line, searched `--enable-prefix-caching on,off` as two configurations, and offered a
# `--no-enable-prefix-caching` lever that changed nothing (+0). Nemotron-H (Mamba2 + GQA) on
# H100, TP 1,2,4 x chunk 512 x prefix on,off: 6 distinct configurations, the 3 "off" ones
# duplicates of the "on" ones (what vLLM runs is the same), the serve line says
# --no-enable-prefix-caching and no lever row flips prefix caching.
NEMOTRON = ("plan", "nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H100", "-tp", "1,2,4",
            "--max-num-batched-tokens", "512", "--enable-prefix-caching", "on,off",
            "--num-prompts", "120", "--random-input-len", "512", "--random-output-len", "32",
            "--request-rate", "2", "--sample-requests", "120", "--slo", "ttft:p99:3000",
            "--json")


def test_a_state_model_is_planned_without_prefix_caching() -> None:
    res = run_cli(*NEMOTRON)
    assert res.code == 0, res.err
    doc = res.json()
    serve = doc["summary"]["vllm_serve"].split()
    assert "--no-enable-prefix-caching" in serve and "--enable-prefix-caching" not in serve
    stages = [c["stage"] for c in doc["candidates"]]
    assert stages.count("duplicate") == 3  # 6 combinations, 3 that vLLM runs
    assert all(c["enable_prefix_caching"] is False for c in doc["candidates"]
               if c["stage"] != "duplicate")
    assert not [x["change"] for x in doc["levers"] if "prefix-caching" in x["change"]]


def test_a_dense_model_keeps_its_prefix_caching_lever() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "1",
                  "--max-num-batched-tokens", "512", "--num-prompts", "120",
                  "--random-input-len", "512", "--random-output-len", "32", "--request-rate",
                  "2", "--sample-requests", "120", "--slo", "ttft:p99:3000", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    assert "--enable-prefix-caching" in doc["summary"]["vllm_serve"].split()
    assert [x["change"] for x in doc["levers"] if "prefix-caching" in x["change"]] == [
        "--no-enable-prefix-caching"]
