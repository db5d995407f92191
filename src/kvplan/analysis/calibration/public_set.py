"""The bundled public calibration set: measured points, each turned into something that
predicts its metrics under any profile (a recorded simulator replay, or a static batch).

Files (``src/kvplan/data/measurements``): ``public_calibration.json`` (vLLM / SGLang serving
runs and ``vllm bench latency`` batches, sources in ``SOURCES.md``) and the TensorRT-LLM
static-batch points of ``latency_calibration.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from kvplan import input_file, jsonread
from kvplan.analysis.calibration.floor_check import BelowFloor, SetAside, drop_values, same_method
from kvplan.analysis.calibration.floors import (
    Floors,
    Load,
    point_floors,
    served_load,
    static_load,
)
from kvplan.analysis.calibration.lengths import drawn_lengths
from kvplan.analysis.calibration.replay import Replay, record
from kvplan.costs.memory.resolved import ResolvedDeployment, resolve
from kvplan.costs.step.latency import RequestShape, static_batch_latency
from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.errors import InputError
from kvplan.specs.requests.traces import load_trace
from kvplan.specs.requests.workload import Workload, WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.vllm_releases import mxfp4_moe_backend

FIT_KEYS = {"ttft": ("mean_ttft_ms", "ttft_s", 1e-3), "tpot": ("mean_tpot_ms", "tpot_s", 1e-3),
            "throughput": ("output_throughput_tok_s", "output_throughput_tok_s", 1.0),
            "e2e": ("avg_latency_s", "e2e_s", 1.0)}
"""fit_metrics name -> (printed key, kvplan metric, factor to SI)."""
MODES = ("serving", "offline", "static_batch")
"""workload.mode: ``vllm bench serve`` through the API server, ``vllm bench throughput`` (the
engine in-process, every prompt at t = 0, no API path), ``vllm bench latency`` (one batch)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalPoint:
    """One measured point with what the fit compares (SI units) and how to predict it."""

    id: str
    source: str
    family: str
    model: str
    gpu: str
    tp: int
    precision: str
    measured: dict[str, float]
    predict: Callable[[Profile], dict[str, float]]
    engine: str = "vllm"
    """Serving engine family: vllm, sglang or trtllm (host-side overheads differ)."""
    served: bool = False
    """Measured by a client through the engine's API server (``vllm bench serve``), so the
    prediction includes the API path (``Profile.api_delay_s``); False for static batches and
    offline runs (``vllm bench throughput``: the engine in-process, every prompt at t = 0)."""
    simulate: Callable[[Profile], dict[str, float]] | None = None
    """The run simulated again under a profile (exact where ``predict`` is a replay that
    approximates the API server's queue); what reported errors use. None = ``predict``."""

    page: str = ""
    """Where it was read (the source's address without its #fragment): a page's values of
    one metric share a method (``floor_check.same_method``)."""
    floors: Floors | None = None
    """The point's physical limits at its GPU's datasheet peaks (``floors``); None: unchecked."""

    def exact(self, profile: Profile) -> dict[str, float]:
        """The model's own prediction (the simulator's where the fit uses a replay)."""
        return (self.simulate or self.predict)(profile)


def engine_key(name: str) -> str:
    """'vLLM (ROCm)' -> vllm, 'SGLang' -> sglang, 'TensorRT-LLM ...' -> trtllm."""
    low = name.lower()
    return "sglang" if "sglang" in low else "trtllm" if "tensorrt" in low else "vllm"


def _data_text(name: str) -> str:
    return input_file.read_text(input_file.package_file("data", "measurements", name))


def raw_points() -> list[dict[str, Any]]:
    """The points of public_calibration.json as stored (citations, metrics as printed)."""
    points: list[dict[str, Any]] = jsonread.loads(_data_text("public_calibration.json"))["points"]
    return points


