"""Can a fit tell its terms apart? The sensitivity of every predicted metric to each fitted
term, and the pairs of terms that move the predictions along one direction (so the data
cannot separate them: one absorbs the other) or a term the data does not see at all."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from kvplan.costs.step.profile import Profile

COLLINEAR = 0.995
"""|cosine| between two terms' sensitivity vectors above which they are inseparable."""
_STEP = 0.05
PROBE_FLOOR_S = 100e-6
"""A fixed cost fitted to 0 (the bundled prefill overhead) or to the serving search's 1 us
floor is probed here, not at 1 us: its log
derivative at 0 is 0 by construction, so probed at 1 us a term every TTFT depends on read as
one 'no point sees' (1 us / 11.6 ms = 9e-5 < 1e-4) and a correct fit was refused. The
directions (cosines) do not depend on where a term that adds linearly is probed."""


def sensitivities(predict: Callable[[Profile], Sequence[float]], fitted: Profile,
                  names: Sequence[str]) -> dict[str, list[float]]:
    """d log(prediction) / d log(term) for each term in ``names`` at ``fitted``, over every
    prediction ``predict`` returns (central differences of +-5%; a fixed cost at 0 or
    1 us is probed at ``PROBE_FLOOR_S``)."""
    out: dict[str, list[float]] = {}
    for name in names:
        v = float(getattr(fitted, name))
        v = PROBE_FLOOR_S if v <= 1.000001e-6 and not name.endswith("_eff") else v
        up = predict(_with(fitted, name, v * (1 + _STEP)))
        down = predict(_with(fitted, name, v * (1 - _STEP)))
        out[name] = [(math.log(a) - math.log(b)) / (2 * _STEP) if a > 0 and b > 0 else 0.0
                     for a, b in zip(up, down, strict=True)]
    return out


def _with(p: Profile, name: str, value: float) -> Profile:
    changed: dict[str, float] = {name: value}
    return replace(p, **changed)  # type: ignore[arg-type]


def separability_problems(predict: Callable[[Profile], Sequence[float]], fitted: Profile,
                          names: Sequence[str], where: str) -> list[str]:
    """Why the fitted terms cannot be told apart on these points (empty: they can);
    ``predict`` returns the measured values only: a metric no run measured says nothing."""
    sens = sensitivities(predict, fitted, names)
    norm = {n: math.sqrt(sum(x * x for x in v)) for n, v in sens.items()}
    out = [f"{where}: {n} does not change any prediction (the points cannot see it)"
           for n in names if norm[n] < 1e-4]
    seen = [n for n in names if norm[n] >= 1e-4]
    for i, a in enumerate(seen):
        for b in seen[i + 1:]:
            dot = sum(x * y for x, y in zip(sens[a], sens[b], strict=True))
            cos = dot / (norm[a] * norm[b])
            if abs(cos) > COLLINEAR:
                out.append(f"{where}: cannot separate {a} from {b} (they move every "
                           f"measured value alike, cosine {cos:.3f}): add runs that differ "
                           "in batch size or prompt length, or measure another metric")
    return out
