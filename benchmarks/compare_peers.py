"""kvplan beside aiconfigurator on the same calibration points: median errors side by side.

    .venv/bin/pip install aiconfigurator         # optional, never a kvplan dependency
    .venv/bin/python benchmarks/compare_peers.py [--held-out] [--points] [--json OUT.json]

Every point of the bundled calibration set (public_calibration.json and the static batches of
latency_calibration.json) is priced by kvplan's own path (``calibration_set``: the simulator
replay or the static-batch latency, under the bundled profile with each engine's host costs;
``--held-out`` adds the leave-one-source-out prediction of ``calibration_report``, minutes)
and by aiconfigurator's ``cli_estimate`` (mapping in ``peers_map.to_aic``: static batches
run its ``static`` estimate, served runs its ``agg`` estimate at the measured concurrency,
or the largest its KV cache holds, since it has no request queue). Prints, per family and
metric, the median |predicted / measured - 1| of both on the values both price, and every
point either could not price with the reason. Takes 10-30 minutes (1-10 s an
aiconfigurator call; more where it searches the batch its KV cache holds).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers_map as pm  # the benchmark's own helper, beside this file

DATA = Path(__file__).resolve().parents[1] / "src" / "kvplan" / "data"


def _die(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _versions() -> dict[str, str]:
    """Installed aiconfigurator versions; exits 2 with what to do when it is missing."""
    from importlib import metadata

    try:
        import aiconfigurator.cli.api  # noqa: F401
    except ImportError:
        _die("aiconfigurator is not installed, and this benchmark compares kvplan with it: "
             "install it with '.venv/bin/pip install aiconfigurator' (optional; kvplan never "
             "needs it); nothing was compared")
    return {"aiconfigurator": metadata.version("aiconfigurator"),
            "aiconfigurator-core": metadata.version("aiconfigurator-core")}


def aic_caps() -> pm.AicCaps:
    """The model ids aiconfigurator ships and the engines it has tables for per system."""
    from aiconfigurator.sdk import common
    from aiconfigurator.sdk.perf_database import get_latest_database_version

    backends = {s: tuple(b for b in ("vllm", "trtllm", "sglang")
                         if get_latest_database_version(system=s, backend=b))
                for s in sorted(set(pm.SYSTEMS.values()))}
    return pm.AicCaps(models=frozenset(common.get_default_models()), backends=backends)


# ---------------------------------------------------------------- aiconfigurator's side


@dataclass(frozen=True, slots=True, kw_only=True)
class AicOutcome:
    inputs: pm.AicInput | None
    metrics: dict[str, float] | None
    reason: str | None
    version: str = ""
    notes: tuple[str, ...] = ()


def _model_path(inp: pm.AicInput, root: Path) -> str:
    """Its own id, or a folder holding kvplan's bundled config.json for the model."""
    if not inp.config_from_kvplan:
        return inp.model
    from kvplan.specs.catalog import find_entry

    entry = find_entry(inp.model)
    assert entry is not None, inp.model
    folder = root / inp.model.replace("/", "--")
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(entry.path.read_text("utf-8"), "utf-8")
    return str(folder)


def _estimate(path: str, inp: pm.AicInput) -> Any:
    import logging

    from aiconfigurator.cli.api import cli_estimate

    logging.disable(logging.CRITICAL)  # its per-table loading notes, hundreds of lines
    try:
        return cli_estimate(path, **inp.kwargs())
    finally:
        logging.disable(logging.NOTSET)


