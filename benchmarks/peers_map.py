"""The pure half of compare_peers.py: calibration points as both tools see their inputs, each
point mapped to aiconfigurator's estimate inputs, and the side-by-side error arithmetic.

Nothing here imports aiconfigurator (the tests run without it): what aiconfigurator knows
(its model ids, the engines it has tables for on each system) comes in as an ``AicCaps``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

METRIC_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "output_throughput_tok_s": "throughput",
                "e2e_s": "E2E"}
SYSTEMS = {"H100-SXM-80GB": "h100_sxm", "H100-PCIe-80GB": "h100_pcie",
           "H200-SXM-141GB": "h200_sxm", "B200-SXM-180GB": "b200_sxm",
           "A100-80GB-SXM": "a100_sxm", "L40S": "l40s", "L4": "l4"}
"""kvplan GPU id -> aiconfigurator system (same part, same memory); others have none."""
BACKEND_RULES = ("vllm-first", "engine")
"""vllm-first: vLLM's tables where the system has them, else TensorRT-LLM's; engine: the
measured engine's tables where the system has them, else vllm-first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerPoint:
    """One calibration point: what was served, how, and what was measured (SI units)."""

    id: str
    source: str
    family: str
    engine: str
    """Measured engine: vllm, sglang or trtllm."""
    model: str
    """kvplan catalog id (Hugging Face style, 'org/name')."""
    gpu: str
    tp: int
    ep: int
    moe: bool
    quantization: str | None
    kv_cache_dtype: str
    dtype: str
    static: bool
    """A fixed batch run once (``vllm bench latency``, gptSessionBenchmark); else served."""
    batch: int
    """Static: the batch size; served: the concurrency (``--max-concurrency``, or for an
    offline run the prompts vLLM can hold at once, min(num_prompts, max_num_seqs))."""
    isl: int
    osl: int
    max_num_batched_tokens: int
    measured: dict[str, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class AicCaps:
    """What an installed aiconfigurator can price."""

    models: frozenset[str]
    """Hugging Face ids it ships configs for."""
    backends: Mapping[str, tuple[str, ...]]
    """System -> the engines it has perf tables for there."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AicInput:
    """The arguments of one ``aiconfigurator.cli.api.cli_estimate`` call."""

    model: str
    config_from_kvplan: bool
    """True: aiconfigurator ships no config for the model; it reads kvplan's bundled
    config.json (``model`` is then kvplan's catalog id)."""
    system: str
    backend: str
    mode: str
    """static (one batch: prefill then decode) or agg (its continuous-batching estimate at a
    fixed concurrency; it has no request queue)."""
    isl: int
    osl: int
    batch_size: int
    ctx_tokens: int | None
    tp: int
    moe_tp: int | None
    moe_ep: int | None
    gemm_quant: str | None
    moe_quant: str | None
    kv_quant: str | None
    notes: tuple[str, ...] = ()

    def kwargs(self) -> dict[str, Any]:
        """cli_estimate's keyword arguments (all but the model path)."""
        kw: dict[str, Any] = {
            "system_name": self.system, "mode": self.mode, "backend_name": self.backend,
            "isl": self.isl, "osl": self.osl, "batch_size": self.batch_size,
            "tp_size": self.tp, "moe_tp_size": self.moe_tp, "moe_ep_size": self.moe_ep,
            "gemm_quant_mode": self.gemm_quant, "moe_quant_mode": self.moe_quant,
            "kvcache_quant_mode": self.kv_quant}
        if self.ctx_tokens is not None:
            kw["ctx_tokens"] = self.ctx_tokens
        return kw


def _mean_len(w: Mapping[str, Any], which: str) -> int:
    lens = w.get(f"{which}_lens")
    value = sum(lens) / len(lens) if lens else float(w[f"mean_{which}_len"])
    return max(1, round(value))


def public_point(p: Mapping[str, Any]) -> PeerPoint:
    """A point of public_calibration.json, with vLLM's batch limits for its GPU filled."""
    from kvplan.analysis.calibration.public_set import _engine, _measured, engine_key
    from kvplan.costs.memory.vllm_defaults import default_batch_limits
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    engine, model, hw = _engine(p), load_model(p["model_config"]), load_gpu(p["gpu"])
    tokens, seqs = default_batch_limits(hw)
    w = p["workload"]
    static = w["mode"] == "static_batch"
    if static:
        batch, isl, osl = int(w["batch_size"]), int(w["input_len"]), int(w["output_len"])
    else:
        conc = w.get("max_concurrency")
        n = w.get("num_prompts") or len(w.get("input_lens") or ()) or 10 * int(conc or 1)
        batch = min(int(conc or n), int(n), engine.max_num_seqs or seqs)
        isl, osl = _mean_len(w, "input"), _mean_len(w, "output")
    return PeerPoint(
        id=p["id"], source=p["source"], family=p["family"], engine=engine_key(p["engine"]),
        model=model.name, gpu=hw.id, tp=engine.tensor_parallel_size, ep=int(p.get("ep") or 1),
        moe=model.moe is not None, quantization=engine.quantization,
        kv_cache_dtype=engine.kv_cache_dtype, dtype=engine.dtype, static=static, batch=batch,
        isl=isl, osl=osl, max_num_batched_tokens=engine.max_num_batched_tokens or tokens,
        measured=_measured(p))


def trtllm_point(m: Any) -> PeerPoint:
    """A static-batch point of latency_calibration.json (a ``costs.measurements`` point)."""
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    model, hw = load_model(m.model), load_gpu(m.gpu)
    e = m.engine
    return PeerPoint(
        id=m.id, source="nvidia-trtllm", family="dense", engine="trtllm", model=model.name,
        gpu=hw.id, tp=e.tensor_parallel_size, ep=1, moe=model.moe is not None,
        quantization=e.quantization, kv_cache_dtype=e.kv_cache_dtype, dtype=e.dtype,
        static=True, batch=m.shape.batch, isl=m.shape.prompt_tokens, osl=m.shape.output_tokens,
        max_num_batched_tokens=e.max_num_batched_tokens or m.shape.prompt_tokens,
        measured=dict(m.measured))


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerSet:
    points: tuple[PeerPoint, ...]
    outside: dict[str, str]
    """Points of the data files that are not calibration points (id -> why)."""


def peer_points(sources: Sequence[str] = ()) -> PeerSet:
    """Every calibration point of the bundled files (of ``sources`` if given), in the order
    of kvplan's calibration set: the TensorRT-LLM static batches, then the public points."""
    from kvplan.analysis.calibration.measurements import _from_json
    from kvplan.analysis.calibration.public_set import _data_text, _defaults, raw_points

    text = _data_text("latency_calibration.json")
    data = json.loads(text)
    static = {m.id: m for m in _from_json(data, text, "latency_calibration.json", _defaults())}
    points = [trtllm_point(m) for m in static.values()]
    outside = {r["id"]: f"latency_calibration.json {r['workload']['mode'].split()[0]}: not "
               "a calibration point (calibration_set reads its static batches only)"
               for r in data["points"] if r["id"] not in static}
    points += [public_point(p) for p in raw_points()]
    keep = [p for p in points if not sources or p.source in sources]
    return PeerSet(points=tuple(keep), outside={} if sources else outside)


def aic_model(model: str, known: Iterable[str]) -> str | None:
    """aiconfigurator's id for a kvplan model id: the same id (case-insensitive), else the
    one variant of it by kvplan's catalog rule (meta-llama/Llama-3.1-8B is its
    meta-llama/Meta-Llama-3.1-8B; -FP8 or other weights never match)."""
    from kvplan.specs.catalog import variant_key

    ids = sorted(known)
    exact = [m for m in ids if m.lower() == model.lower()]
    if exact:
        return exact[0]
    hits = [m for m in ids if variant_key(m) == variant_key(model)]
    return hits[0] if len(hits) == 1 else None


def pick_backend(p: PeerPoint, available: Sequence[str], rule: str) -> str | None:
    """The engine whose tables price the point (see BACKEND_RULES); None when none has any."""
    if rule == "engine" and p.engine in available:
        return p.engine
    for backend in ("vllm", "trtllm"):
        if backend in available:
            return backend
    return None


def _quant(p: PeerPoint) -> tuple[str | None, str | None, str | None, tuple[str, ...]]:
    """(gemm, moe, kv) quant modes; None lets aiconfigurator read the checkpoint's own."""
    notes: list[str] = []
    gemm = moe = None
    if p.quantization == "fp8":
        gemm, moe = "fp8", ("fp8" if p.moe else None)
    elif p.quantization is not None:
        notes.append(f"--quantization {p.quantization} left to the checkpoint's config")
    elif p.dtype == "float16":
        gemm = "bfloat16"
        notes.append("fp16 priced as bf16 (same tensor-core rate; it has no fp16 tables)")
    kv = "fp8" if p.kv_cache_dtype.startswith("fp8") else None
    return gemm, moe, kv, tuple(notes)


def to_aic(p: PeerPoint, caps: AicCaps, *, rule: str = "vllm-first",
           mode: str = "auto") -> AicInput | str:
    """The aiconfigurator inputs for a point, or why it cannot express it.

    ``mode`` auto: static batches run its ``static`` estimate, served runs its ``agg``
    estimate at the point's concurrency with a prefill budget of min(ISL, the engine's
    max_num_batched_tokens) (one prompt per mixed step, chunked past the budget); ``static``
    prices every point as one static batch of that size."""
    system = SYSTEMS.get(p.gpu)
    if system is None:
        return f"no aiconfigurator system for {p.gpu}"
    backend = pick_backend(p, caps.backends.get(system, ()), rule)
    if backend is None:
        return f"no vLLM or TensorRT-LLM perf tables for {system}"
    model = aic_model(p.model, caps.models)
    static = p.static or mode == "static"
    gemm, moe_q, kv, notes = _quant(p)
    if not p.static:
        notes += ("served run priced at a fixed concurrency: no request queue",)
    if backend != p.engine:
        notes += (f"measured on {p.engine}, priced with {backend}'s tables",)
    return AicInput(
        model=model or p.model, config_from_kvplan=model is None, system=system,
        backend=backend, mode="static" if static else "agg", isl=p.isl, osl=p.osl,
        batch_size=p.batch,
        ctx_tokens=None if static else min(p.isl, p.max_num_batched_tokens), tp=p.tp,
        moe_tp=p.tp // p.ep if p.moe else None, moe_ep=p.ep if p.moe else None,
        gemm_quant=gemm, moe_quant=moe_q, kv_quant=kv, notes=notes)


def aic_metrics(raw: Mapping[str, Any]) -> dict[str, float]:
    """An estimate's result dict (ms, tokens/s) as kvplan's metrics (s, tokens/s)."""
    out = {"ttft_s": float(raw["ttft"]) / 1e3,
           "e2e_s": float(raw["request_latency"]) / 1e3,
           "output_throughput_tok_s": float(raw["tokens/s"])}
    if float(raw.get("tpot") or 0.0) > 0:
        out["tpot_s"] = float(raw["tpot"]) / 1e3
    return out


# ---------------------------------------------------------------- the arithmetic


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    """One measured metric of one point and each tool's prediction of it."""

    id: str
    source: str
    family: str
    metric: str
    measured: float
    aic: float
    kvplan: float
    kvplan_held_out: float | None = None

    def error(self, predicted: float) -> float:
        """predicted / measured - 1."""
        return predicted / self.measured - 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """Median |predicted / measured - 1| of both tools on the same values."""

    family: str
    metric: str
    n: int
    aic: float
    kvplan: float
    kvplan_held_out: float | None


def pairs_for(points: Iterable[PeerPoint], aic: Mapping[str, Mapping[str, float]],
              kvplan: Mapping[str, Mapping[str, float]],
              held: Mapping[tuple[str, str], float] | None = None) -> list[Pair]:
    """Every measured metric that both tools predict (point id -> metric -> value)."""
    out = []
    for p in points:
        a, k = aic.get(p.id, {}), kvplan.get(p.id, {})
        for metric, value in p.measured.items():
            if metric in a and metric in k:
                h = None if held is None else held.get((p.id, metric))
                out.append(Pair(id=p.id, source=p.source, family=p.family, metric=metric,
                                measured=value, aic=a[metric], kvplan=k[metric],
                                kvplan_held_out=h))
    return out


def _med(values: Sequence[float]) -> float:
    return median(abs(v) for v in values)


def side_by_side(pairs: Sequence[Pair]) -> list[Row]:
    """Rows per (family, metric) and an 'all' row per family and overall."""
    groups: dict[tuple[str, str], list[Pair]] = {}
    for r in pairs:
        for key in ((r.family, METRIC_NAMES.get(r.metric, r.metric)), (r.family, "all"),
                    ("all", "all")):
            groups.setdefault(key, []).append(r)
    order = [*METRIC_NAMES.values(), "all"]

    def place(item: tuple[tuple[str, str], list[Pair]]) -> tuple[bool, str, int]:
        (family, metric), _ = item
        return family == "all", family, order.index(metric) if metric in order else -1

    rows = []
    for (family, metric), rs in sorted(groups.items(), key=place):
        held = [r.error(r.kvplan_held_out) for r in rs if r.kvplan_held_out is not None]
        rows.append(Row(family=family, metric=metric, n=len(rs),
                        aic=_med([r.error(r.aic) for r in rs]),
                        kvplan=_med([r.error(r.kvplan) for r in rs]),
                        kvplan_held_out=_med(held) if len(held) == len(rs) else None))
    return rows


def reasons(failed: Mapping[str, str]) -> list[tuple[str, int]]:
    """Why points could not be priced: each distinct reason with its count, most first."""
    counts: dict[str, int] = {}
    for why in failed.values():
        counts[why] = counts.get(why, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
