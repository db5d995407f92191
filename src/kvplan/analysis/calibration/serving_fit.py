"""`kvplan calibrate` on serving runs: read `vllm bench serve` results, replay each run's
workload in the simulator and fit the profile so the simulated TTFT, TPOT, ITL and output
throughput match; refuse fits that cannot be trusted.

Inputs: ``vllm bench serve --save-result`` JSON (kvplan simulate --save-result writes the same
keys) and CSV sweeps with one run per row (``max_concurrency`` and/or ``request_rate``
columns). A run with request rate inf (without ``--max-concurrency``, or at 1) is simulated
once and re-priced per trial profile (``analysis.replay``); a finite-rate run, or one at a
concurrency above 1 (where the API path's delay moves requests between steps), is simulated
again for every trial. `vllm bench latency` files stay static-batch points.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from kvplan import input_file, jsonread
from kvplan.analysis.calibration.floors import point_floors
from kvplan.analysis.calibration.measurement_checks import on_off
from kvplan.analysis.calibration.measurements import ENGINE_KEYS, Defaults
from kvplan.analysis.calibration.public_set import CalPoint, serving_replay, workload_load
from kvplan.analysis.calibration.separability import separability_problems
from kvplan.costs.memory.resolved import ResolvedDeployment, resolve
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.profiles import ProfileSet
from kvplan.errors import KvplanError, TraceError, located
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig

SERVING_METRICS = {"mean_ttft_ms": ("ttft_s", 1e-3), "mean_tpot_ms": ("tpot_s", 1e-3),
                   "mean_itl_ms": ("itl_s", 1e-3),
                   "output_throughput": ("output_throughput_tok_s", 1.0)}
USER_FITTED = ("step_overhead_s", "request_overhead_s", "api_request_s")
"""What a user fit moves by default (per GPU and precision): engine overheads only, kernels
stay the measured tables'; the rest stays bundled (the API
path's per-prompt-token cost too: separating it from the fixed part needs runs of very
different prompt lengths)."""
USER_BOUNDS = {"step_overhead_s": (0.0, 20e-3), "prefill_overhead_s": (0.0, 50e-3),
               "request_overhead_s": (0.0, 500e-6), "layer_overhead_s": (0.0, 200e-6),
               "moe_layer_overhead_s": (0.0, 1e-3), "api_request_s": (0.0, 200e-3)}
MAX_MEDIAN_ERROR = 0.20
"""A fit whose median |error| stays above this is refused (unless --force)."""


class CalibrationRefused(KvplanError):
    """The fit cannot be trusted (pinned, underdetermined or far off); nothing was written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRun:
    """One measured serving run: deployment, workload, measured means (SI units)."""

    id: str
    where: str
    model: str
    gpu: str
    engine: EngineConfig
    num_prompts: int
    input_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    request_rate: float | None
    """None = inf (every prompt at t = 0)."""
    burstiness: float
    max_concurrency: int | None
    measured: dict[str, float]


def is_serving_file(path: str | Path) -> bool:
    """A `vllm bench serve` result JSON, or a CSV with a concurrency / rate column."""
    p = Path(path)
    try:
        text = input_file.read_text(p, "utf-8-sig")
    except OSError:
        return False  # read_measurements then says why
    if p.suffix.lower() == ".csv":
        header = text.splitlines()[0] if text else ""
        cols = {c.strip() for c in header.split(",")}
        return bool(cols & {"max_concurrency", "request_rate"})
    try:
        data = jsonread.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(data, Mapping) and "mean_ttft_ms" in data


def read_serving(path: str | Path, d: Defaults) -> list[ServingRun]:
    p = Path(path)
    try:
        text = input_file.read_text(p, "utf-8-sig")
    except OSError as exc:
        raise TraceError(f"{p}: cannot read the file ({input_file.reason(exc)})") from None
    if p.suffix.lower() != ".csv":
        try:
            return [_run(jsonread.loads(text), f"{p}:1", d, p.name)]
        except json.JSONDecodeError as exc:
            raise TraceError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    reader = csv.DictReader(text.splitlines())
    try:
        if (twice := input_file.repeated_column(reader.fieldnames)) is not None:
            raise TraceError(f"{p}:1: the header names column '{twice}' twice; keep one")
        return [_run({k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()},
                     f"{p}:{reader.line_num}", d, f"{p.name}:{reader.line_num}")
                for row in reader]
    except csv.Error as exc:  # a field over csv's 131,072-character limit
        raise TraceError(f"{p}:{reader.line_num + 1}: not a readable CSV row ({exc})") \
            from None