def _engine(p: Mapping[str, Any]) -> EngineConfig:
    args = p.get("engine_args") or {}
    return EngineConfig(tensor_parallel_size=int(p["tp"]), quantization=p.get("quantization"),
                        kv_cache_dtype=str(p.get("kv_cache_dtype") or "auto"),
                        max_model_len=args.get("max_model_len"),
                        max_num_seqs=args.get("max_num_seqs"),
                        max_num_batched_tokens=args.get("max_num_batched_tokens"),
                        async_scheduling=bool(args.get("async_scheduling", False)),
                        mxfp4_moe_backend=mxfp4_moe_backend(
                            str(p.get("engine", "")), p.get("engine_version"), str(p["gpu"])))


def _measured(p: Mapping[str, Any]) -> dict[str, float]:
    """The fitted metrics in SI units: printed values, else the point's ``derived_metrics``
    (computed from printed totals, e.g. tokens / duration, where the page prints no such line)."""
    values = {**(p.get("derived_metrics") or {}), **p["metrics"]}
    out = {}
    for name in p["fit_metrics"]:
        key, metric, factor = FIT_KEYS[name]
        if key in values:
            out[metric] = float(values[key]) * factor
    return out


def _workload(w: Mapping[str, Any]) -> Workload:
    """The file's own per-request lengths; else vLLM's ShareGPT requests at the printed means
    for a ShareGPT run; else the lengths the run's benchmark drew, where its command says
    (``lengths.drawn_lengths``); else fixed-length requests at the printed means."""
    conc = w.get("max_concurrency")
    if w.get("input_lens"):
        ins = np.asarray(w["input_lens"], dtype=np.int64)
        outs = np.maximum(np.asarray(w["output_lens"], dtype=np.int64), 1)
        return Workload(name="calibration", arrival_s=np.zeros(len(ins)), prompt_tokens=ins,
                        output_tokens=outs, closed_loop_concurrency=conc)
    n = w.get("num_prompts") or 10 * int(conc or 1)
    if w.get("dataset") == "sharegpt":
        return _sharegpt_workload(w, int(n), conc)
    drawn = drawn_lengths(w, int(n))
    if drawn is not None:
        return Workload(name="calibration", arrival_s=np.zeros(int(n)), prompt_tokens=drawn[0],
                        output_tokens=drawn[1], closed_loop_concurrency=conc)
    return build_workload(WorkloadArgs(
        num_prompts=int(n), random_input_len=max(1, round(w["mean_input_len"])),
        random_output_len=max(1, round(w["mean_output_len"])), max_concurrency=conc))


def _sharegpt_workload(w: Mapping[str, Any], n: int, conc: int | None) -> Workload:
    """The N requests `vllm bench serve --dataset-name sharegpt` sends (the bundled first-turn
    sampling, in vLLM's order), each length scaled so the means are the printed ones: the same
    conversations, counted by the run's own tokenizer (and outputs cut at EOS on average)."""
    trace = load_trace("sharegpt")
    ins = _scaled(trace.prompt_tokens[:n], float(w["mean_input_len"]))
    outs = _scaled(trace.output_tokens[:n], float(w["mean_output_len"]))
    return Workload(name="calibration", arrival_s=np.zeros(len(ins)), prompt_tokens=ins,
                    output_tokens=outs, closed_loop_concurrency=conc)


def _scaled(lengths: np.ndarray, mean: float) -> np.ndarray:
    factor = mean / float(lengths.mean())
    return np.maximum(np.rint(lengths * factor), 1).astype(np.int64)


def serving_replay(model_id: str, gpu_id: str, engine: EngineConfig,
                   workload: Workload, resolved: ResolvedDeployment | None = None,
                   scheduler: str = "vllm") -> Replay:
    """Record ``workload`` served with ``engine`` once (default profile) under ``scheduler``'s
    rules (vllm, or sglang: ``engines.engine_limits``); ``resolved``: that deployment's flags
    already resolved (None: resolved here)."""
    from kvplan.analysis.calibration.engines import engine_limits
    from kvplan.analysis.serving import scheduler_limits
    from kvplan.costs.memory.plan import plan_resolved
    from kvplan.sim.blocks import kv_shape_from_groups
    from kvplan.sim.simulator import simulate
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    res = resolved or resolve(load_model(model_id), load_gpu(gpu_id), engine)
    model, hw = res.model, res.gpu
    plan = plan_resolved(res)
    limits = engine_limits(scheduler, scheduler_limits(plan.settings, engine), hw, engine)

    def run(timer: Any, fast: bool) -> Any:
        return simulate(workload, timer=timer, num_blocks=plan.num_blocks,
                        block_size=plan.block_size, engine=engine,
                        kv=kv_shape_from_groups(plan.groups, plan.block_size), limits=limits,
                        max_model_len=plan.settings.max_model_len, fast=fast)

    return record(run, StepCostModel(model, hw, engine, resolved=res), workload)


