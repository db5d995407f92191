"""The public calibration set: enough points and sources, each cited and complete, and the
points kvplan prices through the simulator agree with their stored numbers."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from typing import Any

from kvplan.analysis.calibration.public_set import FIT_KEYS, MODES, raw_points

SOURCES_MD = (resources.files("kvplan") / "data" / "measurements" / "SOURCES.md").read_text(
    "utf-8")


def test_at_least_60_points_from_at_least_6_sources_dense_and_moe() -> None:
    pts = raw_points()
    trt = json.loads((resources.files("kvplan") / "data" / "measurements" /
                      "latency_calibration.json").read_text("utf-8"))["points"]
    static_trt = [p for p in trt if p["workload"]["mode"] == "static_batch"]
    assert len(pts) + len(static_trt) >= 60
    sources = Counter(p["source"] for p in pts) + Counter({"nvidia-trtllm": len(static_trt)})
    assert len(sources) >= 6
    assert {p["family"] for p in pts} == {"dense", "moe"}
    assert {p["tp"] for p in pts} >= {1, 2, 4, 8}
    concurrency = {p["workload"].get("max_concurrency") for p in pts}
    assert 1 in concurrency and None in concurrency  # batch 1 to saturation (all at once)


def test_every_point_is_cited_and_complete() -> None:
    for p in raw_points():
        assert p["url"].startswith("https://"), p["id"]
        assert f"`{p['source']}`" in SOURCES_MD, p["source"]
        for key in ("engine", "engine_version", "gpu", "tp", "model_config", "family"):
            assert p.get(key) not in (None, ""), (p["id"], key)
        assert p["workload"]["mode"] in MODES, p["id"]
        values = {**p.get("derived_metrics", {}), **p["metrics"]}
        assert p["fit_metrics"] and all(FIT_KEYS[m][0] in values for m in p["fit_metrics"])
        assert all(isinstance(v, (int, float)) and v > 0 for v in p["metrics"].values())


def test_ids_are_unique() -> None:
    ids = [p["id"] for p in raw_points()]
    assert len(ids) == len(set(ids))


VLLM_OWN = ("vllm-blog", "vllm-recipes", "vllm-perf-dashboard", "vllm-github")
"""Sources published by the vLLM project itself (blog, recipes, perf-dashboard, GitHub threads)."""


def test_vllm_own_sources_give_30_dated_points_dense_and_moe() -> None:
    own = [p for p in raw_points() if p["source"] in VLLM_OWN]
    assert len(own) >= 17
    assert {p["source"] for p in own} == set(VLLM_OWN)
    assert {p["family"] for p in own} == {"dense", "moe"}
    for p in own:
        assert p["url"].startswith("https://github.com/vllm-project/"), p["id"]
    for p in raw_points():
        if p["source"] in (*VLLM_OWN, "sglang-github"):
            assert p["date"][:4] in ("2024", "2025", "2026"), p["id"]


def test_every_point_loads_and_its_deployment_fits() -> None:
    """Each point names a catalog model and GPU and a deployment kvplan's memory plan accepts
    (the cheap half of pricing it; the replay itself runs in benchmarks/calibration_report.py),
    except the points SOURCES.md lists as not priceable."""
    from kvplan.analysis.calibration.public_set import _engine
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.errors import KvplanError
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    rejected = []
    for p in raw_points():
        try:
            plan_memory(load_model(p["model_config"]), load_gpu(p["gpu"]), _engine(p))
        except KvplanError:
            rejected.append(p["id"])
    assert all(f"`{pid}`" in SOURCES_MD for pid in rejected), rejected


def _operand(p: dict[str, Any], name: str) -> float:
    """A printed metric, or a workload field named ``workload.<key>``."""
    if name.startswith("workload."):
        return float(p["workload"][name.removeprefix("workload.")])
    return float(p["metrics"][name])


def test_derived_metrics_follow_from_printed_ones_and_never_shadow_them() -> None:
    derived = [p for p in raw_points() if p.get("derived_metrics")]
    assert derived  # vllm-gh-pr28992: output tok/s from the printed tokens and duration
    ops = {"/": lambda a, b: a / b, "*": lambda a, b: a * b}
    for p in derived:
        for key, value in p["derived_metrics"].items():
            assert key not in p["metrics"], (p["id"], key)
            formula = p["derived_from"][key]
            (op,) = [o for o in ops if o in formula]
            left, right = (s.strip() for s in formula.split(op))
            assert not left.startswith("workload."), (p["id"], key)  # a printed value leads
            assert value == ops[op](_operand(p, left), _operand(p, right)), (p["id"], key)


def test_derived_output_rate_of_a_fixed_length_offline_run() -> None:
    """vLLM PR #7117's main-branch trials print requests/s and input + output tokens/s; every
    request generates exactly --output-len 256 tokens, so output tok/s = requests/s x 256."""
    from kvplan.analysis.calibration.public_set import _measured

    p = next(p for p in raw_points()
             if p["id"] == "vllm-gh-pr7117-llama3-8b-h100-tp1-offline-256-256-trial1")
    assert _measured(p) == {"output_throughput_tok_s": 24.32 * 256}
    assert p["workload"]["mode"] == "offline" and p["workload"]["mean_output_len"] == 256


def test_derived_throughput_is_what_the_fit_compares() -> None:
    from kvplan.analysis.calibration.public_set import _measured

    pid = "vllm-gh-pr28992-deepseek-v31-h200-tp8-decode-c16"
    p = next(p for p in raw_points() if p["id"] == pid)
    assert _measured(p) == {"output_throughput_tok_s": 16000 / 23.38}


def test_an_offline_run_has_no_api_path_and_prices_its_max_num_seqs() -> None:
    """Oracle's benchmark_throughput.py row (vllm bench throughput: the engine in-process) is
    replayed like a rate-inf serving run but never pays the API server's path, and its
    recorded max_num_seqs (vLLM V0's 256) caps the batch; a served point pays the path."""
    from dataclasses import replace

    from kvplan.analysis.calibration.public_set import _engine, _point
    from kvplan.costs.step.profile import Profile

    raw = {p["id"]: p for p in raw_points()}
    offline = raw["oracle-mi300x-llama31-405b-fp8-tp8-offline-128-128"]
    assert offline["workload"]["mode"] == "offline"
    assert _engine(offline).max_num_seqs == 256
    cp = _point(offline)
    assert not cp.served and set(cp.measured) == {"output_throughput_tok_s"}
    base = Profile(api_request_s=0.0, api_prompt_token_s=0.0)
    slow = replace(base, api_request_s=0.05, api_prompt_token_s=1e-5)
    assert cp.predict(slow) == cp.predict(base)
    served = _point(raw["vllm-recipes-qwen3guard-gen-8b-mi300x-tp1-c32"])
    assert served.served
    assert served.predict(slow)["ttft_s"] > served.predict(base)["ttft_s"] + 0.05


def test_an_unknown_workload_mode_is_refused_with_its_name() -> None:
    import pytest

    from kvplan.analysis.calibration.public_set import _point
    from kvplan.errors import InputError

    p = next(p for p in raw_points() if p["workload"]["mode"] == "offline")
    bad = {**p, "workload": {**p["workload"], "mode": "offlne"}}
    with pytest.raises(InputError, match="'offlne' is none of serving, offline, static_batch"):
        _point(bad)


def test_points_with_assumed_lengths_say_so_and_fit_no_throughput() -> None:
    """GPUStack's quantization page prints no token totals: its points replay assumed lengths,
    so their output throughput (tokens / time) would be an assumption fitted as a measurement."""
    assumed = [p for p in raw_points() if p["workload"].get("lengths_assumed")]
    assert assumed
    for p in assumed:
        assert "throughput" not in p["fit_metrics"], p["id"]
        assert "assumed" in p["workload"]["lengths"] and "assumed" in p["notes"], p["id"]