def _why(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"aiconfigurator: {type(exc).__name__}: {text[:150]}"


def _attempt(path: str, inp: pm.AicInput, batch: int) -> tuple[Any, bool]:
    """(estimate or None on its OOM, whether its KV cache holds the whole batch)."""
    try:
        r = _estimate(path, replace(inp, batch_size=batch))
    except RuntimeError as exc:
        if not str(exc).startswith("OOM"):
            raise
        return None, False
    return r, not r.kv_cache_warning


def _held_batch(path: str, inp: pm.AicInput) -> tuple[Any, int]:
    """agg at the largest batch (within 1/16, at most the point's) that its memory model
    holds without warning that the KV cache overflows: vLLM too runs only what its KV cache
    holds and queues the rest. When not even one request fits, batch 1 with the warning."""
    result, ok = _attempt(path, inp, inp.batch_size)
    if ok:
        return result, inp.batch_size
    hi, lo, best, fallback = inp.batch_size, 0, None, None
    b = hi // 2
    while b >= 1 and best is None:
        r, ok = _attempt(path, inp, b)
        fallback = r or fallback
        if ok:
            best, lo = r, b
        else:
            hi, b = b, b // 2
    while best is not None and hi - lo > max(1, hi // 16):
        mid = (lo + hi) // 2
        r, ok = _attempt(path, inp, mid)
        if ok:
            best, lo = r, mid
        else:
            hi = mid
    if best is None and fallback is None:
        raise RuntimeError(f"OOM even at batch 1 (tp={inp.tp})")
    return (best, lo) if best is not None else (fallback, 1)


def run_aic(inp: pm.AicInput, root: Path) -> AicOutcome:
    """One estimate; a failure is a reason, never an exception."""
    path, notes = _model_path(inp, root), inp.notes
    try:
        if inp.mode == "agg":
            r, b = _held_batch(path, inp)
            if b != inp.batch_size:
                notes += (f"batch {inp.batch_size} -> {b}: what its KV cache holds",)
        else:
            r = _estimate(path, inp)
    except Exception as exc:  # its errors are many types; each is a reason to report
        return AicOutcome(inputs=inp, metrics=None, reason=_why(exc))
    if r.kv_cache_warning:
        notes += (" ".join(r.kv_cache_warning.split())[:120],)
    return AicOutcome(inputs=inp, metrics=pm.aic_metrics(r.raw), reason=None,
                      version=f"{r.backend_name} {r.backend_version}", notes=notes)


def aic_side(points: Sequence[pm.PeerPoint], rule: str, mode: str) -> dict[str, AicOutcome]:
    caps = aic_caps()
    out = {}
    with tempfile.TemporaryDirectory(prefix="kvplan-peers-") as tmp:
        for i, p in enumerate(points, 1):
            inp = pm.to_aic(p, caps, rule=rule, mode=mode)
            out[p.id] = (AicOutcome(inputs=None, metrics=None, reason=inp)
                         if isinstance(inp, str) else run_aic(inp, Path(tmp)))
            if i % 20 == 0 or i == len(points):
                print(f"aiconfigurator: {i} of {len(points)} points", file=sys.stderr)
    return out


# ---------------------------------------------------------------- kvplan's side


def bundled_profile(cp: Any) -> Any:
    """The bundled profile for the point's GPU and precision with its engine's host costs
    (default.json 'engines'), as calibration_report's fit prices it."""
    from kvplan.costs.step.profiles import default_profiles

    profile = default_profiles().pick(cp.gpu, cp.precision)
    data = json.loads((DATA / "profiles" / "default.json").read_text("utf-8"))
    host = (data.get("engines") or {}).get(cp.engine)
    return replace(profile, **host) if host else profile


def kvplan_side(ids: set[str], held_out: bool) -> tuple[dict[str, dict[str, float]], dict[
        str, str], dict[tuple[str, str], float] | None]:
    """(point id -> metric -> prediction, id -> why kvplan cannot price it, held-out
    predictions by (id, metric) or None)."""
    from kvplan.analysis.calibration import report as rep
    from kvplan.analysis.calibration.public_set import calibration_set

    cs = calibration_set()
    points = [cp for cp in cs.points if cp.id in ids]
    preds = {}
    for cp in points:
        pred = cp.predict(bundled_profile(cp))
        preds[cp.id] = {m: float(pred[m]) for m in cp.measured if m in pred}
    held = None
    if held_out:
        held = {(r.id, r.metric): r.predicted for r in rep.leave_one_source_out(cs.points)
                if r.id in ids}
    return preds, {k: v for k, v in cs.skipped.items() if k in ids}, held


# ---------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def print_table(rows: Sequence[pm.Row], held_out: bool) -> None:
    extra = " kvplan held out |" if held_out else ""
    print(f"\n| family | metric | values | aiconfigurator | kvplan |{extra}")
    print("|---|---|---|---|---|" + ("---|" if held_out else ""))
    for r in rows:
        tail = f" {_pct(r.kvplan_held_out)} |" if held_out else ""
        print(f"| {r.family} | {r.metric} | {r.n} | {_pct(r.aic)} | {_pct(r.kvplan)} |{tail}")


def print_reasons(title: str, failed: Mapping[str, str]) -> None:
    print(f"\n{title}: {len(failed)} points")
    for why, n in pm.reasons(failed):
        print(f"  {n:3d}  {why}")


def print_points(pairs: Sequence[pm.Pair], aic: Mapping[str, AicOutcome]) -> None:
    print(f"\n{'point':58s} {'metric':>10s} {'measured':>10s} {'aic':>7s} {'kvplan':>7s}  "
          "aiconfigurator tables")
    for r in pairs:
        name = pm.METRIC_NAMES.get(r.metric, r.metric)
        print(f"{r.id[:58]:58s} {name:>10s} {r.measured:>10.4g} {r.error(r.aic):>+7.0%} "
              f"{r.error(r.kvplan):>+7.0%}  {aic[r.id].version}")


def _json(path: Path, summary: dict[str, Any], pairs: Sequence[pm.Pair],
          aic: Mapping[str, AicOutcome]) -> None:
    summary["pairs"] = [asdict(p) for p in pairs]
    summary["aiconfigurator_points"] = {
        k: {"inputs": None if o.inputs is None else asdict(o.inputs), "metrics": o.metrics,
            "reason": o.reason, "tables": o.version, "notes": list(o.notes)}
        for k, o in aic.items()}
    path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {path}")


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--source", action="append", default=[], help="source key (repeatable)")
    ap.add_argument("--held-out", action="store_true",
                    help="add kvplan's leave-one-source-out column (one fit per source)")
    ap.add_argument("--backend-rule", choices=pm.BACKEND_RULES, default="vllm-first")
    ap.add_argument("--aic-mode", choices=("auto", "static"), default="auto",
                    help="static: price served runs as one static batch too")
    ap.add_argument("--points", action="store_true", help="print every compared value")
    ap.add_argument("--json", type=Path, help="also write the comparison to this file")
    ns = ap.parse_args(argv)
    if ns.json is not None and ns.json.resolve().is_relative_to(DATA.resolve()):
        _die(f"--json {ns.json} is inside the bundled data folder; give another path")
    return ns


def main(argv: Sequence[str] | None = None) -> None:
    ns = _args(argv)
    versions = _versions()
    peers = pm.peer_points(ns.source)
    if not peers.points:
        _die(f"no calibration point has source {', '.join(ns.source)}; see "
             "src/kvplan/data/measurements/SOURCES.md for the keys")
    aic = aic_side(peers.points, ns.backend_rule, ns.aic_mode)
    kv, kv_failed, held = kvplan_side({p.id for p in peers.points}, ns.held_out)
    aic_ok = {k: o.metrics for k, o in aic.items() if o.metrics is not None}
    pairs = pm.pairs_for(peers.points, aic_ok, kv, held)
    rows = pm.side_by_side(pairs)
    both = len({r.id for r in pairs})
    print(f"aiconfigurator {versions['aiconfigurator']} (backend rule {ns.backend_rule}, "
          f"mode {ns.aic_mode}) beside kvplan on {len(peers.points)} calibration points; "
          f"both price {both} points, {len(pairs)} measured values")
    tables = sorted({o.version for o in aic.values() if o.version})
    print("aiconfigurator tables used: " + ", ".join(tables))
    if ns.points:
        print_points(pairs, aic)
    print_table(rows, ns.held_out)
    aic_failed = {k: o.reason for k, o in aic.items() if o.reason is not None}
    print_reasons("kvplan could not price", kv_failed)
    print_reasons("aiconfigurator could not express or price", aic_failed)
    if peers.outside:
        print_reasons("in the data files but not calibration points", peers.outside)
    if ns.json is not None:
        _json(ns.json, {"versions": versions, "backend_rule": ns.backend_rule,
                        "aic_mode": ns.aic_mode, "rows": [asdict(r) for r in rows],
                        "kvplan_unpriced": kv_failed, "aiconfigurator_unpriced": aic_failed,
                        "outside_set": peers.outside}, pairs, aic)


if __name__ == "__main__":
    main()