def _static_predict(timer: StepCostModel, shape: RequestShape,
                    budget: int | None) -> Callable[[Profile], dict[str, float]]:
    def predict(profile: Profile) -> dict[str, float]:
        r = static_batch_latency(timer.with_profile(profile), shape,
                                 max_num_batched_tokens=budget)
        return {"ttft_s": r.ttft_s, "tpot_s": r.tpot_s or r.ttft_s, "e2e_s": r.e2e_s,
                "output_throughput_tok_s": r.output_throughput_tok_s}
    return predict


def _offline(replay: Replay) -> Callable[[Profile], dict[str, float]]:
    """An offline run's metrics: the replay without the API server's path (no client)."""
    def predict(profile: Profile) -> dict[str, float]:
        return replay.metrics(replace(profile, api_request_s=0.0, api_prompt_token_s=0.0,
                                      api_admission_s=0.0))
    return predict


def _point(p: Mapping[str, Any]) -> CalPoint:
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    engine = _engine(p)
    model = load_model(p["model_config"])
    if p.get("weight_block_size"):  # the checkpoint's block-scaled fp8 on a bf16 config
        rows, cols = (int(x) for x in p["weight_block_size"])
        model = replace(model, weight_block_size=(rows, cols))
    res = resolve(model, load_gpu(p["gpu"]), engine)
    w = p["workload"]
    if w["mode"] not in MODES:
        raise InputError(f"{p['id']}: workload.mode {w['mode']!r} is none of {', '.join(MODES)}")
    if w["mode"] == "static_batch":
        timer = StepCostModel(model, res.gpu, engine, resolved=res)
        shape = RequestShape(batch=int(w["batch_size"]), prompt_tokens=int(w["input_len"]),
                             output_tokens=int(w["output_len"]))
        predict = _static_predict(timer, shape, engine.max_num_batched_tokens)
        exact = None
    else:
        work = _workload(w)
        key = engine_key(p["engine"])
        replay = serving_replay(p["model_config"], p["gpu"], engine, work, res, key)
        predict = replay.metrics if w["mode"] == "serving" else _offline(replay)
        # simulate_resolved runs vLLM's scheduler: another engine's run has only its replay
        exact = _simulated(res, work) if w["mode"] == "serving" and key == "vllm" else None
    return CalPoint(id=p["id"], source=p["source"], family=p["family"], model=p["model_config"],
                    gpu=res.gpu.id, tp=int(p["tp"]),
                    precision=res.compute_precision, measured=_measured(p),
                    predict=predict, engine=engine_key(p["engine"]),
                    served=w["mode"] == "serving",
                    simulate=exact, page=str(p.get("url") or "").split("#", 1)[0],
                    floors=point_floors(model, res.gpu, engine, raw_load(p), res))


def raw_load(p: Mapping[str, Any]) -> Load:
    """A stored point's requests as the floors see them (no simulation)."""
    w = p["workload"]
    if w["mode"] == "static_batch":
        return static_load(int(w["batch_size"]), int(w["input_len"]), int(w["output_len"]))
    return workload_load(_workload(w))


def workload_load(work: Workload) -> Load:
    """A workload's requests as the floors see them (served, at its client's concurrency)."""
    return served_load(tuple(int(x) for x in work.prompt_tokens),
                       tuple(int(x) for x in work.output_tokens), work.closed_loop_concurrency)


