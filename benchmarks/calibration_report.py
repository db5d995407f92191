"""Fit the bundled latency profile on the public calibration set and report its errors.

    .venv/bin/python benchmarks/calibration_report.py            # print the tables
    .venv/bin/python benchmarks/calibration_report.py --write    # also rewrite default.json
    .venv/bin/python benchmarks/calibration_report.py --dump r.json   # and every residual
    .venv/bin/python benchmarks/calibration_report.py --help     # this text

Prints, per model family (dense / MoE) and metric, the median |predicted / measured - 1|
in-sample and leave-one-source-out (each source predicted by a fit without it), the held-out
error of each source, the fitted factors, the points kvplan cannot price and the measured
values faster than their GPU's datasheet allows (``analysis.calibration.floors``: left out of
the fit and of every median, each printed with its floor); the bundled
profile's own in-sample errors (before the fit) are printed beside them. ``--dump PATH``
writes every point's residuals (bundled, fitted in-sample, held out) as JSON. ``--write``
stores the fit, its error bands (held-out residuals) and its coverage in
src/kvplan/data/profiles/default.json. Takes a few minutes (one fit per source).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from kvplan.analysis.calibration import report as rep
from kvplan.analysis.calibration.profile_fit import SHARED, Fit, fit_points, pinned, to_profile_set
from kvplan.analysis.calibration.public_set import CalPoint, calibration_set
from kvplan.costs.step.profiles import profiles_to_dict
from kvplan.input_file import package_file

OUT = Path(__file__).resolve().parents[1] / "src" / "kvplan" / "data" / "profiles" / "default.json"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def main() -> None:
    if "--help" in sys.argv or "-h" in sys.argv:
        print(__doc__)
        return
    t0 = time.perf_counter()
    cs = calibration_set()
    pts = cs.points
    before = rep.residuals(pts, bundled_fit())
    t1 = time.perf_counter()
    fit = fit_points(pts)
    ins = rep.residuals(pts, fit)
    t2 = time.perf_counter()
    held = rep.leave_one_source_out(pts)
    t3 = time.perf_counter()
    sources = sorted({p.source for p in pts})
    print(f"{len(pts)} points from {len(sources)} sources ({', '.join(sources)}); "
          f"{len(cs.skipped)} skipped")
    for pid, why in cs.skipped.items():
        print(f"  skipped {pid}: {why}")
    print(f"{len(cs.below_floor)} measured values below their physical floor, left out of the "
          "fit and the medians:")
    for b in cs.below_floor:
        print(f"  {b.describe()}")
    if cs.set_aside:
        print(f"{len(cs.set_aside)} more values of those pages' metrics set aside, measured by "
              "the same method:")
    for a in cs.set_aside:
        print(f"  {a.describe()}")
    print("\n| family | metric | values | bundled in-sample | in-sample median abs error | "
          "leave-one-source-out |\n|---|---|---|---|---|---|")
    for r, b in zip(rep.table(ins, held), rep.table(before, before), strict=True):
        print(f"| {r['family']} | {r['metric']} | {r['n']} | {pct(b['in_sample'])} | "
              f"{pct(r['in_sample'])} | {pct(r['leave_one_source_out'])} |")
    print("\n| source | values | in-sample median abs error | held out |\n|---|---|---|---|")
    for a, b in zip(rep.by_source(ins), rep.by_source(held), strict=True):
        print(f"| {a['source']} | {a['n']} | {pct(a['median_abs_error'])} | "
              f"{pct(b['median_abs_error'])} |")
    print("\nfitted:", json.dumps(rep.fit_dict(fit)))
    print("pinned at a bound:", pinned(fit) or "none")
    print(f"\n({time.perf_counter() - t0:.0f} s: {t1 - t0:.0f} s replaying the set, "
          f"{t2 - t1:.0f} s the fit, {t3 - t2:.0f} s leave-one-source-out)")
    if "--dump" in sys.argv:
        dump(Path(sys.argv[sys.argv.index("--dump") + 1]), before, ins, held)
    if "--write" in sys.argv:
        write(fit, pts, held, len(sources))


def bundled_fit() -> Fit:
    """The bundled default.json as a Fit (its shared terms and per-engine host costs)."""
    data = json.loads(package_file("data", "profiles", "default.json").read_text("utf-8"))
    return Fit(shared={k: data["default"][k] for k in SHARED}, per_gpu={},
               per_engine=data["engines"])


def dump(path: Path, *groups: Sequence[rep.Residual]) -> None:
    """Every residual of the three groups (bundled, in-sample, held out) as JSON rows."""
    names = ("bundled", "in_sample", "held_out")
    rows = [{"group": n, **asdict(r), "error": r.error}
            for n, rs in zip(names, groups, strict=True) for r in rs]
    path.write_text(json.dumps(rows, indent=0) + "\n", encoding="utf-8")


def write(fit: Fit, pts: Sequence[CalPoint], held: Sequence[rep.Residual],
          n_sources: int) -> None:
    ps = to_profile_set(fit, pts, fitted_on=(
        f"public_calibration.json + latency_calibration.json: {len(pts)} points from "
        f"{n_sources} sources (vLLM/SGLang serving runs replayed through the simulator, "
        "vllm bench latency and TensorRT-LLM static batches; values below their physical "
        "floor left out); benchmarks/calibration_report.py"))
    data = profiles_to_dict(ps)
    data["bands"] = rep.band_groups(held)
    data["coverage"] = rep.coverage(pts)
    data["engines"] = fit.per_engine
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
