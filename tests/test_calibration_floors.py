"""Physical floors of measured points (issue 16): golden floors worked by hand from the
datasheet, the public set's Tenstorrent TTFTs that beat them (docs/formulas-latency.md,
"faster than the datasheet allows"), kvplan calibrate's refusal and --force, and the
property that no floor is above kvplan's own prediction."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.analysis.calibration.floor_check import below_floor, refusal
from kvplan.analysis.calibration.floors import Floors, point_floors, served_load, static_load
from kvplan.analysis.calibration.public_set import drop_below_floor, raw_load, raw_points
from kvplan.costs.step.latency import RequestShape, static_batch_latency
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli

LLAMA2, QWEN_MOE = "meta-llama/Llama-2-7b-hf", "Qwen/Qwen3-30B-A3B"


def floors(model: str, gpu: str, batch: int, prompt: int, output: int,
           engine: EngineConfig | None = None) -> Floors:
    return point_floors(load_model(model), load_gpu(gpu), engine or EngineConfig(),
                        static_load(batch, prompt, output))


def value(f: Floors, metric: str) -> float:
    lim = f.limit(metric)
    assert lim is not None, metric
    return lim.value


def test_dense_prefill_floor_is_its_flops_at_peak() -> None:
    """Llama-2-7B, one 2,048-token prompt on H100 (989.4 TFLOP/s bf16 dense):
    linear params 32 x (3 x 4096^2 + 4096^2 + 3 x 4096 x 11008) = 6,476,005,376, so
    GEMMs 2 x 6,476,005,376 x 2,048 = 26,525,718,020,096 FLOPs; lm_head one row
    2 x 32,000 x 4,096 = 262,144,000; causal attention 2 x 32 heads x (128 + 128) x 32 layers
    = 524,288 FLOPs per pair x 2,048 x 2,049 / 2 pairs = 1,100,048,498,688.
    Total 27,626,028,662,784 FLOPs / 989.4e12 = 27.922 ms (compute-bound: the weights,
    13.2 GB, take 3.9 ms at 3.35 TB/s)."""
    f = floors(LLAMA2, "h100", 1, 2048, 1)
    ttft = f.limit("ttft_s")
    assert ttft is not None and ttft.side == "compute"
    assert ttft.value == pytest.approx(27_626_028_662_784 / 989.4e12, rel=1e-12)
    assert f.peak_flops_per_s == 989.4e12 and f.bandwidth_bytes_per_s == 3.35e12


def test_dense_decode_floor_is_its_bytes_at_bandwidth() -> None:
    """Llama-2-7B on H100, prompt 1,000, 101 output tokens: 100 decode steps at context
    1,000..1,099. Each reads the weights but the embedding table (a lookup):
    13,476,831,232 - 2 x 32,000 x 4,096 = 13,214,687,232 bytes, and writes one token's KV
    (512 KiB = 524,288 bytes); together they read 524,288 x (100 x 1,000 + 4,950) bytes of KV.
    1,376,545,177,600 bytes / 3.35e12 B/s / 100 steps = 4.1091 ms per output token."""
    f = floors(LLAMA2, "h100", 1, 1000, 101)
    total = 100 * 13_214_687_232 + 524_288 * 104_950 + 100 * 524_288
    assert total == 1_376_545_177_600
    assert value(f, "tpot_s") == pytest.approx(total / 3.35e12 / 100, rel=1e-9)
    assert value(f, "itl_s") == value(f, "tpot_s")
    assert f.limit("tpot_s").side == "memory"  # type: ignore[union-attr]
    # the whole request at least its prefill plus its decode run, throughput at most 101 / E2E
    assert value(f, "e2e_s") >= total / 3.35e12
    assert value(f, "output_throughput_tok_s") == pytest.approx(101 / value(f, "e2e_s"))


def test_tensor_parallel_halves_the_prefill_floor() -> None:
    """Each of 2 GPUs multiplies half the weights (lm_head too) and half the heads."""
    one = value(floors(LLAMA2, "h100", 1, 2048, 1), "ttft_s")
    two = value(floors(LLAMA2, "h100", 1, 2048, 1, EngineConfig(tensor_parallel_size=2)),
                "ttft_s")
    assert two == pytest.approx(one / 2, rel=1e-12)


def test_moe_decode_floor_reads_only_the_touched_experts() -> None:
    """Qwen3-30B-A3B (8 of 128 experts): one request's decode touches 8 per layer, so its
    TPOT floor is far under reading every expert; a batch of 64 touches ~127 of 128."""
    one = value(floors(QWEN_MOE, "a100", 1, 128, 2), "tpot_s")
    batch = value(floors(QWEN_MOE, "a100", 64, 128, 2), "tpot_s")
    weights = 61_064_000_000  # ~30.5B parameters in bf16: every expert read
    assert one < 0.2 * weights / 2.039e12 < batch


@pytest.mark.parametrize(("pid", "ratio"), [
    ("tenstorrent-qwen3-30b-a3b-a100-4096-128-c1", 0.810),
    ("tenstorrent-qwen3-30b-a3b-a100-8192-128-c1", 0.996),
    ("tenstorrent-qwen3-30b-a3b-a100-128-1024-c1", 0.911),
])
def test_tenstorrent_ttfts_beat_a100s_datasheet(pid: str, ratio: float) -> None:
    """docs/formulas-latency.md: 75.2 ms measured where the 4,096-token prefill needs 92.8 ms
    at 312 TFLOP/s; 227 ms vs 228 ms at 8,192; 27 ms where one 128-token prefill reads
    ~all experts (29.6 ms at 2.039 TB/s)."""
    p = next(r for r in raw_points() if r["id"] == pid)
    f = point_floors(load_model(p["model_config"]), load_gpu(p["gpu"]), EngineConfig(),
                     raw_load(p))
    found = below_floor(pid, {"ttft_s": p["metrics"]["mean_ttft_ms"] / 1e3}, f)
    assert [b.metric for b in found] == ["ttft_s"]
    assert found[0].ratio == pytest.approx(ratio, abs=1e-3)


def test_a_value_just_above_its_floor_is_accepted() -> None:
    f = floors(QWEN_MOE, "a100", 1, 4096, 1)
    floor = value(f, "ttft_s")
    assert below_floor("p", {"ttft_s": floor * 1.001}, f) == []
    assert len(below_floor("p", {"ttft_s": floor * 0.999}, f)) == 1
    ceiling = value(f, "output_throughput_tok_s")
    assert below_floor("p", {"output_throughput_tok_s": ceiling * 0.999}, f) == []
    (b,) = below_floor("p", {"output_throughput_tok_s": ceiling * 1.25}, f)
    assert b.ratio == pytest.approx(0.8) and "above its physical ceiling" in b.describe()


def test_served_floors_price_each_request_alone() -> None:
    """Two requests through a server: TTFT floor the mean of their prefills alone."""
    m, hw = load_model(LLAMA2), load_gpu("h100")
    both = point_floors(m, hw, EngineConfig(), served_load((2048, 128), (1, 1), 1))
    a = value(floors(LLAMA2, "h100", 1, 2048, 1), "ttft_s")
    b = value(floors(LLAMA2, "h100", 1, 128, 1), "ttft_s")
    assert value(both, "ttft_s") == pytest.approx((a + b) / 2, rel=1e-12)


def test_drop_below_floor_keeps_the_other_values() -> None:
    """A point that beats one floor keeps its other metrics (a point with none left goes)."""
    from kvplan.analysis.calibration.public_set import CalPoint

    f = floors(QWEN_MOE, "a100", 1, 4096, 2)
    base = CalPoint(id="x", source="s", family="moe", model=QWEN_MOE, gpu="A100-80GB-SXM",
                    tp=1, precision="bfloat16", measured={"ttft_s": 0.05, "tpot_s": 0.5},
                    predict=lambda _: {}, floors=f)
    kept, dropped = drop_below_floor([base, replace(base, id="y", measured={"ttft_s": 0.05})])
    assert [p.id for p in kept] == ["x"] and kept[0].measured == {"tpot_s": 0.5}
    assert [(b.point, b.metric) for b in dropped] == [("x", "ttft_s"), ("y", "ttft_s")]
    assert "(and 1 more" in refusal(dropped)


def test_a_page_with_a_value_below_its_floor_sets_that_metric_aside() -> None:
    """One TTFT of a page beats its floor: that page's other TTFTs go too (same method), its
    TPOTs stay, another page's TTFTs stay, and a point with nothing left goes."""
    from kvplan.analysis.calibration.floor_check import same_method
    from kvplan.analysis.calibration.public_set import CalPoint

    f = floors(QWEN_MOE, "a100", 1, 4096, 2)
    x = CalPoint(id="x", source="s", family="moe", model=QWEN_MOE, gpu="A100-80GB-SXM",
                 tp=1, precision="bfloat16", measured={"ttft_s": 0.05, "tpot_s": 0.5},
                 predict=lambda _: {}, floors=f, page="p1")
    y = replace(x, id="y", measured={"ttft_s": 0.3, "tpot_s": 0.5})
    z = replace(x, id="z", measured={"ttft_s": 0.3})
    w = replace(x, id="w", measured={"ttft_s": 0.3, "tpot_s": 0.5}, page="p2")
    kept, dropped = drop_below_floor([x, y, z, w])
    assert [(b.point, b.metric) for b in dropped] == [("x", "ttft_s")]
    kept, aside = same_method(kept, dropped, {p.id: p.page for p in (x, y, z, w)})
    assert [(p.id, p.measured) for p in kept] == [
        ("x", {"tpot_s": 0.5}), ("y", {"tpot_s": 0.5}), ("w", {"ttft_s": 0.3, "tpot_s": 0.5})]
    assert [(a.point, a.metric, a.because) for a in aside] == [
        ("y", "ttft_s", "x"), ("z", "ttft_s", "x")]
    assert aside[0].describe() == (
        "y: TTFT set aside (the same page's x is below its floor: the method did not measure "
        "what kvplan predicts)")


