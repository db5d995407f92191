"""Physical floors of a measured point: the least TTFT, TPOT, ITL and E2E, and the most output
throughput, its GPU's datasheet peaks allow - bounds a measurement cannot beat (issue 16).

Work is counted by kvplan's own step model (``StepCostModel.cost`` / ``decode_run_cost``:
FLOPs and HBM bytes on the fullest GPU, TP-sharded) and priced at the datasheet's peak
FLOP/s of the compute dtype (F) and its memory bandwidth (B), never a fitted rate::

    work_s(w) = max(w.flops / F, w.bytes / B)          bytes: weights + KV read/write + state
    TTFT >= mean_i work_s(prefill of prompt_i alone)   (the first token needs the prompt)
    TPOT >= mean_i work_s(decode run of request i) / (output_i - 1)
    ITL  >= sum_i work_s(decode run of request i) / sum_i (output_i - 1)
    E2E  >= work_s(prefill of the batch + its decode run)          (static batch)
    throughput <= output tokens / that least duration

A static batch decodes its B requests together (as ``vllm bench latency`` and kvplan's
``static_batch_latency`` run it); a served request's decode steps are priced alone (batch 1,
the least any schedule gives it). A served run's least duration counts every request's FLOPs
and KV traffic, and the weights once per step for at least max(longest output, total output
/ concurrency) steps. Activations are left out of the bytes (they may stay on chip), and a
step's expert weights are the distinct experts its tokens touch at the router's uniform
expectation, E x (1 - (1 - k/E)^T) - the one term that is an expectation, not a bound.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np

from kvplan.costs.memory.resolved import ResolvedDeployment
from kvplan.costs.step.records import BytesMoved, StepCost
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

Side = Literal["compute", "memory"]
SECONDS_METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
THROUGHPUT = "output_throughput_tok_s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Load:
    """The requests of a measured point as the floors see them."""

    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    static: bool = False
    """A static batch: every request prefills and decodes together (else: served)."""
    concurrency: int = 1
    """The most requests in flight (a step emits at most this many output tokens)."""


def static_load(batch: int, prompt_tokens: int, output_tokens: int) -> Load:
    """B identical requests run as one batch (``vllm bench latency``, TensorRT-LLM tables)."""
    return Load(prompt_tokens=(prompt_tokens,) * batch, output_tokens=(output_tokens,) * batch,
                static=True, concurrency=batch)


def served_load(prompt_tokens: tuple[int, ...], output_tokens: tuple[int, ...],
                concurrency: int | None = None) -> Load:
    """Requests through a server (``None``: no client cap, every request may be in flight)."""
    n = len(prompt_tokens)
    return Load(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                concurrency=max(1, min(n, concurrency or n)))


@dataclass(frozen=True, slots=True)
class Work:
    """FLOPs and HBM bytes (one GPU) some part of a run cannot do without."""

    flops: float
    bytes: int

    def __add__(self, other: Work) -> Work:
        return Work(self.flops + other.flops, self.bytes + other.bytes)

    def times(self, n: int) -> Work:
        """The work of ``n`` such parts."""
        return Work(self.flops * n, self.bytes * n)


def _work(cost: StepCost, weights: bool = True) -> Work:
    return Work(cost.flops.total, _bytes(cost.bytes, weights))


def _bytes(b: BytesMoved, weights: bool = True) -> int:
    """HBM bytes a step must move: weights, KV read and write, recurrent state."""
    return (b.weights if weights else 0) + b.kv_read + b.kv_write + b.state


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricFloor:
    """One metric's physical limit and the side of the roofline that sets it."""

    metric: str
    value: float
    """Seconds for a time metric (a floor); tokens/s for throughput (a ceiling)."""
    side: Side


