"""benchmarks/compare_peers.py's pure parts: calibration points -> aiconfigurator's inputs and the
side-by-side medians. None of these needs aiconfigurator; the one test that calls it is the last.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
MEASUREMENTS = ROOT / "src" / "kvplan" / "data" / "measurements"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pm = _load("peers_map")

CAPS = pm.AicCaps(
    models=frozenset({"Qwen/Qwen3-8B", "meta-llama/Meta-Llama-3.1-8B",
                      "nvidia/Llama-3.1-70B-Instruct-FP8", "Qwen/Qwen3-30B-A3B"}),
    backends={"h100_sxm": ("vllm", "trtllm", "sglang"), "a100_sxm": ("vllm", "trtllm"),
              "l4": ("trtllm",), "l40s": ()})


def _raw(point_id: str) -> dict[str, Any]:
    points = json.loads((MEASUREMENTS / "public_calibration.json").read_text())["points"]
    found: dict[str, Any] = next(p for p in points if p["id"] == point_id)
    return found


def _point(**kw: Any) -> Any:
    base: dict[str, Any] = dict(
        id="p", source="s", family="dense", engine="vllm", model="Qwen/Qwen3-8B",
        gpu="H100-SXM-80GB", tp=1, ep=1, moe=False, quantization=None, kv_cache_dtype="auto",
        dtype="auto", static=False, batch=8, isl=1000, osl=100, max_num_batched_tokens=8192,
        measured={"ttft_s": 0.1})
    return pm.PeerPoint(**{**base, **kw})


# ---------------------------------------------------------------- calibration point -> PeerPoint


def test_a_served_point_takes_its_concurrency_and_mean_lengths() -> None:
    """gpustack Qwen3-8B H100 --max-concurrency 2: ISL 232.6 -> 233, OSL 220.61 -> 221; vLLM's
    H100 budget is 8192 tokens (>= 70 GiB, not an A100)."""
    p = pm.public_point(_raw("gpustack-qwen3-8b-h100-latency-L643"))
    assert (p.batch, p.isl, p.osl, p.max_num_batched_tokens) == (2, 233, 221, 8192)
    assert (p.static, p.engine, p.moe, p.model) == (False, "vllm", False, "Qwen/Qwen3-8B")
    printed = _raw(p.id)["metrics"]  # mean_ttft_ms 63.78, mean_tpot_ms 7.37, 257.19 tok/s
    assert p.measured == {"ttft_s": pytest.approx(printed["mean_ttft_ms"] / 1e3),
                          "tpot_s": pytest.approx(printed["mean_tpot_ms"] / 1e3),
                          "output_throughput_tok_s": printed["output_throughput_tok_s"]}
    assert p.measured["ttft_s"] == pytest.approx(0.06378)


def test_an_offline_run_holds_at_most_max_num_seqs() -> None:
    """1000 prompts at rate inf, no --max-concurrency: H100 holds min(1000, 1024) = 1000 at
    once, A100 min(1000, 256) = 256 with vLLM's 2048-token budget."""
    h100 = pm.public_point(_raw("gpustack-gpt-oss-20b-h100-L88"))
    a100 = pm.public_point(_raw("gpustack-qwen3-32b-a100-L90"))
    assert (h100.batch, h100.moe, h100.family) == (1000, True, "moe")
    assert (a100.batch, a100.max_num_batched_tokens) == (256, 2048)


def test_per_request_lengths_give_their_mean() -> None:
    raw = _raw("lambda-mistral-7b-instruct-v0.3_tp1-h100")
    p = pm.public_point(raw)
    w = raw["workload"]
    assert p.isl == round(sum(w["input_lens"]) / len(w["input_lens"]))
    assert p.batch == 10  # 10 prompts, no concurrency cap


def test_a_static_batch_keeps_its_shape() -> None:
    p = pm.public_point(_raw("vllm-gh-pr3240-mixtral-8x7b-a100-tp2-b64"))
    assert (p.static, p.batch, p.isl, p.osl, p.tp, p.moe) == (True, 64, 1000, 50, 2, True)
    assert p.measured == {"e2e_s": pytest.approx(_raw(p.id)["metrics"]["avg_latency_s"])}


