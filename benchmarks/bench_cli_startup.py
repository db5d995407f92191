"""Time `kvplan kv MODEL --json` end to end (process start to answer) against bare Python.

Reports min/median/max over N runs and the ratio to `python -c pass` measured in the same run,
so the figure survives a noisy machine. Usage: python benchmarks/bench_cli_startup.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def _time(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    bare = _time([sys.executable, "-c", "pass"], runs)
    kv = _time([sys.executable, "-m", "kvplan", "kv", "meta-llama/Llama-2-70b-hf", "--json"], runs)
    for name, xs in (("python -c pass", bare), ("kvplan kv --json", kv)):
        print(
            f"{name:18s} min {min(xs):.3f} s  median {statistics.median(xs):.3f} s  "
            f"max {max(xs):.3f} s"
        )
    ratio = statistics.median(kv) / statistics.median(bare)
    print(f"ratio kvplan/bare python (medians): {ratio:.1f}x")


if __name__ == "__main__":
    main()
