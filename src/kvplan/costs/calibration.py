"""Calibration: read measured latency points, fit efficiency profiles, save and load them."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from kvplan.costs.latency import RequestShape, static_batch_latency
from kvplan.costs.roofline import Profile, StepCostModel, compute_precision
from kvplan.errors import ConfigError, KvplanError, TraceError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

PROFILE_SCHEMA = "kvplan-profile/1"
METRICS = ("ttft_s", "tpot_s", "e2e_s", "output_throughput_tok_s")
_16BIT = frozenset({"float16", "bfloat16"})

# ---------------------------------------------------------------- profile sets


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileSet:
    """Profiles keyed by (GPU id, compute precision), with a fallback for anything else."""

    profiles: tuple[Profile, ...] = ()
    default: Profile = field(default_factory=Profile)
    fitted_on: str = ""

    def pick(self, gpu_id: str, precision: str) -> Profile:
        """The profile for a GPU at a compute precision, by the first rule that matches:

        1. exact (GPU, precision);
        2. the same GPU at the other 16-bit type (fp16 and bf16 run the same tensor cores);
        3. the same GPU fitted at another precision: its hardware factors (bandwidth_eff,
           comm_eff, the overheads) with the default compute_eff, since the GEMM efficiency
           belongs to the precision's kernels, not to the GPU (16-bit fits preferred);
        4. the default.
        """
        gpu = gpu_id.lower()
        same_gpu = [p for p in self.profiles if p.gpu.lower() == gpu]
        for p in same_gpu:
            if p.precision == precision:
                return p
        for p in same_gpu:
            if {p.precision, precision} <= _16BIT:
                return p
        if not same_gpu:
            return self.default
        donor = min(same_gpu, key=lambda p: (p.precision not in _16BIT, p.precision))
        return replace(donor, precision=precision, compute_eff=self.default.compute_eff)


def profiles_to_dict(ps: ProfileSet) -> dict[str, Any]:
    """JSON-ready form of a profile set (what ``kvplan calibrate --out`` writes)."""
    return {"schema": PROFILE_SCHEMA, "fitted_on": ps.fitted_on,
            "default": asdict(ps.default), "profiles": [asdict(p) for p in ps.profiles]}


def profiles_from_dict(data: Any, *, file: str) -> ProfileSet:
    """Parse a profile JSON object; ConfigError names the file and the bad entry."""
    if not isinstance(data, Mapping) or data.get("schema") != PROFILE_SCHEMA:
        raise ConfigError(f"is not a kvplan profile (expected schema {PROFILE_SCHEMA!r}); "
                          "write one with 'kvplan calibrate ... --out FILE'", file=file)
    names = {f.name for f in fields(Profile)}

    def one(entry: Any, where: str) -> Profile:
        if not isinstance(entry, Mapping) or set(entry) - names:
            raise ConfigError(f"{where} must be an object with keys {sorted(names)}", file=file)
        try:
            return Profile(**entry)
        except (TypeError, KvplanError) as exc:
            raise ConfigError(f"{where}: {exc}", file=file) from None

    entries = data.get("profiles") or []
    return ProfileSet(profiles=tuple(one(e, f"profiles[{i}]") for i, e in enumerate(entries)),
                      default=one(data.get("default") or {}, "default"),
                      fitted_on=str(data.get("fitted_on", "")))


def load_profiles(path: str | Path) -> ProfileSet:
    """Read a profile file written by ``kvplan calibrate --out``."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the profile ({exc.__class__.__name__})",
                          file=str(p)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"is not valid JSON (line {exc.lineno}, column {exc.colno})",
                          file=str(p)) from None
    return profiles_from_dict(data, file=str(p))


def save_profiles(ps: ProfileSet, path: str | Path) -> None:
    """Write a profile set as JSON."""
    Path(path).write_text(json.dumps(profiles_to_dict(ps), indent=2) + "\n", encoding="utf-8")


@cache
def default_profiles() -> ProfileSet:
    """The bundled profile set (fitted on the TensorRT-LLM static-batch points)."""
    text = (resources.files("kvplan") / "data" / "profiles" / "default.json").read_text("utf-8")
    return profiles_from_dict(json.loads(text), file="data/profiles/default.json")


