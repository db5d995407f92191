"""Calibration: fit efficiency profiles to measured latency points and report their errors.

Reading points lives in ``measurements``, profile sets in ``profiles``; both are re-exported
here so ``kvplan.analysis.calibration.static_fit`` stays the one import for calibrating.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kvplan.analysis.calibration.measurement_checks import check_point
from kvplan.analysis.calibration.measurements import (
    METRICS,
    Defaults,
    Measurement,
    read_measurements,
)
from kvplan.costs.step.latency import static_batch_latency
from kvplan.costs.step.profiles import (
    PROFILE_SCHEMA,
    ProfileSet,
    default_profiles,
    load_profiles,
    profile_for,
    profiles_from_dict,
    profiles_to_dict,
    save_profiles,
)
from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.errors import KvplanError, TraceError, located

__all__ = ["BOUNDS", "FITTED", "METRICS", "PROFILE_SCHEMA", "CalibrationResult", "Defaults",
           "Measurement", "PointError", "ProfileSet", "default_profiles", "evaluate",
           "fit_profiles", "leave_one_out", "load_profiles", "point_errors", "predict",
           "profile_for", "profiles_from_dict", "profiles_to_dict", "read_measurements",
           "save_profiles"]


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
    problems: tuple[str, ...] = ()
    """Terms the points cannot tell apart (``kvplan.analysis.calibration.separability``)."""

    def median_abs_error(self, metric: str) -> float | None:
        """Median |error| of one metric over the points that measured it."""
        values = sorted(abs(e.error) for e in self.errors if e.metric == metric)
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


SOFT_L1_SCALE = 0.05
"""Log errors below ~5% count quadratically, larger ones linearly."""
FITTED = ("step_overhead_s", "prefill_overhead_s")
"""What a fit moves by default: engine overheads only. Kernels are priced from the GPU's
measured tables (``kvplan.costs.kernels``), so no fit moves a compute or bandwidth rate;
add ``request_overhead_s`` (names=...) when the points span several batch sizes."""
BOUNDS = {"step_overhead_s": (0.0, 0.02), "prefill_overhead_s": (0.0, 0.02),
          "request_overhead_s": (0.0, 1e-3), "layer_overhead_s": (0.0, 200e-6)}
"""Overheads: 0-20 ms per step (a scheduler pass, input preparation, a graph replay), 0-1 ms
per scheduled request, 0-200 us per layer; a fit that wants more is absorbing a term the
model lacks, and is refused (unless --force)."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    point: Measurement
    timer: StepCostModel


def _prepare(points: Iterable[Measurement]) -> dict[tuple[str, str], list[_Prepared]]:
    """Build each point's step model once (the fit only swaps profiles) and group them."""
    from kvplan.costs.memory.resolved import resolve
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    groups: dict[tuple[str, str], list[_Prepared]] = {}
    for pt in points:
        try:
            model, hw = load_model(pt.model), load_gpu(pt.gpu)
            res = resolve(model, hw, pt.engine)
            check_point(model, hw, pt.engine, pt.shape, res.settings)
            timer = StepCostModel(model, hw, pt.engine, resolved=res)
        except KvplanError as exc:
            raise TraceError(located(pt.where, exc)) from None
        key = (hw.id, res.compute_precision)
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
    """Fit ``names`` (default: the step and prefill overheads) per (GPU, precision) to the
    points, each within BOUNDS; kernel times stay the measured tables'."""
    from kvplan.analysis.calibration.separability import separability_problems

    base = start or Profile()
    profiles, errors, problems = [], [], []
    for (gpu, precision), group in sorted(_prepare(points).items()):
        seed = replace(base, gpu=gpu, precision=precision)
        fitted = _coordinate_search(lambda p, g=group: _loss(g, p), seed,  # type: ignore[misc]
                                    names)
        profiles.append(fitted)
        errors.extend(point_errors(group, fitted))
        problems.extend(separability_problems(
            lambda p, g=group: [predict(prep, p)[m] for prep in g  # type: ignore[misc]
                                for m in prep.point.measured],  # measured metrics only
            fitted, names, f"{gpu}/{precision}"))
    return CalibrationResult(
        profiles=ProfileSet(profiles=tuple(profiles), default=base, fitted_on=fitted_on),
        errors=tuple(errors), problems=tuple(problems))


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