def _num(row: Mapping[str, Any], key: str, where: str, default: Any = None) -> float:
    value = row.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TraceError(f"{where}: '{key}' must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise TraceError(f"{where}: '{key}' must be positive, got {value!r}")
    return number


def _lens(row: Mapping[str, Any], where: str, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ins, outs, errs = row.get("input_lens"), row.get("output_lens"), row.get("errors")
    if (isinstance(ins, list) and isinstance(outs, list) and isinstance(errs, list)
            and len(ins) == len(outs) == len(errs) != n):  # vLLM lists failed requests too
        ok = [i for i, e in enumerate(errs) if not e]
        ins, outs = [ins[i] for i in ok], [outs[i] for i in ok]
    if isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs) == n:
        return tuple(int(x) for x in ins), tuple(max(1, int(x)) for x in outs)
    if "total_input_tokens" in row:
        i = round(_num(row, "total_input_tokens", where) / n)
        o = round(_num(row, "total_output_tokens", where) / n)
    else:
        i, o = round(_num(row, "input_len", where)), round(_num(row, "output_len", where))
    return (max(1, i),) * n, (max(1, o),) * n


def _validate(row: Mapping[str, Any], where: str, d: Defaults) -> None:
    """The static reader's checks on the same fields (whole counts, lengths within the
    model's context, sane ranges): the same one-line errors for a bad file."""
    from kvplan.analysis.calibration import measurements as ms

    if "mean_ttft_ms" in row and "completed" in row:
        _check(ms._from_bench_serve(row, where, d))
        return
    simple = {"model": row.get("model"), "gpu": row.get("gpu"),
              "batch": row.get("max_concurrency") or row.get("num_prompts"),
              "prompt": row.get("input_len"), "output": row.get("output_len"),
              "ttft_ms": row.get("mean_ttft_ms") or row.get("mean_tpot_ms") or 1}
    for key in ENGINE_KEYS:
        if row.get(key) not in (None, ""):
            simple[key] = row[key]
    _check(ms._point({k: v for k, v in simple.items() if v not in (None, "")}, where, d, "run"))


def _check(m: Any) -> None:
    """kvplan latency's rules for the deployment and one request (context, TP, stages)."""
    from kvplan.analysis.calibration.measurement_checks import check_point
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    try:
        check_point(load_model(m.model), load_gpu(m.gpu), m.engine, m.shape)
    except KvplanError as exc:
        raise TraceError(located(m.where, exc)) from None


def _run(row: Mapping[str, Any], where: str, d: Defaults, name: str) -> ServingRun:
    """One run; ``name`` is its id unless the row has one (a CSV row: file:line)."""
    _validate(row, where, d)
    n = int(_num(row, "completed", where, row.get("num_prompts")))
    ins, outs = _lens(row, where, n)
    rate = row.get("request_rate", "inf")
    if str(rate) == "trace":
        raise TraceError(f"{where}: request_rate 'trace': a trace replayed on its own arrival "
                         "times, which the file does not hold; calibrate on runs with a request "
                         "rate or --max-concurrency (kvplan simulate --request-rate R)")
    conc = row.get("max_concurrency")
    measured = {m: _num(row, k, where) * f for k, (m, f) in SERVING_METRICS.items()
                if row.get(k) not in (None, "", 0, 0.0)}
    if not measured:
        raise TraceError(f"{where}: no measured mean_ttft_ms, mean_tpot_ms, mean_itl_ms or "
                         "output_throughput")
    model, gpu = row.get("model_id") or row.get("model") or d.model, row.get("gpu") or d.gpu
    if not model or not gpu:
        raise TraceError(f"{where}: missing '{'model' if not model else 'gpu'}' (give it in "
                         "the file or as --model / --gpu)")
    return ServingRun(
        id=str(row.get("id") or name), where=where,
        model=str(model), gpu=str(gpu), engine=_engine(row, where, d), num_prompts=n,
        input_lens=ins, output_lens=outs,
        request_rate=None if str(rate) == "inf" else _num(row, "request_rate", where),
        burstiness=float(row.get("burstiness") or 1.0),
        max_concurrency=None if conc in (None, "", "None") else int(_num(row, "max_concurrency",
                                                                          where)),
        measured=measured)


def _engine(row: Mapping[str, Any], where: str, d: Defaults) -> EngineConfig:
    def opt(key: str) -> int | None:
        return int(_num(row, key, where)) if row.get(key) not in (None, "") else None

    try:
        return EngineConfig(
            tensor_parallel_size=int(row.get("tensor_parallel_size", d.tensor_parallel_size)),
            dtype=str(row.get("dtype", d.dtype)), kv_cache_dtype=str(row.get(
                "kv_cache_dtype", d.kv_cache_dtype)),
            quantization=row.get("quantization", d.quantization) or None,
            max_num_batched_tokens=opt("max_num_batched_tokens"),
            max_num_seqs=opt("max_num_seqs"), max_model_len=opt("max_model_len"),
            async_scheduling=on_off(row.get("async_scheduling", d.async_scheduling),
                                    "async_scheduling"))
    except (ValueError, TypeError, KvplanError) as exc:
        raise TraceError(located(where, exc)) from None


def run_workload(r: ServingRun, seed: int = 0) -> Workload:
    """The run's requests: its lengths, arrivals at t = 0 or Poisson/gamma at its rate."""
    n = r.num_prompts
    arrivals = np.zeros(n)
    if r.request_rate is not None:
        from kvplan.specs.requests.workload import gamma_arrivals

        arrivals = gamma_arrivals(n, r.request_rate, r.burstiness, np.random.default_rng(seed))
    return Workload(name=r.id, arrival_s=arrivals, prompt_tokens=np.asarray(r.input_lens),
                    output_tokens=np.asarray(r.output_lens),
                    closed_loop_concurrency=r.max_concurrency)


def to_point(r: ServingRun) -> CalPoint:
    """A calibration point predicting the run through the simulator."""
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    try:
        model, hw = load_model(r.model), load_gpu(r.gpu)
        res = resolve(model, hw, r.engine)
        work = run_workload(r)
        # a replay is exact for the API path only when no request waits on a slot or on the
        # API server's admission of another (rate inf, concurrency 1 or one prompt); the
        # rest are simulated again
        exact = work.is_offline and (r.max_concurrency == 1 or r.num_prompts == 1)
        predict: Callable[[Profile], dict[str, float]] = (
            serving_replay(r.model, hw.id, r.engine, work, res).metrics if exact
            else _resimulate(res, work))
    except KvplanError as exc:
        raise TraceError(located(r.where, exc)) from None
    family = "moe" if model.moe is not None else "dense"
    return CalPoint(id=r.id, source=r.where, family=family, model=model.name, gpu=hw.id,
                    tp=r.engine.tensor_parallel_size,
                    precision=res.compute_precision, measured=r.measured,
                    predict=predict, served=True,
                    floors=point_floors(model, hw, r.engine, workload_load(work), res))


def _resimulate(res: ResolvedDeployment,
                work: Workload) -> Callable[[Profile], dict[str, float]]:
    """Each profile the fit tries: the run simulated again (its flags resolved once)."""
    from kvplan.analysis.metrics import compute_metrics
    from kvplan.analysis.serving import simulate_resolved

    def predict(profile: Profile) -> dict[str, float]:
        run = simulate_resolved(res, work, profile=profile)
        m = compute_metrics(run.result, percentile_metrics=("ttft", "tpot", "itl"))
        return {"ttft_s": m.stats["ttft"].mean_ms / 1e3, "tpot_s": m.stats["tpot"].mean_ms / 1e3,
                "itl_s": m.stats["itl"].mean_ms / 1e3,
                "output_throughput_tok_s": m.output_throughput}
    return predict


# ---------------------------------------------------------------- the fit


@dataclass(frozen=True, slots=True, kw_only=True)
class UserFit:
    profiles: ProfileSet
    errors: tuple[tuple[str, str, str, float, float], ...]
    """(point id, GPU, metric, measured, predicted)."""
    problems: tuple[str, ...]
    """Why the fit cannot be trusted; empty = fine."""


def _loss(points: Sequence[CalPoint], profile: Profile) -> float:
    errs = [math.sqrt(1.0 + (math.log(pred[m] / v) / 0.05) ** 2) - 1.0
            for p in points for pred in (p.predict(profile),)
            for m, v in p.measured.items() if pred.get(m, 0) > 0]
    return sum(errs) / len(errs) if errs else 0.0


def _search(points: Sequence[CalPoint], start: Profile, names: Sequence[str]) -> Profile:
    """Nelder-Mead over ``names`` (efficiencies linear, seconds on a log scale from 1 us)."""
    from kvplan.analysis.calibration.nelder_mead import nelder_mead

    def trial(x: Sequence[float]) -> Profile:
        kw: dict[str, Any] = dict(zip(names, x, strict=True))
        return replace(start, **kw)

    bounds = [USER_BOUNDS[n] for n in names]
    floors = [None if n.endswith("_eff") else 1e-6 for n in names]
    x = nelder_mead(lambda v: _loss(points, trial(v)), [getattr(start, n) for n in names],
                    bounds, floors)
    x = nelder_mead(lambda v: _loss(points, trial(v)), x, bounds, floors, step=0.03)
    return trial([float(f"{v:.5g}") for v in x])


def fit_user(points: Sequence[CalPoint], base: ProfileSet,
             names: Sequence[str] = USER_FITTED, fitted_on: str = "") -> UserFit:
    """Fit ``names`` per (GPU, precision), starting from the bundled profile of each."""
    groups: dict[tuple[str, str], list[CalPoint]] = {}
    for p in points:
        groups.setdefault((p.gpu, p.precision), []).append(p)
    profiles, errors, problems = [], [], []
    for (gpu, precision), group in sorted(groups.items()):
        start = replace(base.pick(gpu, precision), gpu=gpu, precision=precision)
        fitted = _search(group, start, names)
        profiles.append(fitted)
        errs = [(p.id, gpu, m, v, pred[m]) for p in group for pred in (p.predict(fitted),)
                for m, v in p.measured.items()]
        errors.extend(errs)
        problems.extend(_problems(gpu, precision, fitted, names, errs))
        problems.extend(separability_problems(
            lambda prof, g=group: [v for p in g for v in p.predict(prof).values()],  # type: ignore[misc]
            fitted, names, f"{gpu}/{precision}"))
    return UserFit(profiles=ProfileSet(profiles=tuple(profiles), default=base.default,
                                       fitted_on=fitted_on),
                   errors=tuple(errors), problems=tuple(problems))


def _problems(gpu: str, precision: str, fitted: Profile, names: Sequence[str],
              errs: Sequence[tuple[str, str, str, float, float]]) -> list[str]:
    where = f"{gpu}/{precision}"
    out = []
    if len(errs) < len(names):
        out.append(f"{where}: underdetermined, {len(errs)} measured values for {len(names)} "
                   f"factors ({', '.join(names)})")
    for name in names:
        lo, hi = USER_BOUNDS[name]
        v = getattr(fitted, name)
        if v >= hi * (1 - 1e-6) or (lo > 0 and v <= lo * (1 + 1e-6)):
            out.append(f"{where}: {name} pinned at its bound {v:g}")
    med = median(abs(pred / meas - 1) for *_, meas, pred in errs) if errs else 0.0
    if med > MAX_MEDIAN_ERROR:
        out.append(f"{where}: median error {med:.0%} after fitting (limit "
                   f"{MAX_MEDIAN_ERROR:.0%})")
    return out


def static_point(m: Any) -> CalPoint:
    """A `vllm bench latency` / static-batch measurement as a calibration point."""
    from kvplan.analysis.calibration.public_set import _static_predict, shape_floors
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    try:
        model, hw = load_model(m.model), load_gpu(m.gpu)
    except KvplanError as exc:
        raise TraceError(located(m.where, exc)) from None
    res = resolve(model, hw, m.engine)
    timer = StepCostModel(model, hw, m.engine, resolved=res)
    return CalPoint(id=m.id, source=m.where, family="moe" if model.moe else "dense",
                    model=model.name, gpu=hw.id, tp=m.engine.tensor_parallel_size,
                    precision=res.compute_precision, measured=m.measured,
                    predict=_static_predict(timer, m.shape, m.engine.max_num_batched_tokens),
                    floors=shape_floors(res, m.shape))


def static_problems(result: Any, names: Sequence[str]) -> list[str]:
    """The same refusals for a static-batch fit (``costs.calibration.fit_profiles``)."""
    from kvplan.analysis.calibration.static_fit import BOUNDS

    out = list(result.problems)
    for prof in result.profiles.profiles:
        errs = [e for e in result.errors if (e.gpu, e.precision) == (prof.gpu, prof.precision)]
        where = f"{prof.gpu}/{prof.precision}"
        if len(errs) < len(names):
            out.append(f"{where}: underdetermined, {len(errs)} measured values for "
                       f"{len(names)} factors ({', '.join(names)})")
        for name in names:
            lo, hi = BOUNDS[name]
            v = getattr(prof, name)
            if v >= hi * (1 - 1e-6) or (lo > 0 and v <= lo * (1 + 1e-6)):
                out.append(f"{where}: {name} pinned at its bound {v:g}")
        med = median(abs(e.error) for e in errs) if errs else 0.0
        if med > MAX_MEDIAN_ERROR:
            out.append(f"{where}: median error {med:.0%} after fitting (limit "
                       f"{MAX_MEDIAN_ERROR:.0%})")
    return out
