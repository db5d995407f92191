"""DisaggResult: both pools' per-instance results, the transfers, and the client's view."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.sim.dp.merge import DpResult
from kvplan.sim.result import BoolArray, FloatArray, IntArray, KvSeries, SimulationResult


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfers:
    """One entry per request (NaN / -1 where it never got that far)."""

    prefill_instance: IntArray
    decode_instance: IntArray
    prefill_end_s: FloatArray
    """When the prefill instance sampled its one token (its blocks stay held)."""
    decode_arrival_s: FloatArray
    """When the proxy's request reached the decode instance."""
    admitted_s: FloatArray
    """When the decode instance allocated the prompt's blocks (transfer may start)."""
    start_s: FloatArray
    """When the KV started to move (after any queue on the link)."""
    end_s: FloatArray
    """When the last byte landed and the latency passed (prefill blocks freed then)."""
    link_bytes: IntArray
    waited_for_blocks: BoolArray
    """Requests that found too few free decode blocks when the decode instance tried to
    admit them (or sat behind one that did)."""
    prefill_rank: IntArray | None = None
    """The DP rank of its prefill instance the KV left (0 for a TP instance; -1: not moved);
    both paths set it (None: a result built without it)."""
    decode_rank: IntArray | None = None
    """The DP rank of its decode instance the KV landed on (as ``prefill_rank``)."""

    @property
    def transfer_s(self) -> FloatArray:
        """Wire time plus latency of each transfer."""
        return self.end_s - self.start_s

    @property
    def queue_s(self) -> FloatArray:
        """Time each transfer waited for busy NICs."""
        return self.start_s - self.admitted_s

    @property
    def admission_wait_s(self) -> FloatArray:
        """From reaching the decode instance to getting its blocks: the wait for the next
        step boundary (the scheduler runs between steps), plus any wait for free blocks."""
        return self.admitted_s - self.decode_arrival_s

    @property
    def prefill_hold_s(self) -> FloatArray:
        """Time each request's prefill blocks stayed held after its prefill ended."""
        return self.end_s - self.prefill_end_s


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggResult:
    """What happened on every instance, on the link, and as the client saw it."""

    prefill: tuple[SimulationResult, ...]
    decode: tuple[SimulationResult, ...]
    transfers: Transfers
    client: SimulationResult
    """vLLM bench's view: sent at arrival, tokens from the decode instance (its steps, all
    decode instances' series one after another), rejections of either pool."""
    moved_bytes: int
    """Bytes the link moved in total (equals transfers.link_bytes summed over moved ones)."""
    prefill_dp: tuple[DpResult, ...] = ()
    """Each prefill instance's DP ranks where the pool is data-parallel (else empty)."""
    decode_dp: tuple[DpResult, ...] = ()


def client_view(arrival: FloatArray, prompt: IntArray, output: IntArray,
                prefill: tuple[SimulationResult, ...], decode: tuple[SimulationResult, ...],
                t: Transfers, rejected: dict[int, str],
                joined: KvSeries | None = None, failed: FloatArray | None = None
                ) -> SimulationResult:
    """The fleet as one server: per request its decode instance's times, steps appended
    (``joined``: the decode instances' series already appended; ``failed``: when each
    rejected request's failure reached the client, None: at its arrival)."""
    n = len(arrival)
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    finished = np.zeros(n, dtype=np.bool_)
    preempt = np.zeros(n, dtype=np.int64)
    for d, res in enumerate(decode):
        mine = t.decode_instance == d
        first[mine], finish[mine] = res.first_token_s[mine], res.finish_s[mine]
        finished[mine] = res.finished[mine]
        preempt += res.preemptions
    steps, segs = _appended(decode, joined)
    hits = sum((p.prefix_hit_tokens for p in prefill), np.zeros(n, dtype=np.int64))
    for p in prefill:
        preempt += p.preemptions
    d0 = decode[0]
    return SimulationResult(
        arrival_s=arrival, sent_s=arrival, scheduled_s=_first_of(prefill, "scheduled_s", n),
        first_token_s=first, finish_s=finish, prompt_tokens=prompt, output_tokens=output,
        preemptions=preempt, prefix_hit_tokens=hits, finished=finished, rejected=rejected,
        steps=steps, preemption_s=np.sort(np.concatenate([r.preemption_s for r in decode])),
        seg_req=segs[0], seg_first=segs[1], seg_last=segs[2],
        num_blocks=d0.num_blocks, block_size=d0.block_size,
        prefill_claimed_blocks=sum(r.prefill_claimed_blocks for r in decode),
        decode_claimed_blocks=sum(r.decode_claimed_blocks for r in decode),
        prefix_query_tokens=sum(p.prefix_query_tokens for p in prefill),
        prefix_lookup_hits=sum(p.prefix_lookup_hits for p in prefill),
        admission_peak_blocks=max(r.admission_peak_blocks for r in decode), failed_s=failed)


def _first_of(results: tuple[SimulationResult, ...], name: str, n: int) -> FloatArray:
    out = np.full(n, np.nan)
    for r in results:
        col = getattr(r, name)
        take = np.isnan(out) & ~np.isnan(col)
        out[take] = col[take]
    return out


def _appended(results: tuple[SimulationResult, ...], joined: KvSeries | None = None
              ) -> tuple[KvSeries, tuple[IntArray, ...]]:
    """Every result's step series one after another (``joined`` if given); emission runs
    re-indexed to match."""
    if len(results) == 1:  # one instance: its own arrays (results are never written)
        r = results[0]
        return r.steps, (r.seg_req.astype(np.int64, copy=False),
                         r.seg_first.astype(np.int64, copy=False),
                         r.seg_last.astype(np.int64, copy=False))
    names = ("start_s", "end_s", "used_blocks", "logical_bytes", "running", "waiting",
             "new_tokens")
    steps = joined if joined is not None else KvSeries(
        **{k: np.concatenate([getattr(r.steps, k) for r in results]) for k in names})
    offsets = np.cumsum([0] + [r.num_steps for r in results])
    req = np.concatenate([r.seg_req for r in results])
    first = np.concatenate([r.seg_first + o for r, o in zip(results, offsets, strict=False)])
    last = np.concatenate([r.seg_last + o for r, o in zip(results, offsets, strict=False)])
    return steps, (req.astype(np.int64), first.astype(np.int64), last.astype(np.int64))


def served(t: Transfers) -> BoolArray:
    """Requests whose KV crossed the link."""
    return ~np.isnan(t.end_s)