@dataclass(frozen=True, slots=True, kw_only=True)
class Floors:
    """A point's physical limits on one GPU at its datasheet peaks."""

    gpu: str
    precision: str
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    limits: tuple[MetricFloor, ...]

    def limit(self, metric: str) -> MetricFloor | None:
        """The limit on ``metric`` (None: no floor for it here)."""
        return next((f for f in self.limits if f.metric == metric), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rates:
    flops_per_s: float
    bytes_per_s: float

    def seconds(self, w: Work) -> tuple[float, Side]:
        c, m = w.flops / self.flops_per_s, w.bytes / self.bytes_per_s
        return (c, "compute") if c >= m else (m, "memory")


def point_floors(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig, load: Load,
                 resolved: ResolvedDeployment | None = None) -> Floors:
    """The physical limits of ``load`` on ``hw`` (datasheet peak FLOP/s and bandwidth)."""
    timer = StepCostModel(model, hw, engine, silicon=False, resolved=resolved)
    precision = timer.constants.compute_precision
    rates = _Rates(flops_per_s=hw.peak_flops_for(precision),
                   bytes_per_s=hw.mem_bw_bytes_per_s)
    limits = _static(timer, rates, load) if load.static else _served(timer, rates, load)
    return Floors(gpu=hw.id, precision=precision, peak_flops_per_s=rates.flops_per_s,
                  bandwidth_bytes_per_s=rates.bytes_per_s, limits=limits)


def _prefill(timer: StepCostModel, prompts: list[int]) -> StepCost:
    n = np.asarray(prompts, dtype=np.int64)
    return timer.cost(n, np.zeros_like(n))


def _decode(timer: StepCostModel, contexts: list[int], steps: int) -> StepCost:
    return timer.decode_run_cost(np.asarray(contexts, dtype=np.int64), steps)


def _static(timer: StepCostModel, rates: _Rates, load: Load) -> tuple[MetricFloor, ...]:
    """One batch of B equal requests: the prompt alone, the batch's decode run, the whole."""
    b, p, o = len(load.prompt_tokens), load.prompt_tokens[0], load.output_tokens[0]
    ttft = rates.seconds(_work(_prefill(timer, [p])))
    whole = _work(_prefill(timer, [p] * b))
    out = [MetricFloor(metric="ttft_s", value=ttft[0], side=ttft[1])]
    if o > 1:
        run = _work(_decode(timer, [p] * b, o - 1))
        tpot = rates.seconds(run)
        whole = whole + run
        out += [MetricFloor(metric=m, value=tpot[0] / (o - 1), side=tpot[1])
                for m in ("tpot_s", "itl_s")]
    e2e = rates.seconds(whole)
    out += [MetricFloor(metric="e2e_s", value=e2e[0], side=e2e[1]),
            MetricFloor(metric=THROUGHPUT, value=b * o / e2e[0], side=e2e[1])]
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Request:
    """One served request's floors: its prefill alone, its decode run alone."""

    first: tuple[float, Side]
    run: tuple[float, Side] | None
    work: Work
    """Its FLOPs and KV traffic, weights left out (the run counts those per step)."""


def _request(timer: StepCostModel, rates: _Rates, prompt: int, output: int) -> _Request:
    first = _prefill(timer, [prompt])
    work = _work(first, weights=False)
    if output == 1:
        return _Request(rates.seconds(_work(first)), None, work)
    run = _decode(timer, [prompt], output - 1)
    return _Request(rates.seconds(_work(first)), rates.seconds(_work(run)),
                    work + _work(run, weights=False))


def _served(timer: StepCostModel, rates: _Rates, load: Load) -> tuple[MetricFloor, ...]:
    """Served requests: each prefill and decode run alone, and the run's least duration."""
    pairs = list(zip(load.prompt_tokens, load.output_tokens, strict=True))
    shapes = Counter(pairs)
    req = {key: _request(timer, rates, *key) for key in shapes}
    total = Work(0.0, 0)
    for key, n in shapes.items():
        total = total + req[key].work.times(n)
    firsts = [req[k].first for k in pairs]
    out = [MetricFloor(metric="ttft_s", value=sum(s for s, _ in firsts) / len(firsts),
                       side=_side(firsts))]
    decodes = [(run, k[1] - 1) for k in pairs if (run := req[k].run) is not None]
    if decodes:
        per_token = [(s / gaps, side) for (s, side), gaps in decodes]
        itl = sum(s for (s, _), _g in decodes) / sum(g for _, g in decodes)
        out += [MetricFloor(metric="tpot_s", value=sum(s for s, _ in per_token) / len(decodes),
                            side=_side(per_token)),
                MetricFloor(metric="itl_s", value=itl, side=_side(per_token))]
    return (*out, _ceiling(timer, rates, load, total))


def _side(values: list[tuple[float, Side]]) -> Side:
    """The side that sets most of a sum of floors."""
    compute = sum(s for s, side in values if side == "compute")
    return "compute" if 2 * compute >= sum(s for s, _ in values) else "memory"


def _ceiling(timer: StepCostModel, rates: _Rates, load: Load, total: Work) -> MetricFloor:
    """Output tokens over the least duration: every request's FLOPs and KV traffic, and the
    weights once per step for the fewest steps the run can take."""
    outputs = sum(load.output_tokens)
    steps = max(max(load.output_tokens), math.ceil(outputs / load.concurrency))
    weights = _decode(timer, [1], 1).bytes.weights  # one step of one token
    s, side = rates.seconds(total + Work(0.0, steps * weights))
    return MetricFloor(metric=THROUGHPUT, value=outputs / s, side=side)
