"""Per-point comparison of the bundled latency profile with the public calibration points.

Prices every point of the chosen sources (all sources by default) with the bundled profile
(``src/kvplan/data/profiles/default.json``, no fitting) and prints predicted vs measured per
metric, the median |predicted / measured - 1| per family and metric, and the points kvplan
is furthest off. Serving points are replayed through the simulator (seconds each).

Usage: python benchmarks/compare_public_points.py [--source KEY ...] [--worst N]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from statistics import median

from kvplan.analysis.calibration.report import Residual as Row

METRICS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "output_throughput_tok_s": "throughput",
           "e2e_s": "E2E"}


def _rows(sources: Sequence[str]) -> tuple[list[Row], list[str]]:
    from kvplan.analysis.calibration.public_set import _point, raw_points
    from kvplan.costs.step.profiles import default_profiles
    from kvplan.errors import KvplanError

    rows: list[Row] = []
    skipped: list[str] = []
    profiles = default_profiles()
    for p in raw_points():
        if sources and p["source"] not in sources:
            continue
        try:
            cp = _point(p)
        except KvplanError as exc:
            skipped.append(f"{p['id']}: {exc}")
            continue
        pred = cp.predict(profiles.pick(cp.gpu, cp.precision))
        rows.extend(Row(id=cp.id, source=cp.source, family=cp.family, gpu=cp.gpu, tp=cp.tp,
                        metric=m, measured=v, predicted=pred[m])
                    for m, v in cp.measured.items())
    return rows, skipped


def _print_points(rows: Sequence[Row]) -> None:
    print(f"{'point':62s} {'metric':>10s} {'measured':>11s} {'kvplan':>11s} {'error':>8s}")
    for r in rows:
        print(f"{r.id:62s} {METRICS[r.metric]:>10s} {r.measured:>11.4g} {r.predicted:>11.4g} "
              f"{r.error:>+8.0%}")


def _print_summary(rows: Sequence[Row]) -> None:
    print("\n| family | metric | values | median abs error | median signed error |")
    print("|---|---|---|---|---|")
    for family in ("dense", "moe"):
        for metric, name in METRICS.items():
            errs = [r.error for r in rows if (r.family, r.metric) == (family, metric)]
            if errs:
                print(f"| {family} | {name} | {len(errs)} | {median(abs(e) for e in errs):.0%} "
                      f"| {median(errs):+.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", default=[], help="source key (repeatable)")
    parser.add_argument("--worst", type=int, default=10, help="how many worst values to list")
    ns = parser.parse_args()
    rows, skipped = _rows(ns.source)
    _print_points(rows)
    _print_summary(rows)
    print(f"\nworst {ns.worst} (by |error|):")
    _print_points(sorted(rows, key=lambda r: -abs(r.error))[:ns.worst])
    for line in skipped:
        print(f"skipped {line}")


if __name__ == "__main__":
    main()