def profile_for(model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig,
                path: str | None = None) -> Profile:
    """The profile for this GPU and compute precision, from ``path`` or the bundled set."""
    profiles = load_profiles(path) if path else default_profiles()
    return profiles.pick(hardware.id, compute_precision(model, engine))


# ---------------------------------------------------------------- measurements


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured static-batch shape on one deployment, and what was measured (seconds)."""

    id: str
    where: str
    """file:line it came from."""
    model: str
    gpu: str
    engine: EngineConfig
    shape: RequestShape
    measured: dict[str, float]
    """Metric name (one of METRICS) -> measured value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Defaults:
    """Fill-ins for measurement files that lack a field (vllm bench latency JSON has no shape)."""

    model: str | None = None
    gpu: str | None = None
    batch: int | None = None
    prompt: int | None = None
    output: int | None = None
    tensor_parallel_size: int = 1
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"


def read_measurements(path: str | Path, defaults: Defaults | None = None) -> list[Measurement]:
    """Measured points from a CSV, a simple JSON, kvplan's calibration JSON, or the JSON of
    ``vllm bench serve --save-result`` / ``vllm bench latency --output-json``."""
    p, d = Path(path), defaults or Defaults()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{p}: cannot read the file ({exc.__class__.__name__})") from None
    if p.suffix.lower() == ".csv":
        return _from_csv(text, str(p), d)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}:{exc.lineno}: not valid JSON (column {exc.colno}: {exc.msg})") \
            from None
    return _from_json(data, text, str(p), d)


def _from_json(data: Any, text: str, file: str, d: Defaults) -> list[Measurement]:
    if isinstance(data, Mapping) and "avg_latency" in data:
        return [_point({"e2e_s": data["avg_latency"]}, f"{file}:1", d, "vllm-bench-latency")]
    if isinstance(data, Mapping) and "mean_ttft_ms" in data:
        return [_from_bench_serve(data, f"{file}:1", d)]
    rows = data.get("points") if isinstance(data, Mapping) else data
    if not isinstance(rows, list):
        raise TraceError(f"{file}:1: expected a list of points or an object with 'points'")
    out = []
    for i, row in enumerate(rows):
        where = f"{file}:{_line_of(text, row, i)}"
        if not isinstance(row, Mapping):
            raise TraceError(f"{where}: point {i} is not an object")
        if "workload" in row:
            if str(row["workload"].get("mode", "")).startswith("static_batch"):
                out.append(_from_calibration_point(row, where, d))
        else:
            out.append(_point(row, where, d, str(row.get("id", f"point-{i}"))))
    return out


def _line_of(text: str, row: Any, index: int) -> int:
    """Best-effort line of a point in its JSON file (its id's line), for error messages."""
    ident = row.get("id") if isinstance(row, Mapping) else None
    if ident is not None:
        at = text.find(json.dumps(ident))
        if at >= 0:
            return text.count("\n", 0, at) + 1
    return index + 1


def _from_csv(text: str, file: str, d: Defaults) -> list[Measurement]:
    reader = csv.DictReader(text.splitlines())
    out = []
    for row in reader:
        where = f"{file}:{reader.line_num}"
        if None in row or any(v is None for v in row.values()):
            width = len(reader.fieldnames or [])
            raise TraceError(f"{where}: wrong number of columns (the header has {width})")
        clean = {k.strip(): v.strip() for k, v in row.items() if v is not None and v.strip()}
        out.append(_point(clean, where, d, clean.get("id", f"line-{reader.line_num}")))
    if not out:
        raise TraceError(f"{file}:1: no measurement rows (need a header and at least one row)")
    return out


_MS_FIELDS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s"}
_S_FIELDS = {"ttft_s": "ttft_s", "tpot_s": "tpot_s", "e2e_s": "e2e_s",
             "output_throughput_tok_s": "output_throughput_tok_s",
             "output_throughput": "output_throughput_tok_s"}


