"""The optional compiled core (``_core.c``): when a run goes to it, and how.

The core runs vLLM v1's scheduling rules step by step in C (general steps only: no decode
fast-forward, a step costs O(scheduled requests x KV groups) there). It is used when all of
these hold (``pick``), else the pure-Python loop runs:

    the extension was built (pip compiles it where a C compiler exists; optional)
    KVPLAN_SIM_CORE is not "python" (that forces the pure-Python reference path)
    fast=True (fast=False is the step-by-step Python reference)
    the timer gives an ``AggregateForm`` (aggregate_form) and the core's step times equal
    the timer's step_time_s (and step_time_agg, where it has one) on a few spot batches

Every KV layout goes: full, sliding-window and state (hybrid) groups, MLA (one full
group); equal groups are merged first (the same blocks per group, their bytes added).
Prefix caching, trace prefix hashes, shared_prefix_tokens and long_prefill_token_threshold
are in too.

The step-time model stays in Python: the timer turns itself into tables over a step's
tokens and scalars (kvplan.costs.step.batch.AggregateForm); the C code takes the form's sums
(sliding-window and MLA prefill ones included) and evaluates that fixed expression with the
same float operations, so every timestamp equals the Python path's to the bit
(tests/test_sim_core.py, tests/test_sim_core_shapes.py).
"""

from __future__ import annotations

import importlib
import os
from collections import OrderedDict
from itertools import chain
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kvplan.costs.step.sums import longest_chunk
from kvplan.sim.blocks import KvShape
from kvplan.sim.result import FloatArray, IntArray, KvSeries, SimulationResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvplan.sim.blocks import BlockPool
    from kvplan.sim.scheduler import Limits, Scheduler
    from kvplan.sim.state import SimState


class _Loop(Protocol):
    """What the core reads from and writes back to the simulator's loop (simulator._Loop);
    a protocol, so the core does not import the simulator that imports it."""

    s: SimState
    timer: Any
    shape: KvShape
    limits: Limits
    pool: BlockPool
    sched: Scheduler
    fast: bool
    validate: bool
    progress: Callable[[int, int], None] | None
    slots: list[float] | None
    reasons: dict[int, str]
    arrivals: Any
    order: Any
    delay: Any
    admit: Any
    done: int
    query_tokens: int
    lookup_hits: int
    prefill_blocks: int
    decode_blocks: int
    admission_peak: int

    def _package(self, steps: KvSeries, segs: tuple[IntArray, IntArray, IntArray],
                 preempt_steps: IntArray) -> SimulationResult: ...

ENV = "KVPLAN_SIM_CORE"
"""Set to "python" to force the pure-Python loop (the reference the core is tested against)."""
CORE_ABI = 13
"""The extension's ``ABI`` constant this code calls (_core.c KVPLAN_CORE_ABI)."""
_FORMS: OrderedDict[int, tuple[Any, tuple[object, ...] | None]] = OrderedDict()
"""id(timer) -> (timer, form tuple or None), the last few timers (the planner reuses one)."""
_KEEP = 8
DECODE_RUN_STEPS = [0]
"""Steps the core has taken in decode runs (_core_run.h) in this process, for tests."""


def module() -> ModuleType | None:
    """The compiled extension, or None if it was not built (or KVPLAN_SIM_CORE=python)."""
    if os.environ.get(ENV, "").strip().lower() == "python":
        return None
    try:
        mod = importlib.import_module("kvplan.sim._core")
    except ImportError:
        return None
    return mod if getattr(mod, "ABI", None) == CORE_ABI else None  # a stale build: Python


def pick(loop: _Loop) -> tuple[ModuleType, tuple[object, ...]] | None:
    """(extension, form) if this run goes to the compiled core, else None."""
    if not loop.fast:
        return None
    mod = module()
    if mod is None:
        return None
    form = _form(mod, loop.timer, token_budget(loop))
    return None if form is None else (mod, form)


