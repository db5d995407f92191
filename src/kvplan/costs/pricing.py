"""Fleet cost from instance shapes: replicas packed onto rentable instances, $/hour."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.specs.prices import PriceRow
from kvplan.units import cdiv


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCost:
    """What renting a fleet costs on the cheapest instance shape that holds its replicas."""

    row: PriceRow
    instances: int
    gpus_rented: int
    idle_gpus: int
    usd_per_hour: float
    also: tuple[tuple[PriceRow, int], ...] = ()
    """Other shapes rented beside ``row`` (shape, instances): the replicas a whole ``row``
    instance would leave mostly idle (9 TP1 replicas: one 8-GPU instance and one 1-GPU)."""
    replicas: int = 1
    """Replicas the rented instances hold."""


def shape_cost(row: PriceRow, replicas: int, gpus_per_replica: int) -> FleetCost | None:
    """``replicas`` replicas of ``gpus_per_replica`` GPUs on ``row``'s shape (None: no fit).

    A replica's GPUs sit in one node; an instance of g >= G GPUs holds floor(g / G)
    replicas; smaller instances (g < G, e.g. per-GPU rental) are combined, cdiv(G, g) each::

        instances = cdiv(replicas, g // G)      if g >= G
                  = replicas * cdiv(G, g)       otherwise
    """
    g, need = row.gpus_per_instance, gpus_per_replica
    if need > max(row.gpus_per_node, g):
        return None
    instances = cdiv(replicas, g // need) if g >= need else replicas * cdiv(need, g)
    rented = instances * g
    return FleetCost(row=row, instances=instances, gpus_rented=rented,
                     idle_gpus=rented - replicas * need,
                     usd_per_hour=instances * row.usd_per_instance_hour, replicas=replicas)


def fleet_cost(rows: tuple[PriceRow, ...], replicas: int, gpus_per_replica: int
               ) -> FleetCost | None:
    """The cheapest rental among ``rows`` for this fleet (ties: table order, one shape before
    a mix); None if none fits. Besides one shape for the whole fleet, k whole instances of a
    multi-replica shape with the rest on another (``_mixed``): on Lambda, 9 TP1 H100
    replicas are one 8x ($31.92) and one 1x ($4.29), $36.21/h, not nine 1x ($38.61)."""
    costs = [c for r in rows if (c := shape_cost(r, replicas, gpus_per_replica)) is not None]
    costs += _mixed(rows, replicas, gpus_per_replica)
    return min(costs, key=lambda c: c.usd_per_hour) if costs else None


def _mixed(rows: tuple[PriceRow, ...], replicas: int, need: int) -> list[FleetCost]:
    """The cheapest rental of ``replicas`` over several shapes at once (none where one shape
    is as cheap): instances of every shape, each holding floor(g / G) replicas (or one
    replica per cdiv(G, g) smaller instances), chosen by dynamic programming over the
    replicas still to place. On Lambda, 9 TP1 H100 replicas are one 8x ($31.92) and one 1x
    ($4.29); with 8x $30, 2x $8 and 1x $4.50, 11 are 8x + 2x + 1x, $42.50 (a bulk shape
    plus one other gave 8x + three 1x, $43.50). ``row`` is the shape holding the most
    replicas, ``also`` the others in table order."""
    units = []  # (row, replicas one unit holds, instances per unit)
    for r in rows:
        g = r.gpus_per_instance
        if g >= need:
            units.append((r, g // need, 1))
        elif need <= r.gpus_per_node:
            units.append((r, 1, cdiv(need, g)))
    if len(units) < 2:
        return []
    best, pick = [0.0] * (replicas + 1), [0] * (replicas + 1)
    for n in range(1, replicas + 1):
        best[n] = math.inf
        for i, (r, held, inst) in enumerate(units):
            usd = inst * r.usd_per_instance_hour + best[max(0, n - held)]
            if usd < best[n]:
                best[n], pick[n] = usd, i
    count = [0] * len(units)
    n = replicas
    while n > 0:
        count[pick[n]] += 1
        n = max(0, n - units[pick[n]][1])
    used = [i for i, c in enumerate(count) if c]
    if len(used) < 2:
        return []
    main = max(used, key=lambda i: (count[i] * units[i][1], -i))
    rented = sum(count[i] * units[i][2] * units[i][0].gpus_per_instance for i in used)
    return [FleetCost(row=units[main][0], instances=count[main] * units[main][2],
                      gpus_rented=rented, idle_gpus=rented - replicas * need,
                      usd_per_hour=sum(count[i] * units[i][2] * units[i][0].usd_per_instance_hour
                                       for i in used), replicas=replicas,
                      also=tuple((units[i][0], count[i] * units[i][2]) for i in used
                                 if i != main))]


def filled_cost(rows: tuple[PriceRow, ...], gpus_per_replica: int, most: int | None = None,
                budget: float | None = None) -> FleetCost | None:
    """One rented unit filled with replicas, the cheapest per replica among ``rows`` (ties:
    table order): an instance of g >= G GPUs holds floor(g / G) replicas (8 TP1 replicas on
    one 8-GPU p5.48xlarge, $55.04/h: $6.88 each, not $55.04 for one replica and 7 idle
    GPUs); a smaller one is cdiv(G, g) instances per replica. ``most``: at most that many
    replicas (--max-gpus); ``budget``: units of at most that many $/hour first
    (--max-cost-per-hour), else the cheapest unit. None if no row holds a replica."""
    best: tuple[tuple[bool, float], FleetCost] | None = None
    for row in rows:
        k = max(1, row.gpus_per_instance // gpus_per_replica)
        cost = shape_cost(row, k if most is None else max(1, min(k, most)), gpus_per_replica)
        if cost is None:
            continue
        key = (budget is not None and cost.usd_per_hour > budget, cost.usd_per_hour / cost.replicas)
        if best is None or key < best[0]:
            best = (key, cost)
    return None if best is None else best[1]