def _point(row: Mapping[str, Any], where: str, d: Defaults, ident: str) -> Measurement:
    """A simple point: model, gpu, batch, prompt, output + any of the metric columns."""
    measured = {m: _num(row[k], k, where) / 1000 for k, m in _MS_FIELDS.items() if k in row}
    measured |= {m: _num(row[k], k, where) for k, m in _S_FIELDS.items() if k in row}
    if not measured:
        raise TraceError(f"{where}: no measured value; give ttft_ms, tpot_ms, e2e_ms or "
                         "output_throughput_tok_s")
    shape = _shape(row.get("batch", d.batch), row.get("prompt", d.prompt),
                   row.get("output", d.output), where)
    engine = _engine(row, where, d)
    model = _need(row.get("model", d.model), "model", where)
    gpu = _need(row.get("gpu", d.gpu), "gpu", where)
    return Measurement(id=ident, where=where, model=model, gpu=gpu, engine=engine, shape=shape,
                       measured=measured)


def _from_bench_serve(data: Mapping[str, Any], where: str, d: Defaults) -> Measurement:
    """``vllm bench serve --save-result``: mean TTFT/TPOT and output throughput; the batch is
    max_concurrency (else every prompt at once), lengths are the per-request means."""
    done = int(_num(data.get("completed") or data.get("num_prompts"), "completed", where))
    batch = data.get("max_concurrency") or done
    prompt = round(_num(data.get("total_input_tokens"), "total_input_tokens", where) / done)
    output = round(_num(data.get("total_output_tokens"), "total_output_tokens", where) / done)
    row = {"model": data.get("model_id"), "gpu": data.get("gpu"), "batch": batch,
           "prompt": prompt, "output": output, "ttft_ms": data["mean_ttft_ms"],
           "output_throughput_tok_s": data.get("output_throughput")}
    if data.get("mean_tpot_ms"):
        row["tpot_ms"] = data["mean_tpot_ms"]
    for key in ("tensor_parallel_size", "dtype", "quantization", "kv_cache_dtype"):
        if data.get(key) is not None:
            row[key] = data[key]
    return _point({k: v for k, v in row.items() if v is not None}, where, d, "vllm-bench-serve")


def _from_calibration_point(row: Mapping[str, Any], where: str, d: Defaults) -> Measurement:
    """A point of kvplan's bundled latency_calibration.json (TensorRT-LLM tables)."""
    w, m = row["workload"], row.get("metrics", {})
    precision = str(row.get("precision", "")).upper()
    fp8 = "FP8" in precision
    simple = {
        "model": row.get("model_config"), "gpu": row.get("gpu"),
        "batch": w.get("batch_size"), "prompt": w.get("input_len"), "output": w.get("output_len"),
        "tensor_parallel_size": row.get("tp", 1), "pipeline_parallel_size": row.get("pp", 1),
        "dtype": "float16" if "FP16" in precision else "auto",
        "quantization": "fp8" if fp8 else None, "kv_cache_dtype": "fp8" if fp8 else "auto",
    }
    if "ttft_ms" in m:
        simple["ttft_ms"] = m["ttft_ms"]
    if "output_throughput" in m:
        simple["output_throughput_tok_s"] = m["output_throughput"]
    clean = {k: v for k, v in simple.items() if v is not None}
    return _point(clean, where, d, str(row.get("id", where)))


def _engine(row: Mapping[str, Any], where: str, d: Defaults) -> EngineConfig:
    try:
        return EngineConfig(
            tensor_parallel_size=int(row.get("tensor_parallel_size", d.tensor_parallel_size)),
            pipeline_parallel_size=int(row.get("pipeline_parallel_size", 1)),
            dtype=str(row.get("dtype", d.dtype)),
            quantization=row.get("quantization", d.quantization) or None,
            kv_cache_dtype=str(row.get("kv_cache_dtype", d.kv_cache_dtype)),
            max_num_batched_tokens=int(row["max_num_batched_tokens"])
            if row.get("max_num_batched_tokens") else None,
        )
    except (ValueError, TypeError, KvplanError) as exc:
        raise TraceError(f"{where}: {exc}") from None


def _shape(batch: Any, prompt: Any, output: Any, where: str) -> RequestShape:
    try:
        return RequestShape(batch=int(_num(batch, "batch", where)),
                            prompt_tokens=int(_num(prompt, "prompt", where)),
                            output_tokens=int(_num(output, "output", where)))
    except KvplanError as exc:
        raise TraceError(f"{where}: {str(exc).removeprefix(where + ': ')}") from None


