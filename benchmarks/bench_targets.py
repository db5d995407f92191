"""Issue 20's targets in one run: this checkout, an older one and sched-sim, side by side.

Run: .venv/bin/python benchmarks/bench_targets.py [--rounds 3] [--baseline DIR]
     [--sched-sim VENV] [--cases a,b,...]

Cases (each a fresh process, timed from outside: wall, CPU = user + sys of it and its
children, peak RSS; os.wait4):
  cli-10k     `kvplan simulate` on bench_sim.py's random-10k workload (Llama-2-7B, H100,
              perf-2/perf-3's recipe) --json; sched-sim gets the same requests (its `trace`
              command, chunked scheduler, budget 512) from VENV/bin/sched-sim
  azure       `kvplan simulate meta-llama/Llama-3.1-8B --gpu H100 --dataset azure-conv --json`
  cli-1m      the random-10k recipe at 1,000,000 requests --json
  plan-240    bench_plan.py's funnel over 240 configurations (one chunk size), --workers 2
  web         /api/simulate (200 requests) --web-calls times (200) in sequence through
              FastAPI's in-process TestClient after one warm-up; its p50 ms
  kv, help    `kvplan kv meta-llama/Llama-3.1-8B` (the table), `kvplan --help`
  pass        `python -c pass`, the floor
``after`` is this checkout, ``before`` the checkout in --baseline DIR with its own .venv;
both trees are byte-compiled first (a pip install is). Every case runs once per round, the
order rotated each round, after one untimed run of each (the caches warm); each tree has its
own KVPLAN_CACHE_DIR. The table gives medians (min-max) and the ratios of this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sim import LLAMA2, LLAMA3, RANDOM_FLAGS, _write_inputs  # the same workloads

KV_MODEL = LLAMA3
WEB_QUERY = {"model": LLAMA3, "gpu": "H100", "num_prompts": 200, "request_rate": 20,
             "random_input_len": 1024, "random_output_len": 128, "seed": 0}
ONE_M = [("1000000" if f == "10000" else f) for f in RANDOM_FLAGS]
KVPLAN_CASES = {
    "cli-10k": ["-m", "kvplan", "simulate", LLAMA2, "--gpu", "H100", *RANDOM_FLAGS, "--json"],
    "azure": ["-m", "kvplan", "simulate", LLAMA3, "--gpu", "H100", "--dataset", "azure-conv",
              "--json"],
    "cli-1m": ["-m", "kvplan", "simulate", LLAMA2, "--gpu", "H100", *ONE_M, "--json"],
    "plan-240": [str(Path(__file__).resolve().parent / "bench_plan.py"), "--one", "funnel-240",
                 "--workers", "2"],
    "web": [str(Path(__file__).resolve()), "--one", "web"],
    "kv": ["-m", "kvplan", "kv", KV_MODEL],
    "help": ["-m", "kvplan", "--help"],
}


def _web(calls: int) -> dict[str, Any]:
    """p50 / p99 ms of GET /api/simulate, ``calls`` in sequence, in this process."""
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    client = TestClient(create_app(WebSettings()))
    assert client.get("/api/simulate", params=WEB_QUERY).status_code == 200
    ms = []
    for _ in range(calls):
        t0 = time.perf_counter()
        r = client.get("/api/simulate", params=WEB_QUERY)
        ms.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, r.text
    q = statistics.quantiles(ms, n=100)
    return {"p50_ms": statistics.median(ms), "p99_ms": q[98], "bytes": len(r.content)}


FIGURES = ("plan-240", "web")
"""Cases whose last stdout line is a JSON object of their own figures."""


def _measure(cmd: list[str], figures: bool, cache: str | None = None) -> dict[str, Any]:
    env = None if cache is None else {**os.environ, "KVPLAN_CACHE_DIR": cache}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if p.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} exited {p.returncode}: {errors[-600:]}")
    got: dict[str, Any] = {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                           "rss_mib": ru.ru_maxrss / 1024}
    if figures:
        got.update(json.loads(text.strip().splitlines()[-1]))
    return got


def _compile(python: str) -> None:
    where = subprocess.run([python, "-c", "import kvplan, os; print(os.path.dirname("
                            "kvplan.__file__))"], capture_output=True, text=True, check=True)
    subprocess.run([python, "-m", "compileall", "-q", where.stdout.strip()], check=True,
                   capture_output=True)


def _commands(a: argparse.Namespace, trace: Path, hw: Path) -> dict[str, list[str]]:
    trees = [("after", sys.executable)]
    if a.baseline:
        trees.append(("before", str(Path(a.baseline) / ".venv" / "bin" / "python")))
    wanted = a.cases.split(",")
    out: dict[str, list[str]] = {}
    if "pass" in wanted:
        out["pass"] = [sys.executable, "-c", "pass"]
    for name in (n for n in wanted if n in KVPLAN_CASES):
        for tag, py in trees:
            extra = [str(a.web_calls)] if name == "web" else []
            out[f"{name} {tag}"] = [py, *KVPLAN_CASES[name], *extra]
    if a.sched_sim and "cli-10k" in wanted:
        out["cli-10k sched-sim"] = [str(Path(a.sched_sim) / "bin" / "sched-sim"), "trace",
                                    str(trace), "--scheduler", "chunked", "--hardware", str(hw),
                                    "--token-budget", "512", "--no-gantt"]
    return out


def _rounds(cmds: dict[str, list[str]], rounds: int,
            caches: Path) -> dict[str, list[dict[str, Any]]]:
    """Each case once untimed (its caches filled, as a user's second run finds them), then
    once per round; each tree keeps its own cache folder (their formats may differ)."""
    names = list(cmds)
    where = {n: str(caches / n.rsplit(" ", 1)[-1]) for n in names}
    for n in names:
        _measure(cmds[n], n.split(" ")[0] in FIGURES, where[n])
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for i in range(rounds):
        for n in names[i % len(names):] + names[:i % len(names)]:
            got[n].append(_measure(cmds[n], n.split(" ")[0] in FIGURES, where[n]))
            r = got[n][-1]
            print(f"  round {i + 1}/{rounds} {n}: {r['wall_s']:.3f} s, cpu {r['cpu_s']:.3f} s, "
                  f"{r['rss_mib']:.0f} MiB", file=sys.stderr, flush=True)
    return got


def _med(runs: list[dict[str, Any]], key: str) -> str:
    v = [r[key] for r in runs]
    return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"


def _report(got: dict[str, list[dict[str, Any]]]) -> None:
    print(f"{'case':<20} {'wall s, median (min-max)':<26} {'CPU s':<26} {'peak RSS MiB':<14}"
          " own figure")
    for n, runs in got.items():
        own = ""
        if "p50_ms" in runs[0]:
            own = f"p50 {_med(runs, 'p50_ms')} ms, p99 {_med(runs, 'p99_ms')} ms"
        elif "s" in runs[0]:
            own = f"plan() {_med(runs, 's')} s; {runs[0]['winner']}; JSON {runs[0]['doc']}"
        rss = statistics.median(r["rss_mib"] for r in runs)
        print(f"{n:<20} {_med(runs, 'wall_s'):<26} {_med(runs, 'cpu_s'):<26} {rss:<14.0f} {own}")
    med = {n: {k: statistics.median(r[k] for r in runs) for k in runs[0]
               if isinstance(runs[0][k], float)} for n, runs in got.items()}
    print("\nratios of medians, this one run (x = times faster)")
    for case in dict.fromkeys(n.rsplit(" ", 1)[0] for n in got if " " in n):
        a, b, s = (med.get(f"{case} {t}") for t in ("after", "before", "sched-sim"))
        parts = []
        for key in ("wall_s", "cpu_s", "rss_mib", "p50_ms", "s"):
            if a and b and key in a and key in b:
                parts.append(f"before/after {key} {b[key] / a[key]:.2f}x")
            if a and s and key in a and key in s:
                parts.append(f"sched-sim/after {key} {s[key] / a[key]:.2f}x")
        print(f"  {case:<10} " + "; ".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="a kvplan checkout with its own .venv (the 'before')")
    ap.add_argument("--sched-sim", help="a venv with sched-sim installed (pip install sched-sim)")
    ap.add_argument("--cases", default="cli-10k,azure,cli-1m,plan-240,web,kv,help,pass")
    ap.add_argument("--web-calls", type=int, default=200)
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(_web(int(a.one[1]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        trace, hw = _write_inputs(Path(tmp))
        cmds = _commands(a, trace, hw)
        for python in {c[0] for c in cmds.values() if c[0].endswith("python")}:
            _compile(python)
        _report(_rounds(cmds, a.rounds, Path(tmp) / "caches"))


if __name__ == "__main__":
    main()
