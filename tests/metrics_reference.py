"""The per-token ITL statistics kvplan computed before issue 20 (every gap materialised, then
numpy's mean / std / median / percentile): the reference the step-record statistics
(kvplan.analysis.metrics, kvplan.analysis.weighted) are tested against, and the 'before'
of benchmarks/bench_metrics.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kvplan.sim.result import FloatArray, SimulationResult


def itl_gaps(r: SimulationResult) -> FloatArray:
    """Every inter-token gap of every request: the step-gap slices of each emission run, then
    the gaps across runs (as ``SimulationResult.itl_s``, one concatenation)."""
    order = np.lexsort((r.seg_first, r.seg_req))
    req, first, last = r.seg_req[order], r.seg_first[order], r.seg_last[order]
    ends = r.steps.end_s
    gaps = np.diff(ends)
    same = req[1:] == req[:-1]
    between = ends[first[1:][same]] - ends[last[:-1][same]]
    parts = [gaps[a:b] for a, b in zip(first.tolist(), last.tolist(), strict=True)]
    return np.concatenate([*parts, between]) if parts else np.zeros(0)


def array_stat(x: FloatArray, percentiles: Sequence[float]) -> tuple[float, float, float,
                                                                      tuple[tuple[float, float],
                                                                            ...]]:
    """(mean, median, std, percentiles) in ms, numpy on the whole array (vLLM: an empty list
    counts as [0])."""
    v = x if len(x) else np.zeros(1)
    return (float(np.mean(v)) * 1000, float(np.median(v)) * 1000, float(np.std(v)) * 1000,
            tuple((float(p), float(np.percentile(v, p)) * 1000) for p in percentiles))


def itl_stat(r: SimulationResult, percentiles: Sequence[float]) -> tuple[float, float, float,
                                                                         tuple[tuple[float,
                                                                                     float], ...]]:
    """The ITL figures of ``compute_metrics`` before issue 20."""
    return array_stat(itl_gaps(r), percentiles)
