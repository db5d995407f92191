"""DisaggResult -> the disaggregated fleet's own metrics: the link, the holds, both pools' KV."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvplan.analysis.metrics import Stat, kv_usage_series, p_word
from kvplan.sim.disagg.result import DisaggResult, served
from kvplan.sim.dp.merge import DpResult
from kvplan.sim.result import FloatArray, SimulationResult


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolUsage:
    """One pool's KV blocks: the fullest engine's peak, one engine's pool, engine steps (an
    engine: an instance, or one DP rank of a DP instance, each with its own KV pool)."""

    instances: int
    peak_kv_blocks: int
    usable_blocks: int
    """Blocks one engine's requests can hold (num_gpu_blocks less vLLM's null block)."""
    num_steps: int
    """Steps of every instance (a DP instance's lockstep steps count once)."""
    dp: int = 1
    """DP ranks per instance."""

    @property
    def peak_kv_usage(self) -> float:
        return self.peak_kv_blocks / self.usable_blocks if self.usable_blocks else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggMetrics:
    """What disaggregation adds to `vllm bench serve`'s figures (times in ms)."""

    transfers: int
    link_bytes: int
    transfer: Stat
    """Wire time + latency of each transfer."""
    transfer_queue: Stat
    """Wait for busy NICs before a transfer started."""
    decode_block_waits: int
    """Requests that found too few free decode blocks (and so waited, holding their
    prefill blocks)."""
    decode_block_wait: Stat
    """Admission wait of those requests (reaching the decode instance -> its blocks)."""
    admission_wait: Stat
    """Admission wait of every request: the next step boundary, plus any wait for blocks."""
    prefill_hold: Stat
    """Prefill blocks held after the prefill ended: the proxy's hop to the decode instance
    (its API server's delay) + decode admission wait + link queue + transfer."""
    prefill: PoolUsage
    decode: PoolUsage


def _stat_ms(x: FloatArray, percentiles: Sequence[float]) -> Stat:
    v = x if len(x) else np.zeros(1)
    return Stat(mean_ms=float(np.mean(v)) * 1000, median_ms=float(np.median(v)) * 1000,
                std_ms=float(np.std(v)) * 1000,
                percentiles_ms=tuple((float(p), float(np.percentile(v, p)) * 1000)
                                     for p in percentiles))


def _usage(results: tuple[SimulationResult, ...], dps: tuple[DpResult, ...]) -> PoolUsage:
    engines = [x for d in dps for x in d.ranks] or list(results)
    return PoolUsage(instances=len(results),
                     peak_kv_blocks=max(r.peak_kv_blocks for r in engines),
                     usable_blocks=engines[0].usable_blocks,
                     num_steps=sum(r.num_steps for r in results),
                     dp=len(dps[0].ranks) if dps else 1)


def disagg_metrics(r: DisaggResult, percentiles: Sequence[float] = (99.0,)) -> DisaggMetrics:
    """The link's and the pools' figures over every request whose KV crossed the link."""
    t = r.transfers
    moved = served(t)
    wait = t.admission_wait_s[moved]
    starved = t.waited_for_blocks[moved]
    return DisaggMetrics(
        transfers=int(moved.sum()), link_bytes=int(t.link_bytes[moved].sum()),
        transfer=_stat_ms(t.transfer_s[moved], percentiles),
        transfer_queue=_stat_ms(t.queue_s[moved], percentiles),
        decode_block_waits=int(starved.sum()),
        decode_block_wait=_stat_ms(wait[starved], percentiles),
        admission_wait=_stat_ms(wait, percentiles),
        prefill_hold=_stat_ms(t.prefill_hold_s[moved], percentiles),
        prefill=_usage(r.prefill, r.prefill_dp), decode=_usage(r.decode, r.decode_dp))


def disagg_json(m: DisaggMetrics) -> dict[str, Any]:
    """The added keys of `kvplan simulate --json` for a disaggregated fleet."""
    out: dict[str, Any] = {"kv_transfers": m.transfers, "kv_link_bytes": m.link_bytes,
                           "decode_block_waits": m.decode_block_waits}
    for name, s in (("kv_transfer", m.transfer), ("kv_transfer_queue", m.transfer_queue),
                    ("decode_block_wait", m.decode_block_wait),
                    ("decode_admission_wait", m.admission_wait),
                    ("prefill_kv_hold", m.prefill_hold)):
        out[f"mean_{name}_ms"] = s.mean_ms
        out[f"median_{name}_ms"] = s.median_ms
        for p, v in s.percentiles_ms:
            out[f"p{p_word(p)}_{name}_ms"] = v
    for role, u in (("prefill", m.prefill), ("decode", m.decode)):
        out[f"{role}_instances"] = u.instances
        out[f"{role}_data_parallel_size"] = u.dp
        out[f"{role}_peak_kv_blocks"] = u.peak_kv_blocks
        out[f"{role}_usable_blocks"] = u.usable_blocks
        out[f"{role}_peak_kv_usage"] = u.peak_kv_usage
        out[f"{role}_num_steps"] = u.num_steps
    return out


def pool_kv_series(r: DisaggResult, max_points: int = 500) -> dict[str, list[dict[str, Any]]]:
    """Both pools' KV usage over time, one binned series per instance (peaks kept)."""
    return {"prefill": [kv_usage_series(x, max_points) for x in r.prefill],
            "decode": [kv_usage_series(x, max_points) for x in r.decode]}
