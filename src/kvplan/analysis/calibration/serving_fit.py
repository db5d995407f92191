"""`kvplan calibrate` on serving runs: read `vllm bench serve` results, replay each run's
workload in the simulator and fit the profile so the simulated TTFT, TPOT, ITL and output
throughput match; refuse fits that cannot be trusted.

Inputs (read by ``serving_runs``): ``vllm bench serve --save-result`` JSON (kvplan simulate
--save-result writes the same keys) and CSV sweeps with one run per row (``max_concurrency``
and/or ``request_rate`` columns). A run with request rate inf at concurrency 1 (or of one
prompt) is simulated once and re-priced per trial profile (``analysis.replay``); a
finite-rate run, or one at a concurrency above 1 or unset (where the API path's delay and
its serial admission move requests between steps), is simulated again for every trial.
`vllm bench latency` files stay static-batch points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import median
from typing import Any

import numpy as np

from kvplan.analysis.calibration.floors import point_floors
from kvplan.analysis.calibration.public_set import CalPoint, serving_replay, workload_load
from kvplan.analysis.calibration.separability import separability_problems
from kvplan.analysis.calibration.serving_runs import (  # re-exported: one import for callers
    SERVING_METRICS,
    ServingRun,
    _lens,
    is_serving_file,
    read_serving,
)
from kvplan.costs.memory.resolved import ResolvedDeployment, resolve
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.profiles import ProfileSet
from kvplan.errors import KvplanError, TraceError, located
from kvplan.specs.requests.workload import Workload

__all__ = ["SERVING_METRICS", "CalibrationRefused", "ServingRun", "UserFit", "_lens",
           "fit_user", "is_serving_file", "read_serving", "run_workload", "static_point",
           "static_problems", "to_point"]

USER_FITTED = ("step_overhead_s", "request_overhead_s", "api_request_s")
"""What a user fit moves by default (per GPU and precision): engine overheads only, kernels
stay the measured tables'; the rest stays bundled (the API
path's per-prompt-token cost too: separating it from the fixed part needs runs of very
different prompt lengths)."""
USER_BOUNDS = {"step_overhead_s": (0.0, 20e-3), "prefill_overhead_s": (0.0, 50e-3),
               "request_overhead_s": (0.0, 500e-6), "layer_overhead_s": (0.0, 200e-6),
               "moe_layer_overhead_s": (0.0, 1e-3), "api_request_s": (0.0, 200e-3)}
LOG_FLOOR_S = 1e-6
"""The least a fitted overhead can take (its log-scale search starts there): a term fitted to
it wants 0 or less - every one of them is host time vLLM always spends - so the runs are
faster than the step model explains and the term is compensating; reported as pinned."""
MAX_MEDIAN_ERROR = 0.20
"""A fit whose median |error| stays above this is refused (unless --force)."""


class CalibrationRefused(KvplanError):
    """The fit cannot be trusted (pinned, underdetermined or far off); nothing was written."""


_FLOOR_WHY = " (the runs are faster than the step model explains even without it)"
_SEPARATE_HOW = (": add runs that differ in batch size or prompt length, or measure another "
                 "metric")


def refusal(problems: Sequence[str]) -> str:
    """The one line a refused fit prints: each reason once under its GPU/precision, each kind
    of advice once (each reason carried its own, and a line of six ran past the CLI's 500
    characters, which cut reasons out of its middle)."""
    groups: dict[str, list[str]] = {}
    for p in problems:
        where, _, reason = p.partition(": ")
        short = reason.replace(_FLOOR_WHY, "").replace(_SEPARATE_HOW, "")
        short = short.replace(" (they move every measured value alike, cosine", " (cosine")
        short = short.replace(" after fitting (limit", " (limit")
        groups.setdefault(where, []).append(short.replace(
            " does not change any prediction (the points cannot see it)", " changes no value"))
    advice = [a for a, needed in (
        ("lower bound: runs faster than the model without the term",
         any(_FLOOR_WHY in p for p in problems)),
        ("to separate: other batch sizes or prompt lengths, or another metric",
         any(_SEPARATE_HOW in p for p in problems)),
        ("--force writes it anyway", True)) if needed]
    said = " | ".join(f"{w}: " + "; ".join(r) for w, r in groups.items())
    return f"the fit cannot be trusted: {said} ({'; '.join(advice)})"


def run_workload(r: ServingRun, seed: int | None = None) -> Workload:
    """The run's requests: its lengths, arrivals at t = 0 or Poisson/gamma at its rate, drawn
    as `vllm bench serve --seed SEED` draws them (SEED: the run's own, else its default 0):
    for every request sent, then the failed ones' dropped (vLLM rejects them at once, the
    engine never sees them)."""
    n = r.num_prompts
    arrivals = np.zeros(n)
    if r.request_rate is not None:
        from kvplan.specs.requests.generators import vllm_arrival_rng
        from kvplan.specs.requests.workload import gamma_arrivals

        sent = gamma_arrivals(n + len(r.failed_at), r.request_rate, r.burstiness,
                              vllm_arrival_rng(r.seed if seed is None else seed))
        arrivals = np.delete(sent, np.asarray(r.failed_at, dtype=np.int64))
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
    floors = [None if n.endswith("_eff") else LOG_FLOOR_S for n in names]
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
            lambda prof, g=group: [p.predict(prof)[m] for p in g  # type: ignore[misc]
                                   for m in p.measured],  # measured metrics only
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
        elif not name.endswith("_eff") and v <= max(lo, LOG_FLOOR_S) * (1 + 1e-6):
            out.append(f"{where}: {name} pinned at its lower bound {v:g} s{_FLOOR_WHY}")
    med = median(abs(pred / meas - 1) for *_, meas, pred in errs) if errs else 0.0
    if med > MAX_MEDIAN_ERROR:
        out.append(f"{where}: median error {med:.0%} after fitting (limit "
                   f"{MAX_MEDIAN_ERROR:.0%})")
    return out


def static_point(m: Any) -> CalPoint:
    """A `vllm bench latency` / static-batch measurement as a calibration point."""
    from kvplan.analysis.calibration.measurement_checks import check_point
    from kvplan.analysis.calibration.public_set import _static_predict, shape_floors
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    try:  # the static path's checks (fit_profiles' _prepare), located at the point's line
        model, hw = load_model(m.model), load_gpu(m.gpu)
        res = resolve(model, hw, m.engine)
        check_point(model, hw, m.engine, m.shape, res.settings)
    except KvplanError as exc:
        raise TraceError(located(m.where, exc)) from None
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
        out.extend(_static_pinned(prof, names, where, BOUNDS))
        med = median(abs(e.error) for e in errs) if errs else 0.0
        if med > MAX_MEDIAN_ERROR:
            out.append(f"{where}: median error {med:.0%} after fitting (limit "
                       f"{MAX_MEDIAN_ERROR:.0%})")
    return out


HOST_TIME = ("step_overhead_s", "request_overhead_s")
"""Static-fit terms vLLM always spends (every step, every scheduled request): fitted to 0 they
want less, so the runs are faster than the step model explains and the fit is compensating
(the prefill overhead is 0 in the bundled profile itself: 0 is an answer for it)."""


def _static_pinned(prof: Profile, names: Sequence[str], where: str,
                   bounds: dict[str, tuple[float, float]]) -> list[str]:
    out = []
    for name in names:
        lo, hi = bounds[name]
        v = getattr(prof, name)
        if v >= hi * (1 - 1e-6) or (lo > 0 and v <= lo * (1 + 1e-6)):
            out.append(f"{where}: {name} pinned at its bound {v:g}")
        elif name in HOST_TIME and v <= lo:
            out.append(f"{where}: {name} pinned at its lower bound {v:g} s{_FLOOR_WHY}")
    return out
