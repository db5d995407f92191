"""kvplan's disaggregated and expert-parallel predictions against held-out public measurements.

Reads ``src/kvplan/data/measurements/public_disagg_ep.json`` (never fitted: these points judge),
asks kvplan the question each point can be put as (``kvplan latency`` with ``-dp``,
``--enable-expert-parallel`` and DeepEP for one phase measured alone (its normal kernels,
``deepep_high_throughput``, for prefill and ``deepep_low_latency`` for decode, as SGLang's
``--deepep-mode auto`` runs them);
``kvplan simulate --disagg xPyD`` for a served fleet), and prints per point the prediction,
the measurement and |pred / meas - 1|, then the median per metric family. Points kvplan
cannot express are listed with the reason. Each question runs ``python -m kvplan`` in a fresh
process (about 2 s each). ``--aiconfigurator`` adds aiconfigurator's estimate of the same
static question where that optional package is installed.

Usage: python benchmarks/compare_disagg_public.py [--point ID ...] [--aiconfigurator]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

NODE_GPUS = 8  # the public figures are per 8-GPU node
DATA = "public_disagg_ep.json"


class Unexpressible(Exception):
    """A point kvplan cannot put as a question; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One kvplan command and how to read each of the point's metrics off its JSON."""

    argv: tuple[str, ...]
    readers: Mapping[str, Callable[[Mapping[str, Any]], float]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One metric of one point: what kvplan predicts beside what was printed."""

    point: str
    metric: str
    family: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """|predicted / measured - 1|."""
        return abs(self.predicted / self.measured - 1.0)


FAMILY = {"prefill_throughput_tok_s_per_node": "prefill tok/s per node (EP)",
          "output_throughput_tok_s_per_node": "decode tok/s per node (EP)",
          "median_ttft_ms": "disagg TTFT", "median_itl_ms": "disagg ITL",
          "output_throughput_tok_s": "disagg output tok/s"}


def load_points() -> list[dict[str, Any]]:
    """The data file's points as stored (citations and metrics as printed)."""
    from kvplan import input_file

    text = input_file.read_text(input_file.package_file("data", "measurements", DATA))
    points: list[dict[str, Any]] = json.loads(text)["points"]
    return points


def _ep_args(p: Mapping[str, Any], phase: str) -> list[str]:
    par = p["parallelism"][phase]
    args = ["latency", p["model_config"], "--gpu", p["gpu"], "-tp", str(par["tp"]),
            "-dp", str(par["dp"])]
    if par.get("ep", 1) > 1:
        kernels = "deepep_high_throughput" if phase == "prefill" else "deepep_low_latency"
        args += ["--enable-expert-parallel", "--all2all-backend", kernels]
    if p.get("expert_balance") == "perfect":
        args += ["--expert-imbalance", "1.0"]
    if "two-batch overlap" in p.get("features", ()) and par.get("ep", 1) > 1:
        args.append("--enable-dbo")  # SGLang's two-batch overlap, as vLLM's DBO runs it
    return args


def _prefill_question(p: Mapping[str, Any]) -> Question:
    w, gpus = p["workload"], p["gpus"]
    per_gpu, prompt = w["tokens_per_gpu"], w["input_len"]
    if per_gpu % prompt:
        raise Unexpressible(f"{per_gpu} tokens per GPU is not a whole number of "
                            f"{prompt}-token prompts")
    batch = gpus * per_gpu // prompt
    argv = [*_ep_args(p, "prefill"), "--prompt", str(prompt), "--output", "1", "--batch",
            str(batch), "--max-num-batched-tokens", str(per_gpu)]

    def per_node(j: Mapping[str, Any]) -> float:
        return NODE_GPUS * per_gpu / float(j["phases"]["prefill"]["seconds"]["total_s"])
    return Question(argv=tuple(argv), readers={"prefill_throughput_tok_s_per_node": per_node})


def _decode_question(p: Mapping[str, Any]) -> Question:
    w, gpus = p["workload"], p["gpus"]
    per_gpu = w["requests_per_gpu"]
    # Output 2: TPOT is then one decode step at the printed KV length.
    argv = [*_ep_args(p, "decode"), "--prompt", str(w["kv_len"]), "--output", "2", "--batch",
            str(gpus * per_gpu), "--max-num-batched-tokens", "16384"]

    def per_node(j: Mapping[str, Any]) -> float:
        return NODE_GPUS * per_gpu / float(j["tpot_s"])
    return Question(argv=tuple(argv), readers={"output_throughput_tok_s_per_node": per_node})


def _node_link(gpu: str) -> str:
    """The fastest in-node KV link of the catalog that joins ``gpu`` (A100: nvlink3)."""
    from kvplan.specs.links import link_catalog

    ok = [x for x in link_catalog() if x.scope == "node" and x.joins(gpu)]
    return max(ok, key=lambda x: x.bytes_per_s_per_gpu).id


def _serving_question(p: Mapping[str, Any]) -> Question:
    w, par = p["workload"], p["parallelism"]
    pre, dec = par["prefill"], par["decode"]
    argv = ["simulate", p["model_config"], "--gpu", p["gpu"],
            "--disagg", par["disagg"], "--prefill-tp", str(pre["tp"]),
            "--decode-tp", str(dec["tp"]), "--kv-link", _node_link(p["gpu"]),
            "--dataset", "random", "--num-prompts", str(w["num_prompts"]),
            "--random-input-len", str(w["input_len"]),
            "--random-output-len", str(w["output_len"]),
            "--request-rate", str(w["request_rate"]), "--seed", "0"]
    readers: dict[str, Callable[[Mapping[str, Any]], float]] = {
        "median_ttft_ms": lambda j: float(j["median_ttft_ms"]),
        "median_itl_ms": lambda j: float(j["median_itl_ms"]),
        "output_throughput_tok_s": lambda j: float(j["output_throughput"])}
    return Question(argv=tuple(argv), readers=readers)


NOT_REPLAYABLE = {
    "headline": "a fleet headline without a stated request rate, prefill/decode split or "
                "concurrency: the page measures each phase alone (see its phase points)",
    "production": "24-hour production averages (mixed lengths, 56.3% on-disk cache hits, "
                  "elastic node counts): no workload kvplan can replay",
}


def question(p: Mapping[str, Any]) -> Question:
    """The kvplan command for point ``p``; Unexpressible with the reason when there is none."""
    mode = p["workload"]["mode"]
    if mode in NOT_REPLAYABLE:
        raise Unexpressible(NOT_REPLAYABLE[mode])
    if p.get("speculative"):
        raise Unexpressible(f"{p['speculative']}: speculative decoding is not modelled")
    build = {"prefill_phase": _prefill_question, "decode_phase": _decode_question,
             "serving_disagg": _serving_question}.get(mode)
    if build is None:
        raise Unexpressible(f"workload mode {mode!r} has no kvplan question")
    return build(p)


def run_kvplan(q: Question) -> dict[str, Any]:
    """Runs ``python -m kvplan ARGV --json``; Unexpressible with kvplan's own line on exit 2."""
    proc = subprocess.run([sys.executable, "-m", "kvplan", *q.argv, "--json"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise Unexpressible("kvplan: " + (lines[-1] if lines else f"exit {proc.returncode}"))
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def compare(points: Sequence[Mapping[str, Any]]) -> tuple[list[Row], list[str], list[str]]:
    """Rows for every expressible metric, the reasons for the rest, and the commands run."""
    rows: list[Row] = []
    skipped: list[str] = []
    commands: list[str] = []
    for p in points:
        try:
            q = question(p)
            commands.append(f"{p['id']}: kvplan {' '.join(q.argv)}")
            answer = run_kvplan(q)
        except Unexpressible as exc:
            skipped.append(f"{p['id']}: {exc}")
            continue
        rows.extend(Row(point=p["id"], metric=m, family=FAMILY[m], measured=float(v),
                        predicted=q.readers[m](answer))
                    for m, v in p["metrics"].items() if m in q.readers)
    return rows, skipped, commands


def print_rows(rows: Sequence[Row], aic: Mapping[tuple[str, str], float]) -> None:
    """The per-point table (markdown), with aiconfigurator's column when given."""
    extra = " aiconfigurator | aic error |" if aic else ""
    print(f"| point | metric | measured | kvplan | kvplan error |{extra}")
    print("|---|---|---|---|---|" + ("---|---|" if aic else ""))
    for r in rows:
        tail = ""
        if aic:
            a = aic.get((r.point, r.metric))
            tail = (f" {a:.4g} | {abs(a / r.measured - 1):.0%} |" if a is not None
                    else " - | - |")
        print(f"| {r.point} | {r.family} | {r.measured:.4g} | {r.predicted:.4g} | "
              f"{r.error:.0%} |{tail}")


def print_medians(rows: Sequence[Row], aic: Mapping[tuple[str, str], float]) -> None:
    """Median |pred / meas - 1| per metric family (aiconfigurator's over the values it gave)."""
    extra = " aiconfigurator (values) |" if aic else ""
    print(f"\n| metric family | values | kvplan median abs error |{extra}")
    print("|---|---|---|" + ("---|" if aic else ""))
    for family in dict.fromkeys(r.family for r in rows):
        errs = [r.error for r in rows if r.family == family]
        tail = ""
        if aic:
            mine = [abs(aic[(r.point, r.metric)] / r.measured - 1) for r in rows
                    if r.family == family and (r.point, r.metric) in aic]
            tail = f" {median(mine):.0%} ({len(mine)}) |" if mine else " - (0) |"
        print(f"| {family} | {len(errs)} | {median(errs):.0%} |{tail}")


def _peer() -> Any:
    """compare_disagg_aic.py, beside this file (the optional aiconfigurator side)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("compare_disagg_aic.py")
    spec = importlib.util.spec_from_file_location("compare_disagg_aic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--point", action="append", default=[], help="point id (repeatable)")
    parser.add_argument("--aiconfigurator", action="store_true",
                        help="add aiconfigurator's estimate (optional package)")
    ns = parser.parse_args(argv)
    points = [p for p in load_points() if not ns.point or p["id"] in ns.point]
    if not points:
        print(f"no point named {', '.join(ns.point)}", file=sys.stderr)
        return 2
    rows, skipped, commands = compare(points)
    aic: dict[tuple[str, str], float] = {}
    if ns.aiconfigurator:
        asked = {r.point for r in rows}
        aic, aic_notes = _peer().aic_estimates([p for p in points if p["id"] in asked])
        skipped.extend(f"aiconfigurator {line}" for line in aic_notes)
    print_rows(rows, aic)
    if rows:
        print_medians(rows, aic)
    print("\nkvplan commands (each with --json):")
    print("\n".join(f"  {c}" for c in commands))
    print("\nnot expressed:")
    print("\n".join(f"  {s}" for s in skipped) or "  (none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