def test_the_bundled_set_sets_aside_the_tenstorrent_ttfts() -> None:
    """tt-inference-server's A100 Qwen3-30B-A3B table: 3 of its 7 TTFTs beat their floors
    (4096 tokens in 75.2 ms), so its other 4 TTFTs are no cold prefill either."""
    from kvplan.analysis.calibration.public_set import calibration_set

    cs = calibration_set()
    assert sorted(a.point for a in cs.set_aside) == [
        f"tenstorrent-qwen3-30b-a3b-a100-{n}-128-c1" for n in (1024, 128, 2048, 3072)]
    assert {b.point.split("-")[0] for b in cs.below_floor} == {"tenstorrent"}


CSV = ("id,model,gpu,batch,prompt,output,ttft_ms\n"
       f"tt-4096,{QWEN_MOE},a100,1,4096,1,75.2\n"
       f"ok-4096,{QWEN_MOE},a100,1,4096,1,213\n"
       f"ok-1024,{QWEN_MOE},a100,1,1024,1,81\n")


def test_calibrate_refuses_a_value_below_its_floor(tmp_path: Path) -> None:
    path, out = tmp_path / "pts.csv", tmp_path / "profile.json"
    path.write_text(CSV)
    r = run_cli("calibrate", str(path), "--out", str(out))
    assert_one_line_error(r)
    assert not out.exists()
    for part in ("tt-4096", "TTFT 75.20 ms", "below its physical floor 92.84 ms",
                 "A100-80GB-SXM", "312 TFLOP/s", "prefix-cache", "--force"):
        assert part in r.err, part