def test_peer_points_are_every_calibration_point_and_name_the_rest() -> None:
    """The TensorRT-LLM static batches, then every public point; latency_calibration.json's
    other points are listed as outside the set, not dropped."""
    latency = json.loads((MEASUREMENTS / "latency_calibration.json").read_text())["points"]
    static = [r["id"] for r in latency if r["workload"]["mode"].startswith("static_batch")]
    public = [r["id"] for r in json.loads(
        (MEASUREMENTS / "public_calibration.json").read_text())["points"]]
    ps = pm.peer_points()
    assert [p.id for p in ps.points] == static + public
    assert set(ps.outside) == {r["id"] for r in latency} - set(static)
    assert all("not a calibration point" in why for why in ps.outside.values())
    only = pm.peer_points(["tenstorrent"])
    assert {p.source for p in only.points} == {"tenstorrent"} and only.outside == {}


# ---------------------------------------------------------------- PeerPoint -> aiconfigurator


def test_a_served_point_runs_agg_at_its_concurrency() -> None:
    inp = pm.to_aic(_point(isl=1000), CAPS)
    assert isinstance(inp, pm.AicInput)
    assert (inp.system, inp.backend, inp.mode, inp.batch_size) == ("h100_sxm", "vllm", "agg", 8)
    assert inp.ctx_tokens == 1000  # one prompt a mixed step: min(ISL, 8192)
    assert (inp.model, inp.config_from_kvplan) == ("Qwen/Qwen3-8B", False)
    assert (inp.moe_tp, inp.moe_ep, inp.gemm_quant, inp.kv_quant) == (None, None, None, None)
    assert any("no request queue" in n for n in inp.notes)
    long = pm.to_aic(_point(isl=32000), CAPS)
    assert isinstance(long, pm.AicInput) and long.ctx_tokens == 8192  # chunked at the budget


def test_kwargs_are_cli_estimates() -> None:
    inp = pm.to_aic(_point(), CAPS)
    assert isinstance(inp, pm.AicInput)
    assert inp.kwargs() == {
        "system_name": "h100_sxm", "mode": "agg", "backend_name": "vllm", "isl": 1000,
        "osl": 100, "batch_size": 8, "tp_size": 1, "moe_tp_size": None, "moe_ep_size": None,
        "gemm_quant_mode": None, "moe_quant_mode": None, "kvcache_quant_mode": None,
        "ctx_tokens": 1000}
    static = pm.to_aic(_point(static=True), CAPS)
    assert isinstance(static, pm.AicInput) and "ctx_tokens" not in static.kwargs()


def test_moe_experts_shard_by_tensor_parallel_and_fp8_reaches_them() -> None:
    """vLLM without --enable-expert-parallel shards every expert over the TP ranks."""
    inp = pm.to_aic(_point(model="Qwen/Qwen3-30B-A3B", moe=True, tp=4, quantization="fp8",
                           kv_cache_dtype="fp8"), CAPS)
    assert isinstance(inp, pm.AicInput)
    assert (inp.moe_tp, inp.moe_ep) == (4, 1)
    assert (inp.gemm_quant, inp.moe_quant, inp.kv_quant) == ("fp8", "fp8", "fp8")
    ep = pm.to_aic(_point(model="Qwen/Qwen3-30B-A3B", moe=True, tp=8, ep=8), CAPS)
    assert isinstance(ep, pm.AicInput) and (ep.moe_tp, ep.moe_ep) == (1, 8)


