"""The step model's token tables stop at TABLE_CAP tokens; past it a step is priced along the
tables' last step (every kernel table is on its roofline extrapolation there). A static
batch's one-step prefill of 16,384 x 2,048 tokens built tables per token count: ~5 GB and
44 s for one `latency --sweep batch=...` row, and the web server's sweep could be killed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kvplan
from kvplan.costs.step import coefficients as cf
from kvplan.costs.step import roofline as rf
from kvplan.costs.step.coefficients import TABLE_CAP, at
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.hardware import load_gpu


def test_at_extends_the_last_step() -> None:
    t = np.array([0.0, 1.0, 3.0, 6.0])
    assert at(t, 2) == 3.0 and at(t, 5) == 6.0 + 2 * 3.0
    assert at(t, np.int64(3)) == 6.0
    assert at(t, np.array([1, 3, 4, 10])).tolist() == [1.0, 6.0, 9.0, 27.0]
    assert at(t, np.array([], dtype=np.int64)).size == 0


def _steps(model: str, gpu: str, tp: int) -> list[float]:
    m = StepCostModel(kvplan.load_model(model), load_gpu(gpu),
                      kvplan.EngineConfig(tensor_parallel_size=tp))
    out = []
    for tokens, requests in ((300_000, 100), (200_000, 1), (1_000_000, 500)):
        n = np.full(requests, tokens // requests, dtype=np.int64)
        out.append(m.step_time_s(n, np.zeros(requests, dtype=np.int64)))
    assert len(m._co.gemm_t) <= TABLE_CAP + 1
    return out


@pytest.mark.parametrize(("model", "gpu", "tp", "rel"), [
    ("meta-llama/Llama-3.1-8B", "H100", 1, 1e-9),  # dense: linear past the edge, exactly
    ("meta-llama/Llama-3.1-8B", "L4", 1, 1e-9),  # the roofline (floored by L40S)
    ("openai/gpt-oss-20b", "L40S", 1, 1e-9),
    ("Qwen/Qwen3-30B-A3B", "H200", 2, 5e-3),  # the MoE rows' power-law edge: within 0.5%
])
def test_past_the_cap_matches_grown_tables(monkeypatch: pytest.MonkeyPatch, model: str,
                                           gpu: str, tp: int, rel: float) -> None:
    capped = _steps(model, gpu, tp)
    monkeypatch.setattr(cf, "TABLE_CAP", 1 << 30)
    monkeypatch.setattr(rf, "TABLE_CAP", 1 << 30)
    m = StepCostModel(kvplan.load_model(model), load_gpu(gpu),
                      kvplan.EngineConfig(tensor_parallel_size=tp))
    grown = [m.step_time_s(np.full(r, t // r, dtype=np.int64), np.zeros(r, dtype=np.int64))
             for t, r in ((300_000, 100), (200_000, 1), (1_000_000, 500))]
    assert capped == pytest.approx(grown, rel=rel)


def test_a_huge_sweep_row_stays_small() -> None:
    # the peak of Python and numpy allocations while the sweep runs, after a small one has
    # loaded and cached the kernel tables (a cold cache's derivation is not the sweep's)
    code = ("import sys, tracemalloc; from kvplan.cli import main\n"
            "def run(batch):\n"
            "    sys.argv = ['kvplan', 'latency', 'meta-llama/Llama-3.1-8B', '--gpu', 'H100',"
            " '--prompt', '2048', '--output', '256', '--sweep', 'batch=' + batch]\n"
            "    try:\n        main()\n    except SystemExit:\n        pass\n"
            "run('1,2')\ntracemalloc.start()\nrun('1,16384,1048576')\n"
            "print('PEAK', tracemalloc.get_traced_memory()[1])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    peak = int(run.stdout.rsplit("PEAK", 1)[1])
    assert peak < 300 * 2**20, peak  # was ~5 GB at 16,384 x 2,048 tokens
    assert "1048576" in run.stdout and "Traceback" not in run.stderr