def shape_floors(res: ResolvedDeployment, shape: RequestShape) -> Floors:
    """A static batch's physical limits on its resolved deployment."""
    load = static_load(shape.batch, shape.prompt_tokens, shape.output_tokens)
    return point_floors(res.model, res.gpu, res.engine, load, res)


def _simulated(res: ResolvedDeployment,
               work: Workload) -> Callable[[Profile], dict[str, float]]:
    """The served run simulated again under a profile: the replay's metrics, exactly."""
    def simulate(profile: Profile) -> dict[str, float]:
        from kvplan.analysis.serving import simulate_resolved

        r = simulate_resolved(res, work, profile=profile).result
        done = r.finished
        sent, out = r.sent_s[done], r.output_tokens[done].astype(np.int64)
        ttft, e2e = r.first_token_s[done] - sent, r.finish_s[done] - sent
        many = out > 1
        gaps = int((out - 1).sum())
        return {"ttft_s": float(ttft.mean()),
                "tpot_s": float(((e2e - ttft)[many] / (out[many] - 1)).mean())
                if many.any() else 0.0,
                "itl_s": float((e2e - ttft).sum() / gaps) if gaps else 0.0,
                "e2e_s": float(e2e.mean()),
                "output_throughput_tok_s": float(out.sum() / r.finish_s[done].max())}
    return simulate


def _trtllm_points() -> list[CalPoint]:
    """The TensorRT-LLM static-batch points of latency_calibration.json (source nvidia-trtllm)."""
    from kvplan.analysis.calibration.measurements import _from_json

    text = _data_text("latency_calibration.json")
    out = []
    for m in _from_json(jsonread.loads(text), text, "latency_calibration.json", _defaults()):
        from kvplan.specs.catalog import load_model
        from kvplan.specs.hardware import load_gpu

        model, hw = load_model(m.model), load_gpu(m.gpu)
        res = resolve(model, hw, m.engine)
        timer = StepCostModel(model, hw, m.engine, resolved=res)
        out.append(CalPoint(id=m.id, source="nvidia-trtllm", family="dense", model=m.model,
                            gpu=hw.id, tp=m.engine.tensor_parallel_size,
                            precision=res.compute_precision, measured=m.measured,
                            predict=_static_predict(timer, m.shape,
                                                    m.engine.max_num_batched_tokens),
                            engine="trtllm", floors=shape_floors(res, m.shape)))
    return out


def _defaults() -> Any:
    from kvplan.analysis.calibration.measurements import Defaults

    return Defaults()


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationSet:
    """The points kvplan can price, and the ones it cannot (id -> why), never silently."""

    points: tuple[CalPoint, ...]
    skipped: dict[str, str]
    below_floor: tuple[BelowFloor, ...] = ()
    """Measured values faster than the datasheet allows: left out of ``points`` (a point
    with no value left is left out whole)."""
    set_aside: tuple[SetAside, ...] = ()
    """Values of a metric whose page has one below its floor (``floor_check.same_method``)."""


@cache
def calibration_set() -> CalibrationSet:
    """Every bundled point, ready to predict (simulates each serving run once: seconds).

    A point whose deployment kvplan's memory plan rejects (e.g. a 32K-token prompt on a GPU
    whose KV budget kvplan puts below it) is listed in ``skipped`` with the reason."""
    from kvplan.errors import KvplanError

    points, skipped = list(_trtllm_points()), {}
    for p in raw_points():
        try:
            points.append(_point(p))
        except KvplanError as exc:
            skipped[p["id"]] = str(exc)
    kept, dropped = drop_below_floor(points)
    kept, aside = same_method(kept, dropped, {p.id: p.page for p in points})
    return CalibrationSet(points=tuple(kept), skipped=skipped, below_floor=tuple(dropped),
                          set_aside=tuple(aside))


def drop_below_floor(points: Sequence[CalPoint]) -> tuple[list[CalPoint], list[BelowFloor]]:
    """``points`` without their values that beat a physical floor, and those values."""
    return drop_values(points, lambda p: p.floors)


def calibration_points() -> tuple[CalPoint, ...]:
    """The priceable points of the bundled set."""
    return calibration_set().points