def test_a_static_fp16_trtllm_point_and_the_backend_rule() -> None:
    p = _point(engine="trtllm", gpu="A100-80GB-SXM", dtype="float16", static=True, batch=52,
               model="meta-llama/Llama-2-7b-hf")
    first = pm.to_aic(p, CAPS)
    matched = pm.to_aic(p, CAPS, rule="engine")
    assert isinstance(first, pm.AicInput) and isinstance(matched, pm.AicInput)
    assert (first.backend, matched.backend) == ("vllm", "trtllm")
    assert (first.mode, first.batch_size, first.ctx_tokens) == ("static", 52, None)
    assert first.gemm_quant == "bfloat16" and any("fp16" in n for n in first.notes)
    assert any("measured on trtllm, priced with vllm" in n for n in first.notes)
    assert not any("measured on" in n for n in matched.notes)
    assert (first.model, first.config_from_kvplan) == ("meta-llama/Llama-2-7b-hf", True)


def test_static_mode_prices_a_served_point_as_one_batch() -> None:
    inp = pm.to_aic(_point(), CAPS, mode="static")
    assert isinstance(inp, pm.AicInput) and (inp.mode, inp.ctx_tokens) == ("static", None)


def test_what_it_cannot_express_says_why() -> None:
    assert pm.to_aic(_point(gpu="MI300X"), CAPS) == "no aiconfigurator system for MI300X"
    assert pm.to_aic(_point(gpu="L40S"), CAPS) == "no vLLM or TensorRT-LLM perf tables for l40s"
    l4 = pm.to_aic(_point(gpu="L4"), CAPS)  # TensorRT-LLM's tables when vLLM has none
    assert isinstance(l4, pm.AicInput) and l4.backend == "trtllm"


def test_model_ids_match_exactly_or_by_variant_never_other_weights() -> None:
    known = CAPS.models
    assert pm.aic_model("qwen/qwen3-8b", known) == "Qwen/Qwen3-8B"
    assert pm.aic_model("meta-llama/Llama-3.1-8B", known) == "meta-llama/Meta-Llama-3.1-8B"
    assert pm.aic_model("meta-llama/Llama-3.1-70B", known) is None  # only its -FP8 weights
    assert pm.aic_model("mistralai/Mistral-7B-v0.1", known) is None


def test_aic_metrics_in_si_units() -> None:
    raw = {"ttft": 40.0, "tpot": 5.0, "request_latency": 540.0, "tokens/s": 1800.0}
    assert pm.aic_metrics(raw) == {"ttft_s": 0.04, "tpot_s": 0.005, "e2e_s": 0.54,
                                   "output_throughput_tok_s": 1800.0}
    assert "tpot_s" not in pm.aic_metrics({**raw, "tpot": 0.0})  # one output token


# ---------------------------------------------------------------- the arithmetic


def _pairs() -> list[Any]:
    """Errors (aic, kvplan): dense TTFT (+50%, -10%), (-20%, +30%), (+10%, 0%);
    dense TPOT (-40%, +5%); moe TTFT (+100%, -50%)."""
    def pair(pid: str, family: str, metric: str, aic: float, kv: float) -> Any:
        return pm.Pair(id=pid, source="s", family=family, metric=metric, measured=2.0,
                       aic=2.0 * (1 + aic), kvplan=2.0 * (1 + kv), kvplan_held_out=None)
    return [pair("a", "dense", "ttft_s", 0.5, -0.1), pair("b", "dense", "ttft_s", -0.2, 0.3),
            pair("c", "dense", "ttft_s", 0.1, 0.0), pair("a", "dense", "tpot_s", -0.4, 0.05),
            pair("m", "moe", "ttft_s", 1.0, -0.5)]


def test_side_by_side_medians_by_hand() -> None:
    rows = {(r.family, r.metric): r for r in pm.side_by_side(_pairs())}
    assert list(rows) == [("dense", "TTFT"), ("dense", "TPOT"), ("dense", "all"),
                          ("moe", "TTFT"), ("moe", "all"), ("all", "all")]
    ttft = rows["dense", "TTFT"]
    assert ttft.n == 3 and ttft.aic == pytest.approx(0.2) and ttft.kvplan == pytest.approx(0.1)
    dense = rows["dense", "all"]  # |aic| 0.5 0.2 0.1 0.4 -> 0.3; |kvplan| 0.1 0.3 0 0.05 -> 0.075
    assert (dense.n, dense.aic, dense.kvplan) == (4, pytest.approx(0.3), pytest.approx(0.075))
    everything = rows["all", "all"]  # |aic| ... 1.0 -> 0.4; |kvplan| ... 0.5 -> 0.1
    assert everything.aic == pytest.approx(0.4) and everything.kvplan == pytest.approx(0.1)
    assert ttft.kvplan_held_out is None


