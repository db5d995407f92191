"""Measured values that beat their physical floor (``floors``): found, named in one line, and
dropped from a fit - a value faster than the datasheet allows is not a measurement of that
deployment (another GPU, prefix-cache hits, wrong units) and would drag the fit below physics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

from kvplan.analysis.calibration.floors import THROUGHPUT, Floors, point_floors, static_load
from kvplan.analysis.calibration.measurements import Measurement

NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "E2E",
         THROUGHPUT: "output throughput"}
_CHECK = {
    "ttft_s": "another GPU? prefix-cache hits (a resent prompt skips its prefill)? "
              "units (a value in seconds in a _ms column)?",
    "tpot_s": "another GPU or a larger tensor-parallel size? speculative decoding (several "
              "tokens a step)? units (a value in seconds in a _ms column)?",
    "e2e_s": "another GPU or a larger tensor-parallel size? a shorter output than stated? "
             "units (a value in seconds in a _ms column)?",
    THROUGHPUT: "another GPU or more of them (tensor-parallel size, replicas)? total tokens "
                "counted as output? tokens/s per user vs per server?",
}
_CHECK["itl_s"] = _CHECK["tpot_s"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BelowFloor:
    """One measured value past its physical limit (faster than the GPU's datasheet allows)."""

    point: str
    metric: str
    measured: float
    floor: float
    """Seconds (a floor) or tokens/s for throughput (a ceiling)."""
    gpu: str
    precision: str
    side: str
    """Which datasheet figure sets the limit: compute (peak FLOP/s) or memory (bandwidth)."""
    rate_per_s: float
    """That figure: FLOP/s at ``precision``, or bytes/s."""

    @property
    def ratio(self) -> float:
        """How far past the limit: measured / floor (throughput: ceiling / measured), < 1."""
        if self.metric == THROUGHPUT:
            return self.floor / self.measured
        return self.measured / self.floor

    def describe(self) -> str:
        """'point: measured TTFT 75.2 ms is below its physical floor 92.8 ms ...'."""
        name = NAMES.get(self.metric, self.metric)
        what = "above its physical ceiling" if self.metric == THROUGHPUT else \
            "below its physical floor"
        rate = (f"{self.rate_per_s / 1e12:,.0f} TFLOP/s {self.precision} peak"
                if self.side == "compute" else f"{self.rate_per_s / 1e12:.2f} TB/s bandwidth")
        work = "FLOPs" if self.side == "compute" else "bytes"
        return (f"{self.point}: measured {name} {_value(self.metric, self.measured)} is {what} "
                f"{_value(self.metric, self.floor)} on {self.gpu} (its {work} at the "
                f"datasheet's {rate}; {1 - self.ratio:.1%} past it)")

    def advice(self) -> str:
        """What to check about the measurement."""
        return "check: " + _CHECK.get(self.metric, "the GPU and the units?")


def _value(metric: str, v: float) -> str:
    if metric == THROUGHPUT:
        return f"{v:,.1f} tokens/s"
    return f"{v * 1e3:,.2f} ms" if v < 10 else f"{v:,.2f} s"


def beats(metric: str, measured: float, limit: float) -> bool:
    """A time below its floor, or a throughput above its ceiling."""
    return measured > limit if metric == THROUGHPUT else measured < limit


def below_floor(point: str, measured: Mapping[str, float], floors: Floors) -> list[BelowFloor]:
    """The measured values of ``point`` that beat their floor on ``floors``' GPU."""
    out = []
    for metric, value in measured.items():
        lim = floors.limit(metric)
        if lim is not None and beats(metric, value, lim.value):
            out.append(BelowFloor(point=point, metric=metric, measured=value, floor=lim.value,
                                  gpu=floors.gpu, precision=floors.precision, side=lim.side,
                                  rate_per_s=floors.peak_flops_per_s if lim.side == "compute"
                                  else floors.bandwidth_bytes_per_s))
    return out


def without(measured: Mapping[str, float], dropped: Iterable[BelowFloor]) -> dict[str, float]:
    """``measured`` less the dropped values."""
    gone = {d.metric for d in dropped}
    return {m: v for m, v in measured.items() if m not in gone}


def refusal(found: list[BelowFloor]) -> str:
    """The one line ``kvplan calibrate`` refuses a file with."""
    first = found[0]
    more = f" (and {len(found) - 1} more value(s) past their floor)" if len(found) > 1 else ""
    return (f"{first.describe()}; {first.advice()}{more}; fix the point, or --force to drop "
            "such values from the fit")


def drop_note(b: BelowFloor) -> str:
    """The stderr note for a value ``--force`` drops."""
    return f"note: dropped from the fit (--force): {b.describe()}"


def measurement_floors(m: Measurement) -> Floors:
    """A static-batch measurement's physical limits (TraceError names its line if its model,
    GPU or flags are bad)."""
    from kvplan.costs.memory.resolved import resolve
    from kvplan.errors import KvplanError, TraceError, located
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    try:
        res = resolve(load_model(m.model), load_gpu(m.gpu), m.engine)
        load = static_load(m.shape.batch, m.shape.prompt_tokens, m.shape.output_tokens)
        return point_floors(res.model, res.gpu, res.engine, load, res)
    except KvplanError as exc:
        raise TraceError(located(m.where, exc)) from None


def drop_measurements(points: Sequence[Measurement]) -> tuple[list[Measurement],
                                                               list[BelowFloor]]:
    """``points`` without their values that beat a physical floor, and those values."""
    return drop_values(points, measurement_floors)


class _Point(Protocol):
    """A measured point of either kind (static-batch ``Measurement``, ``CalPoint``)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def id(self) -> str: ...

    @property
    def measured(self) -> Mapping[str, float]: ...


P = TypeVar("P", bound=_Point)


def drop_values(points: Sequence[P], floors_of: Callable[[P], Floors | None]
                ) -> tuple[list[P], list[BelowFloor]]:
    """``points`` without their values that beat a physical floor (``floors_of``: a point's
    floors, None: unchecked), and those values; a point with no value left is left out."""
    kept, dropped = [], []
    for m in points:
        floors = floors_of(m)
        found = below_floor(m.id, m.measured, floors) if floors is not None else []
        dropped.extend(found)
        measured = without(m.measured, found)
        if measured:
            kept.append(replace(m, measured=measured) if found else m)
    return kept, dropped


@dataclass(frozen=True, slots=True)
class SetAside:
    """A measured value left out because another value of the same metric, read off the same
    page by the same method, is past its physical floor (``same_method``)."""

    point: str
    metric: str
    because: str
    """The point on that page whose value is below its floor."""

    def describe(self) -> str:
        return (f"{self.point}: {NAMES.get(self.metric, self.metric)} set aside (the same "
                f"page's {self.because} is below its floor: the method did not measure what "
                "kvplan predicts)")


def same_method(points: Sequence[P], dropped: Sequence[BelowFloor], pages: Mapping[str, str]
                ) -> tuple[list[P], list[SetAside]]:
    """``points`` without the values of a metric that broke its floor elsewhere on the same
    page (``pages``: point id -> where it was read, every point's). A value faster than the
    datasheet allows says the page's method measured something else (a prompt served from
    the prefix cache, a warm run): its other values of that metric, above their floors by
    chance, are no cold measurement either. A point with no value left is left out."""
    broken: dict[tuple[str, str], str] = {}
    for b in dropped:
        if pages.get(b.point):
            broken.setdefault((pages[b.point], b.metric), b.point)
    kept: list[P] = []
    aside: list[SetAside] = []
    for m in points:
        at = pages.get(m.id, "")
        hits = {k: broken[(at, k)] for k in m.measured if (at, k) in broken}
        aside.extend(SetAside(m.id, k, why) for k, why in hits.items())
        measured = {k: v for k, v in m.measured.items() if k not in hits}
        if measured:
            kept.append(replace(m, measured=measured) if hits else m)
    return kept, aside
