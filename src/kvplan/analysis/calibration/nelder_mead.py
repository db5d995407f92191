"""A bounded Nelder-Mead simplex search (no scipy), for fits whose factors trade along a
curved valley (bandwidth against a fixed overhead) where a one-factor-at-a-time grid stalls.

Each factor is searched in [0, 1] of its range: linear for efficiencies, logarithmic for
seconds (``log_floor`` .. upper bound) so 50 us and 5 ms get the same resolution.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def _to_unit(v: float, lo: float, hi: float, log_floor: float | None) -> float:
    if log_floor is None:
        return (v - lo) / (hi - lo)
    v = max(v, log_floor)
    return math.log(v / log_floor) / math.log(hi / log_floor)


def _from_unit(u: float, lo: float, hi: float, log_floor: float | None) -> float:
    u = min(1.0, max(0.0, u))
    if log_floor is None:
        return lo + u * (hi - lo)
    return float(log_floor * (hi / log_floor) ** u)


def nelder_mead(loss: Callable[[list[float]], float], x0: Sequence[float],
                bounds: Sequence[tuple[float, float]], log_floors: Sequence[float | None],
                iterations: int = 300, step: float = 0.15) -> list[float]:
    """Minimise ``loss`` over the box ``bounds`` from ``x0``; returns the best point."""
    n = len(x0)

    def real(u: Sequence[float]) -> list[float]:
        return [_from_unit(ui, *bounds[i], log_floors[i]) for i, ui in enumerate(u)]

    def f(u: list[float]) -> float:
        return loss(real(u))

    u0 = [_to_unit(x, *bounds[i], log_floors[i]) for i, x in enumerate(x0)]
    simplex = [u0] + [[u + (step if j == i else 0.0) * (1 if u < 0.5 else -1)
                       for j, u in enumerate(u0)] for i in range(n)]
    values = [f(u) for u in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < 1e-12 and _spread(simplex) < 1e-6:
            break
        centre = [sum(u[j] for u in simplex[:-1]) / n for j in range(n)]
        simplex[-1], values[-1] = _next(f, simplex, values, centre)
    best = min(range(n + 1), key=values.__getitem__)
    return real(simplex[best])


def _spread(simplex: list[list[float]]) -> float:
    return max(abs(a - b) for u in simplex for a, b in zip(u, simplex[0], strict=True))


def _next(f: Callable[[list[float]], float], simplex: list[list[float]], values: list[float],
          centre: list[float]) -> tuple[list[float], float]:
    worst = simplex[-1]

    def toward(t: float) -> list[float]:
        return [min(1.0, max(0.0, c + t * (c - w))) for c, w in zip(centre, worst, strict=True)]

    refl = toward(1.0)
    fr = f(refl)
    if fr < values[0]:
        exp = toward(2.0)
        fe = f(exp)
        return (exp, fe) if fe < fr else (refl, fr)
    if fr < values[-2]:
        return refl, fr
    con = toward(-0.5)
    fc = f(con)
    if fc < values[-1]:
        return con, fc
    # shrink toward the best vertex: every vertex moves (the caller's sort orders them); the
    # last is handed back as itself - returning the worst shrunk vertex instead put one
    # vertex in twice and dropped the last, collapsing the simplex by a dimension
    for i in range(1, len(simplex)):
        simplex[i] = [(b + u) / 2 for b, u in zip(simplex[0], simplex[i], strict=True)]
        values[i] = f(simplex[i])
    return simplex[-1], values[-1]