def test_calibrate_force_drops_the_value_with_a_note(tmp_path: Path) -> None:
    path, out = tmp_path / "pts.csv", tmp_path / "profile.json"
    path.write_text(CSV)
    r = run_cli("calibrate", str(path), "--out", str(out), "--force", "--json")
    assert r.code == 0, r.err
    notes = [line for line in r.err.splitlines() if line.startswith("note: dropped")]
    assert len(notes) == 1 and "tt-4096" in notes[0] and "92.84 ms" in notes[0]
    assert out.exists()
    assert {p["id"] for p in r.json()["points"]} == {"ok-4096", "ok-1024"}


def test_calibrate_refuses_a_serving_run_below_its_floor(tmp_path: Path) -> None:
    path, out = tmp_path / "sweep.csv", tmp_path / "p.json"
    path.write_text("model,gpu,num_prompts,input_len,output_len,max_concurrency,mean_ttft_ms\n"
                    f"{QWEN_MOE},a100,2,8192,2,1,150\n")
    r = run_cli("calibrate", str(path), "--out", str(out))
    assert_one_line_error(r)
    assert "below its physical floor" in r.err and not out.exists()


ZERO = Profile(step_overhead_s=0.0, prefill_overhead_s=0.0, allreduce_latency_s=0.0)
"""Measured kernels and nothing else: the fastest kvplan prices a point."""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from([LLAMA2, QWEN_MOE, "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B",
                              "deepseek-ai/DeepSeek-V2-Lite", "mistralai/Mistral-7B-v0.1",
                              "google/gemma-2-9b-it", "openai/gpt-oss-20b"]),
       gpu=st.sampled_from(["h100", "a100", "h200"]), batch=st.integers(1, 32),
       prompt=st.integers(1, 4096), output=st.integers(1, 64), tp=st.sampled_from([1, 2]))
