"""Time the whole `kvplan` command line (process start to answer), next to an older checkout.

Cases: bare `python -c pass`; `kvplan --help`; `kvplan kv MODEL --json`; `kvplan simulate` on
random-10k (bench_sim.py's workload) and on the bundled azure-conv trace, each with --json and
with the rich table. Every case runs once per round, the order rotated each round; the report
gives min / median wall and median CPU (user + sys of the child) and, with ``--baseline DIR``
(a kvplan checkout with its own .venv, e.g. `git worktree add DIR main` + scripts/setup.sh
there), the after-vs-before ratios from this one run, so the figures survive a noisy machine.
Each tree's kvplan sources are byte-compiled first (``compileall``), as a pip install does:
with PYTHONDONTWRITEBYTECODE set, an editable checkout would otherwise recompile its ~70
modules on every run (~0.1 s) and the figures would measure the compiler.

Usage: python benchmarks/bench_cli_startup.py [--repeat 7] [--baseline DIR] [--cases a,b]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RANDOM_10K = ["simulate", "meta-llama/Llama-2-7b-hf", "--gpu", "H100", "--dataset", "random",
              "--random-input-len", "512", "--random-output-len", "128",
              "--random-range-ratio", "0.5", "--num-prompts", "10000", "--request-rate", "20",
              "--seed", "0", "--max-num-batched-tokens", "512", "--max-num-seqs", "128"]
AZURE = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dataset", "azure-conv"]
CASES = {
    "help": ["--help"],
    "kv --json": ["kv", "meta-llama/Llama-2-70b-hf", "--json"],
    "random-10k --json": [*RANDOM_10K, "--json"],
    "random-10k text": RANDOM_10K,
    "azure-conv --json": [*AZURE, "--json"],
    "azure-conv text": AZURE,
}
"""Case name -> kvplan's arguments."""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command (it must succeed)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if p.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd[:4])}... failed: {p.stderr.decode()[-300:]}")
    return wall, cpu


def _compile(python: str) -> None:
    """Byte-compile the kvplan package that ``python`` imports."""
    where = subprocess.run([python, "-c", "import kvplan, os; print(os.path.dirname("
                            "kvplan.__file__))"], capture_output=True, text=True, check=True)
    subprocess.run([python, "-m", "compileall", "-q", where.stdout.strip()], check=True,
                   capture_output=True)


def _commands(a: argparse.Namespace) -> dict[str, list[str]]:
    trees = [("after", sys.executable)]
    if a.baseline:
        trees.append(("before", str(Path(a.baseline) / ".venv" / "bin" / "python")))
    wanted = a.cases.split(",") if a.cases else list(CASES)
    out = {"python -c pass": [sys.executable, "-c", "pass"]}
    for name in wanted:
        for tag, py in trees:
            out[f"{name} {tag}"] = [py, "-m", "kvplan", *CASES[name]]
    return out


def _report(got: dict[str, list[tuple[float, float]]]) -> None:
    print(f"{'case':<28}{'wall min':>9}{'median':>9}{'cpu median':>11}")
    cpu = {}
    for name, runs in got.items():
        walls = [w for w, _ in runs]
        cpu[name] = statistics.median(c for _, c in runs)
        print(f"{name:<28}{min(walls):>9.3f}{statistics.median(walls):>9.3f}{cpu[name]:>11.3f}")
    pairs = [(n[:-6], cpu[n], cpu.get(n[:-6] + " before")) for n in cpu if n.endswith(" after")]
    if any(before for _, _, before in pairs):
        print("\nCPU-time ratios, before / after (x = times faster; from this one run)")
        for name, after, before in pairs:
            if before:
                print(f"  {name:<20} {before / after:5.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", help="a kvplan checkout with its own .venv (the 'before')")
    ap.add_argument("--cases", help=f"comma-separated subset of: {', '.join(CASES)}")
    a = ap.parse_args()
    cmds = _commands(a)
    for python in {cmd[0] for cmd in cmds.values()}:
        _compile(python)
    names = list(cmds)
    got: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for i in range(a.repeat):
        for n in names[i % len(names):] + names[:i % len(names)]:
            got[n].append(_run(cmds[n]))
    _report(got)


if __name__ == "__main__":
    main()