def _num(value: Any, name: str, where: str) -> float:
    if value is None:
        raise TraceError(f"{where}: missing '{name}' (give it in the file or as an option)")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TraceError(f"{where}: '{name}' must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise TraceError(f"{where}: '{name}' must be positive, got {value!r}")
    return number


def _need(value: Any, name: str, where: str) -> str:
    if not value:
        raise TraceError(f"{where}: missing '{name}' (give it in the file or as --{name})")
    return str(value)


# ---------------------------------------------------------------- fitting


@dataclass(frozen=True, slots=True, kw_only=True)
class PointError:
    """One measured metric against the fitted profile's prediction."""

    id: str
    gpu: str
    precision: str
    metric: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """Relative error, predicted / measured - 1."""
        return self.predicted / self.measured - 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationResult:
    """Fitted profiles and every point's error under them."""

    profiles: ProfileSet
    errors: tuple[PointError, ...]

    def median_abs_error(self, metric: str) -> float | None:
        """Median |error| of one metric over the points that measured it."""
        values = sorted(abs(e.error) for e in self.errors if e.metric == metric)
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


SOFT_L1_SCALE = 0.05
"""Log errors below ~5% count quadratically, larger ones linearly."""
FITTED = ("compute_eff", "bandwidth_eff", "prefill_overhead_s")
"""What a fit moves by default. ``step_overhead_s`` keeps its physical value: static batches
at large B cannot tell it from bandwidth_eff (the two trade along one valley); add it with
``names=FITTED + ("step_overhead_s",)`` when the points include small-batch TPOT."""
BOUNDS = {"compute_eff": (0.05, 0.95), "bandwidth_eff": (0.05, 0.95),
          "step_overhead_s": (0.0, 0.02), "prefill_overhead_s": (0.0, 0.02)}
"""No kernel sustains more than ~95% of a datasheet peak; a fit that wants more is compensating
for something the model lacks, so the bound keeps the factors physical. Overheads: 0-20 ms."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    point: Measurement
    timer: StepCostModel


def _prepare(points: Iterable[Measurement]) -> dict[tuple[str, str], list[_Prepared]]:
    """Build each point's step model once (the fit only swaps profiles) and group them."""
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    groups: dict[tuple[str, str], list[_Prepared]] = {}
    for pt in points:
        try:
            model, hw = load_model(pt.model), load_gpu(pt.gpu)
            timer = StepCostModel(model, hw, pt.engine)
        except KvplanError as exc:
            raise TraceError(f"{pt.where}: {exc}") from None
        key = (hw.id, compute_precision(model, pt.engine))
        groups.setdefault(key, []).append(_Prepared(pt, timer))
    return groups


def predict(prep: _Prepared, profile: Profile) -> dict[str, float]:
    """The metrics of one point under ``profile``."""
    result = static_batch_latency(prep.timer.with_profile(profile), prep.point.shape,
                                  max_num_batched_tokens=prep.point.engine.max_num_batched_tokens)
    return {"ttft_s": result.ttft_s, "tpot_s": result.tpot_s or result.ttft_s,
            "e2e_s": result.e2e_s, "output_throughput_tok_s": result.output_throughput_tok_s}


def _loss(group: list[_Prepared], profile: Profile) -> float:
    """Mean soft-L1 of the log error over every measured metric: quadratic near zero (smooth,
    so the search converges), linear for outliers (robust), scale-free."""
    errs = [math.sqrt(1.0 + (math.log(pred[m] / v) / SOFT_L1_SCALE) ** 2) - 1.0
            for prep in group for pred in (predict(prep, profile),)
            for m, v in prep.point.measured.items()]
    return sum(errs) / len(errs)


def _coordinate_search(loss: Callable[[Profile], float], start: Profile,
                       names: tuple[str, ...] = FITTED, rounds: int = 14,
                       grid: int = 9) -> Profile:
    """Bounded pattern search: a grid over each factor in turn (the window shrinking), then a
    stride along the round's net move, which follows the curved overhead/bandwidth valley."""
    best, best_loss = start, loss(start)
    width = {k: (BOUNDS[k][1] - BOUNDS[k][0]) / 2 for k in names}
    for _ in range(rounds):
        before = best
        for name in names:
            best, best_loss = _line_grid(loss, best, best_loss, name, width[name], grid)
        best, best_loss = _stride(loss, before, best, best_loss, names)
        width = {k: w / 1.7 for k, w in width.items()}
    return best


def _line_grid(loss: Callable[[Profile], float], best: Profile, best_loss: float, name: str,
               width: float, grid: int) -> tuple[Profile, float]:
    lo, hi = BOUNDS[name]
    centre = getattr(best, name)
    for i in range(grid):
        value = min(hi, max(lo, centre + width * (2 * i / (grid - 1) - 1)))
        trial = replace(best, **{name: value})
        trial_loss = loss(trial)
        if trial_loss < best_loss - 1e-12:
            best, best_loss = trial, trial_loss
    return best, best_loss


def _stride(loss: Callable[[Profile], float], before: Profile, best: Profile,
            best_loss: float, names: tuple[str, ...]) -> tuple[Profile, float]:
    """Keep moving along best - before (doubling) while the loss falls."""
    step = {k: getattr(best, k) - getattr(before, k) for k in names}
    for _ in range(8):
        moved = {k: min(BOUNDS[k][1], max(BOUNDS[k][0], getattr(best, k) + d))
                 for k, d in step.items()}
        trial = replace(best, **moved)
        trial_loss = loss(trial)
        if trial_loss >= best_loss - 1e-12:
            break
        best, best_loss = trial, trial_loss
        step = {k: 2 * d for k, d in step.items()}
    return best, best_loss


def fit_profiles(points: Iterable[Measurement], *, fitted_on: str = "",
                 start: Profile | None = None,
                 names: tuple[str, ...] = FITTED) -> CalibrationResult:
    """Fit ``names`` (default compute_eff, bandwidth_eff, prefill_overhead_s) per (GPU,
    precision) to the points, each within BOUNDS.

    Communication factors keep their physical defaults (single-GPU measurements cannot see
    them); so does step_overhead_s unless ``names`` includes it.
    """
    base = start or Profile()
    profiles, errors = [], []
    for (gpu, precision), group in sorted(_prepare(points).items()):
        seed = replace(base, gpu=gpu, precision=precision)
        fitted = _coordinate_search(lambda p, g=group: _loss(g, p), seed,  # type: ignore[misc]
                                    names)
        profiles.append(fitted)
        errors.extend(point_errors(group, fitted))
    return CalibrationResult(
        profiles=ProfileSet(profiles=tuple(profiles), default=base, fitted_on=fitted_on),
        errors=tuple(errors))


def point_errors(group: list[_Prepared], profile: Profile) -> list[PointError]:
    """Each measured metric of each point against its prediction under ``profile``."""
    out: list[PointError] = []
    for prep in group:
        pred = predict(prep, profile)
        out.extend(PointError(id=prep.point.id, gpu=profile.gpu, precision=profile.precision,
                              metric=m, measured=v, predicted=pred[m])
                   for m, v in prep.point.measured.items())
    return out


def leave_one_out(points: Iterable[Measurement], *, start: Profile | None = None,
                  names: tuple[str, ...] = FITTED) -> tuple[PointError, ...]:
    """Held-out errors: each point predicted by a fit on the other points of its group."""
    base = start or Profile()
    out: list[PointError] = []
    for (gpu, precision), group in sorted(_prepare(points).items()):
        seed = replace(base, gpu=gpu, precision=precision)
        for i, held in enumerate(group):
            rest = group[:i] + group[i + 1:]
            fitted = _coordinate_search(lambda p, g=rest: _loss(g, p), seed,  # type: ignore[misc]
                                        names)
            out.extend(point_errors([held], fitted))
    return tuple(out)


def evaluate(points: Iterable[Measurement], profiles: ProfileSet) -> CalibrationResult:
    """Errors of existing profiles on measured points (no fitting)."""
    errors = []
    for (gpu, precision), group in sorted(_prepare(points).items()):
        errors.extend(point_errors(group, replace(profiles.pick(gpu, precision), gpu=gpu,
                                                  precision=precision)))
    return CalibrationResult(profiles=profiles, errors=tuple(errors))