def test_floors_are_positive_and_never_above_kvplans_prediction(
        model: str, gpu: str, batch: int, prompt: int, output: int, tp: int) -> None:
    """A prediction below a physical floor would be a bug in the kernels or the counts
    (sliding-window models included since their decode line is fitted on the clipped
    context: the next test is the case the floors found)."""
    engine = EngineConfig(tensor_parallel_size=tp)
    spec, hw = load_model(model), load_gpu(gpu)
    f = point_floors(spec, hw, engine, static_load(batch, prompt, output))
    assert all(lim.value > 0 for lim in f.limits)
    shape = RequestShape(batch=batch, prompt_tokens=prompt, output_tokens=output)
    pred = static_batch_latency(StepCostModel(spec, hw, engine, ZERO), shape,
                                max_num_batched_tokens=engine.max_num_batched_tokens)
    slack = 1 + 1e-9
    assert value(f, "ttft_s") <= pred.ttft_s * slack
    assert value(f, "e2e_s") <= pred.e2e_s * slack
    assert value(f, "output_throughput_tok_s") * slack >= pred.output_throughput_tok_s
    if pred.tpot_s is not None:
        assert value(f, "tpot_s") <= pred.tpot_s * slack


def test_every_bundled_value_is_checked_and_three_fall_under() -> None:
    """Both files, every metric the fit compares: exactly the three Tenstorrent TTFTs that
    SOURCES.md lists beat their floor (the rest of the set is physically possible)."""
    from importlib import resources

    from kvplan.analysis.calibration.floor_check import measurement_floors
    from kvplan.analysis.calibration.measurements import Defaults, _from_json
    from kvplan.analysis.calibration.public_set import _engine, _measured
    from kvplan.jsonread import loads

    found = []
    for p in raw_points():
        model, engine = load_model(p["model_config"]), _engine(p)
        f = point_floors(model, load_gpu(p["gpu"]), engine, raw_load(p))
        found += below_floor(p["id"], _measured(p), f)
    text = (resources.files("kvplan") / "data" / "measurements" /
            "latency_calibration.json").read_text("utf-8")
    for m in _from_json(loads(text), text, "latency_calibration.json", Defaults()):
        found += below_floor(m.id, m.measured, measurement_floors(m))
    sources = (resources.files("kvplan") / "data" / "measurements" / "SOURCES.md").read_text(
        "utf-8")
    assert sorted((b.point, b.metric) for b in found) == [
        ("tenstorrent-qwen3-30b-a3b-a100-128-1024-c1", "ttft_s"),
        ("tenstorrent-qwen3-30b-a3b-a100-4096-128-c1", "ttft_s"),
        ("tenstorrent-qwen3-30b-a3b-a100-8192-128-c1", "ttft_s")]
    assert all(f"`{b.point}`" in sources for b in found)


def test_sliding_window_decode_is_not_priced_below_physics() -> None:
    """Gemma-2-9B on H100, 256 requests decoding at 4,000 cached tokens (under its 4,096
    window): the step reads 352 GB of KV and 18.5 GB of weights, >= 110.7 ms at 3.35 TB/s.
    kvplan predicted 78.6 ms (its sliding layers' KV read at ~20 TB/s: costs/step/tables.py
    fitted the decode line on the unclipped context); 124.2 ms since the fix."""
    spec, hw = load_model("google/gemma-2-9b-it"), load_gpu("h100")
    f = point_floors(spec, hw, EngineConfig(), static_load(256, 4000, 2))
    shape = RequestShape(batch=256, prompt_tokens=4000, output_tokens=2)
    pred = static_batch_latency(StepCostModel(spec, hw, EngineConfig(), ZERO), shape)
    assert pred.tpot_s is not None and value(f, "tpot_s") <= pred.tpot_s