def token_budget(loop: _Loop) -> int:
    """The core's token budget: max_num_batched_tokens, or one more than the max_num_seqs
    largest prompt + output sums where that is less. No step holds more (at most that many
    requests, a recompute at most a request's prompt + output), so the budget never binds and
    the schedule is the same; the form's ~9 tables of 8 B a token stop there, not at a
    --max-num-batched-tokens of 10^8 (4.8 GB and 40 s for 100 requests before)."""
    sizes = loop.s.prompt + loop.s.output
    k = min(loop.limits.max_num_seqs, len(sizes))
    top = np.partition(sizes, len(sizes) - k)[len(sizes) - k:] if k else sizes[:0]
    return min(loop.limits.max_num_batched_tokens, int(top.sum()) + 1)


def _form(mod: ModuleType, timer: Any, max_tokens: int) -> tuple[object, ...] | None:
    got = _FORMS.get(id(timer))
    if got is not None and got[0] is timer and (got[1] is None
                                                 or int(str(got[1][0])) >= max_tokens):
        _FORMS.move_to_end(id(timer))
        return got[1]
    make = getattr(timer, "aggregate_form", None)
    built = make(max_tokens) if make is not None else None
    form = None
    if built is not None:
        candidate = built.as_tuple()
        form = candidate if _agrees(mod, candidate, timer, max_tokens) else None
    _FORMS[id(timer)] = (timer, form)
    while len(_FORMS) > _KEEP:
        _FORMS.popitem(last=False)
    return form