def test_held_out_column_only_when_every_value_has_one() -> None:
    pairs = [replace(p, kvplan_held_out=p.measured * 1.2) for p in _pairs()]
    rows = {(r.family, r.metric): r for r in pm.side_by_side(pairs)}
    assert rows["all", "all"].kvplan_held_out == pytest.approx(0.2)
    pairs[0] = replace(pairs[0], kvplan_held_out=None)
    rows = {(r.family, r.metric): r for r in pm.side_by_side(pairs)}
    assert rows["dense", "TTFT"].kvplan_held_out is None
    assert rows["moe", "TTFT"].kvplan_held_out == pytest.approx(0.2)


def test_pairs_only_where_both_tools_priced_the_value() -> None:
    points = [_point(id="x", measured={"ttft_s": 1.0, "tpot_s": 0.01}),
              _point(id="y", measured={"ttft_s": 2.0})]
    aic = {"x": {"ttft_s": 1.5, "tpot_s": 0.02, "e2e_s": 9.0}}
    kv = {"x": {"ttft_s": 0.5}, "y": {"ttft_s": 2.0}}
    pairs = pm.pairs_for(points, aic, kv, {("x", "ttft_s"): 1.1})
    assert [(p.id, p.metric, p.aic, p.kvplan, p.kvplan_held_out) for p in pairs] == [
        ("x", "ttft_s", 1.5, 0.5, 1.1)]
    assert pairs[0].error(pairs[0].aic) == pytest.approx(0.5)


def test_reasons_are_counted_most_first() -> None:
    failed = {"a": "no system", "b": "OOM", "c": "no system"}
    assert pm.reasons(failed) == [("no system", 2), ("OOM", 1)]


# ---------------------------------------------------------------- the script without aiconfigurator


def test_the_script_says_when_aiconfigurator_is_missing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator", None)  # import fails as if absent
    monkeypatch.setitem(sys.modules, "aiconfigurator.cli.api", None)
    cp = _load("compare_peers")
    with pytest.raises(SystemExit) as exc:
        cp.main([])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: aiconfigurator is not installed")
    assert "pip install aiconfigurator" in err


def test_the_script_never_writes_into_the_bundled_data(
        capsys: pytest.CaptureFixture[str]) -> None:
    cp = _load("compare_peers")
    with pytest.raises(SystemExit) as exc:
        cp.main(["--json", str(MEASUREMENTS / "public_calibration.json")])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("error: --json ")


def test_an_installed_aiconfigurator_reads_the_mapping_as_meant() -> None:
    """Runs only where aiconfigurator is installed (it is optional; the reason is printed
    with -rs): one static batch of Qwen3-8B on H100 through vLLM's tables, where its own
    throughput must be batch x OSL / request latency, the identity aic_metrics relies on."""
    pytest.importorskip("aiconfigurator.cli.api", reason="aiconfigurator (optional) absent")
    cp = _load("compare_peers")
    inp = pm.to_aic(_point(static=True, batch=4, isl=512, osl=64), cp.aic_caps())
    assert isinstance(inp, pm.AicInput)
    out = cp.run_aic(inp, Path("/nonexistent"))  # a known model id: no config folder needed
    assert out.reason is None and out.metrics is not None
    m = out.metrics
    assert m["output_throughput_tok_s"] == pytest.approx(4 * 64 / m["e2e_s"], rel=1e-6)
    assert 0 < m["ttft_s"] < m["e2e_s"] and out.version.startswith("vllm ")
