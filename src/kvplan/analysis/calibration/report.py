"""In-sample and leave-one-source-out errors of the profile fit, and the error bands they give.

Leave-one-source-out is the honest figure: every point of a source (a publisher: GPUStack,
Lambda, AMD, ...) is predicted by a fit that saw none of that source's points, so a source's
habits (engine version, flags, client) cannot leak into its own prediction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from statistics import median
from typing import Any

import numpy as np

from kvplan.analysis.calibration.profile_fit import Fit, fit_points
from kvplan.analysis.calibration.public_set import CalPoint

METRIC_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "output_throughput_tok_s": "throughput",
                "e2e_s": "E2E"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Residual:
    """One measured metric of one point against a prediction."""

    id: str
    source: str
    family: str
    gpu: str
    tp: int
    metric: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.measured - 1.0


def residuals(points: Iterable[CalPoint], fit: Fit) -> list[Residual]:
    """Each point's metrics under ``fit`` as the model predicts them: served runs simulated
    again (the fit searched on their replays, which approximate the API server's queue)."""
    out: list[Residual] = []
    for p in points:
        pred = p.exact(fit.profile(p.gpu, engine=p.engine))
        out.extend(Residual(id=p.id, source=p.source, family=p.family, gpu=p.gpu, tp=p.tp,
                            metric=m, measured=v, predicted=pred[m])
                   for m, v in p.measured.items())
    return out


def leave_one_source_out(points: Sequence[CalPoint], rounds: int = 6) -> list[Residual]:
    """Each source's points predicted by a fit on all the other sources."""
    out: list[Residual] = []
    for source in sorted({p.source for p in points}):
        rest = [p for p in points if p.source != source]
        held = [p for p in points if p.source == source]
        out.extend(residuals(held, fit_points(rest, rounds=rounds)))
    return out


def median_abs(rs: Iterable[Residual]) -> float | None:
    values = [abs(r.error) for r in rs]
    return median(values) if values else None


def table(in_sample: Sequence[Residual], held_out: Sequence[Residual]) -> list[dict[str, Any]]:
    """Rows of (family, metric): points, median |error| in-sample and held out by source."""
    rows = []
    for family in ("dense", "moe"):
        for metric in METRIC_NAMES:
            a = [r for r in in_sample if (r.family, r.metric) == (family, metric)]
            b = [r for r in held_out if (r.family, r.metric) == (family, metric)]
            if a:
                rows.append({"family": family, "metric": METRIC_NAMES[metric], "n": len(a),
                             "in_sample": median_abs(a), "leave_one_source_out": median_abs(b)})
    return rows


def by_source(held_out: Sequence[Residual]) -> list[dict[str, Any]]:
    """Median |held-out error| of each source's points."""
    return [{"source": s, "n": len(rs), "median_abs_error": median_abs(rs)}
            for s in sorted({r.source for r in held_out})
            for rs in ([r for r in held_out if r.source == s],)]


def band_groups(held_out: Sequence[Residual]) -> list[dict[str, Any]]:
    """10th / 90th percentile of measured / predicted per (family, GPU, TP, metric) group and
    the wider (family, GPU), (family) and overall groups."""
    keys: dict[tuple[str, str, str, str], list[float]] = {}
    for r in held_out:
        ratio = r.measured / r.predicted
        for k in ((r.family, r.gpu, str(r.tp)), (r.family, r.gpu, "*"), (r.family, "*", "*"),
                  ("*", "*", "*")):
            keys.setdefault((*k, r.metric), []).append(ratio)
    out = []
    for (family, gpu, tp, metric), ratios in sorted(keys.items()):
        lo, hi = np.quantile(np.asarray(ratios), [0.1, 0.9])
        out.append({"family": family, "gpu": gpu, "tp": tp, "metric": metric, "n": len(ratios),
                    "low_ratio": round(float(min(lo, 1.0)), 4),
                    "high_ratio": round(float(max(hi, 1.0)), 4)})
    return out


def coverage(points: Sequence[CalPoint]) -> dict[str, list[Any]]:
    return {"gpus": sorted({p.gpu for p in points}), "models": sorted({p.model for p in points}),
            "tp": sorted({p.tp for p in points}), "families": sorted({p.family for p in points})}


def fit_dict(fit: Fit) -> dict[str, Any]:
    return asdict(fit)