def _spot_batches(max_tokens: int) -> list[tuple[list[int], list[int]]]:
    """(new, ctx) batches of up to max_tokens tokens: decodes over short and long contexts,
    prompts and chunks from nothing and from a cached context, a 1-token prompt."""
    t = max_tokens
    third = max(1, t // 3)
    out = [([1], [1]), ([t], [0]), ([1], [0]), ([1] * min(7, t), [5, 1234, 40000, 3, 64,
                                                                   987654, 2][:min(7, t)])]
    if t >= 4:
        out.append(([1, 1, third, t - 2 - third], [5, 40000, 0, 1234]))
        out.append(([2, t - 2], [0, 300]))
    return out


def _agrees(mod: ModuleType, form: tuple[object, ...], timer: Any, max_tokens: int) -> bool:
    """The core's step times equal timer.step_time_s (and step_time_agg where the timer has
    exact aggregates) on spot batches: a timer whose formula changed without its form is
    never run in C."""
    batches = [b for b in _spot_batches(max_tokens) if b[0]]
    new = np.array([x for b in batches for x in b[0]], dtype=np.int64)
    ctx = np.array([x for b in batches for x in b[1]], dtype=np.int64)
    off = np.cumsum([0] + [len(b[0]) for b in batches], dtype=np.int64)
    out = np.zeros(len(batches))
    mod.eval_steps(form, new, ctx, off, out)
    for (n, c), got in zip(batches, out.tolist(), strict=True):
        na, ca = np.array(n, dtype=np.int64), np.array(c, dtype=np.int64)
        if float(timer.step_time_s(na, ca)) != got:
            return False
        if getattr(timer, "supports_aggregates", False):
            pairs = sum(a * b + a * (a + 1) // 2 for a, b in zip(n, c, strict=True))
            pre = any(a > 1 or b == 0 for a, b in zip(n, c, strict=True))
            gdn = getattr(timer, "needs_longest", False)  # GDN: the longest prompt chunk too
            extra = {"longest": longest_chunk(n)} if gdn else {}
            if float(timer.step_time_agg(sum(n), len(n), sum(c), pairs, pre, **extra)) != got:
                return False
    return True


def run(loop: _Loop, mod: ModuleType, form: tuple[object, ...]) -> SimulationResult:
    """The whole simulation in the compiled core; the result the Python loop would give."""
    s = loop.s
    n = len(s.arrival)
    reject = np.zeros(n, dtype=np.uint8)
    reject[list(loop.reasons)] = 1
    arrays = (np.asarray(loop.arrivals, dtype=np.float64), np.ascontiguousarray(s.prompt),
              np.ascontiguousarray(s.output), reject, s.computed, s.generated, s.held,
              s.status, s.sent_s, s.scheduled_s, s.first_token_s, s.finish_s, s.preemptions,
              s.hit_tokens, s.last_emit, s.seg_start, *_release_order(loop, n))
    lim = loop.limits
    slots = len(loop.slots) if loop.slots is not None else 0
    out = mod.run(arrays, keys(s.shared_keys, n), groups(loop.shape), n, slots,
                  token_budget(loop), lim.max_num_seqs, loop.shape.block_size,
                  lim.long_prefill_token_threshold, loop.pool.num_blocks, lim.chunked_prefill,
                  loop.sched.caching, loop.validate, form,
                  loop.progress if loop.progress is not None else None)
    s.reject_reason = {i: loop.reasons[i] for i in sorted(loop.reasons)}
    loop.done = n
    if loop.progress is not None:
        loop.progress(n, n)
    return package(loop, out)


def series(out: tuple[Any, ...]) -> KvSeries:
    """The step series from the core's seven columns (``out[:7]``), without a copy."""
    return KvSeries(start_s=_f64(out[0]), end_s=_f64(out[1]), used_blocks=_i64(out[2]),
                    logical_bytes=_i64(out[3]), running=_i64(out[4]), waiting=_i64(out[5]),
                    new_tokens=_i64(out[6]))


def package(loop: _Loop, out: tuple[Any, ...]) -> SimulationResult:
    """The loop's result from the core's outputs (its state arrays already written)."""
    steps = series(out)
    loop.s.clock = float(out[14])
    DECODE_RUN_STEPS[0] += out[15]
    loop.s.step = len(steps.end_s)
    loop.query_tokens, loop.prefill_blocks, loop.decode_blocks = out[11], out[12], out[13]
    loop.admission_peak, loop.lookup_hits = out[16], out[17]
    return loop._package(steps, (_i64(out[7]), _i64(out[8]), _i64(out[9])), _i64(out[10]))


def _release_order(loop: _Loop,
                   n: int) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
    """The loop's arrivals are in release order (simulator._api_setup): the request id, the
    API delay (closed loop), the send time (open loop) and the API server's admission time
    (closed loop) of each position."""
    order = np.arange(n, dtype=np.int64) if loop.order is None else np.asarray(
        loop.order, dtype=np.int64)
    delay = np.zeros(n) if loop.delay is None else np.asarray(loop.delay, dtype=np.float64)
    admit = np.zeros(n) if loop.admit is None else np.asarray(loop.admit, dtype=np.float64)
    return order, delay, np.ascontiguousarray(loop.s.arrival[order]), admit


_KINDS = {"full": 0, "sliding": 1, "state": 2}


def groups(shape: KvShape) -> tuple[IntArray, ...]:
    """The shape's merged groups (``KvShape.merged``) as the core's arrays: kind, window,
    weight, bytes per token, state bytes."""
    cols = [(_KINDS[g.kind], g.window, g.weight, g.bytes_per_token, g.state_bytes)
            for g in shape.merged]
    return tuple(np.array(c, dtype=np.int64) for c in zip(*cols, strict=True))


def keys(shared: list[list[int]] | None, n: int) -> tuple[IntArray, IntArray, int]:
    """Every request's prefix keys as offsets + interned ids 0..K-1 (for the core's arrays)."""
    off = np.zeros(n + 1, dtype=np.int64)
    if shared is None:
        return off, np.zeros(0, dtype=np.int64), 0
    np.cumsum(np.fromiter(map(len, shared), dtype=np.int64, count=n), out=off[1:])
    flat = np.fromiter(chain.from_iterable(shared), dtype=np.int64, count=int(off[-1]))
    uniq, ids = np.unique(flat, return_inverse=True)
    return off, ids.astype(np.int64).reshape(-1), len(uniq)


def _f64(b: bytearray | memoryview) -> FloatArray:
    return np.frombuffer(b, dtype=np.float64)


def _i64(b: bytearray | memoryview) -> IntArray:
    return np.frombuffer(b, dtype=np.int64)
