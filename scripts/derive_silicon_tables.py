"""Per-family rules for derive_silicon.py: which rows, which keys and axes, which floor.

Each family turns one aiconfigurator parquet table into dense grids: ``keys`` (one row per
slice, strings coded by the family's vocabulary), ``axis<i>`` (sorted sizes), ``logt`` (float32
log seconds, one grid per slice) and ``filled`` (cells no row measured, extrapolated here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kvplan.costs.kernels import work

Floor = Callable[[dict[str, Any], list[np.ndarray], dict[str, Any]], np.ndarray]


@dataclass(frozen=True)
class Family:
    name: str
    folder: str
    filename: str
    keys: tuple[str, ...]
    axes: tuple[str, ...]
    exponents: tuple[float, ...]
    """Time ~ size**e beyond the last measured cell along each axis (the roofline's scaling)."""
    prepare: Callable[[pd.DataFrame], tuple[pd.DataFrame, dict[str, Any]]]
    floor: Floor | None = None
    engines: tuple[str, ...] = ("vllm", "sglang", "trtllm")
    vocab: dict[str, list[str]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "axes": list(self.axes),
                "exponents": list(self.exponents), "vocab": self.vocab,
                "source_file": f"{self.folder}/<engine>/<version>/{self.filename}"}


def _kernels(frame: pd.DataFrame, col: str) -> dict[str, list[str]]:
    return {str(k): sorted(map(str, g["kernel_source"].unique()))
            for k, g in frame.groupby(col)}


def _gemm(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    out = frame.rename(columns={"gemm_dtype": "dtype"})
    return out, {"kernels": _kernels(out, "dtype")}


def _attention(frame: pd.DataFrame, phase: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    f = frame[(frame["attn_dtype"] == "bfloat16") & (frame["beam_width"] == 1)].copy()
    if "window_size" not in f:
        f["window_size"] = 0
    f = f.rename(columns={"kv_cache_dtype": "kv_dtype", "window_size": "window",
                          "num_key_value_heads": "num_kv_heads", "batch_size": "batch"})
    if phase == "context":
        f = f[f["step"] == 0]
    else:
        f["kv_len"] = f["isl"] + f["step"]
    return f, {"kernels": _kernels(f, "kv_dtype")}


def _mla(frame: pd.DataFrame, phase: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    f = frame[(frame["mla_dtype"] == "bfloat16") & (frame["tp_size"] == 1)].copy()
    f = f.rename(columns={"kv_cache_dtype": "kv_dtype", "batch_size": "batch"})
    if phase == "generation":
        f["kv_len"] = f["isl"] + f["step"]
    models = sorted(map(str, f["model"].unique()))
    return f, {"kernels": _kernels(f, "gemm_type"), "models": models}


def _moe(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    f = frame.rename(columns={"moe_dtype": "dtype", "hidden_size": "hidden",
                              "inter_size": "inter", "moe_tp_size": "tp", "moe_ep_size": "ep",
                              "num_experts": "experts", "num_tokens": "tokens"})
    kept = "balanced" if (f["distribution"] == "balanced").any() else "power_law_1.01"
    f = f[f["distribution"] == kept].copy()
    marlin = (f["dtype"] == "w4a16_mxfp4") & f["kernel_source"].str.contains("marlin")
    f.loc[marlin, "dtype"] = "w4a16_mxfp4_marlin"  # a kernel of its own (vLLM < 0.12, Hopper)
    return f, {"kernels": _kernels(f, "dtype"), "distribution": kept}


def _allreduce(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    f = frame[frame["allreduce_dtype"] == "bfloat16"].copy()
    f["mode"] = f["backend"].str.replace("vllm_", "", regex=False)
    f["bytes"] = f["message_size"] * 2  # message_size counts bf16 elements
    return f, {"kernels": sorted(map(str, f["kernel_source"].unique())),
               "size_unit": "message_size is bf16 elements; stored as bytes (x2)"}


def _nccl(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    f = frame[frame["nccl_dtype"] == "half"].copy()
    f["op"] = f["op_name"]
    f["bytes"] = f["message_size"] * 2  # message_size counts fp16 elements
    return f, {"kernels": ["NCCL"], "nccl_version_is_the_table_version": True}


GDN_KEYS = ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim")


def _gdn(frame: pd.DataFrame, phase: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One Gated DeltaNet layer's kernels of a phase summed per measured case (context:
    causal_conv1d_fn + the chunked delta rule; generation: causal_conv1d_update + the
    recurrent delta rule); cases of several models at one head shape: the fastest."""
    f = frame[frame["phase"] == phase]
    by = ["model_name", *GDN_KEYS, "batch_size", "seq_len"]
    summed = f.groupby(by, as_index=False)["latency"].sum()
    summed = summed.rename(columns={"batch_size": "batch"})
    return summed, {"kernels": sorted(map(str, f["kernel_source"].unique())),
                    "models": sorted(map(str, f["model_name"].unique())),
                    "latency": "sum of the phase's kernels per case"}


def _peak(peaks: dict[str, Any], dtype: str) -> float:
    rate = work.TENSOR_RATE.get(dtype, "bfloat16")
    return float(peaks.get(rate) or peaks["bfloat16"])


def _gemm_floor(key: dict[str, Any], ax: list[np.ndarray], peaks: dict[str, Any]) -> np.ndarray:
    m, n, k = np.meshgrid(*ax, indexing="ij")
    dtype = str(key["dtype"])
    return np.maximum(work.gemm_flops(m, n, k) / _peak(peaks, dtype),
                      work.gemm_bytes(m, n, k, dtype) / peaks["mem_bw"])


def _ctx_floor(key: dict[str, Any], ax: list[np.ndarray], peaks: dict[str, Any]) -> np.ndarray:
    b, s = np.meshgrid(*ax, indexing="ij")
    h, kv, d, w = (int(key[c]) for c in ("num_heads", "num_kv_heads", "head_dim", "window"))
    flops = work.context_attention_flops(b, s, h, d, w)
    moved = work.context_attention_bytes(b, s, h, kv, d, str(key["kv_dtype"]))
    return np.maximum(flops / peaks["bfloat16"], moved / peaks["mem_bw"])


def _gen_floor(key: dict[str, Any], ax: list[np.ndarray], peaks: dict[str, Any]) -> np.ndarray:
    b, t = np.meshgrid(*ax, indexing="ij")
    h, kv, d, w = (int(key[c]) for c in ("num_heads", "num_kv_heads", "head_dim", "window"))
    moved = work.decode_attention_bytes(b, t, kv, d, str(key["kv_dtype"]), w)
    return np.maximum(work.decode_attention_flops(b, t, h, d, w) / peaks["bfloat16"],
                      moved / peaks["mem_bw"])


def _moe_floor(key: dict[str, Any], ax: list[np.ndarray], peaks: dict[str, Any]) -> np.ndarray:
    t = ax[0]
    h, i, k, e, tp, ep = (int(key[c]) for c in ("hidden", "inter", "topk", "experts", "tp", "ep"))
    dtype = str(key["dtype"])
    return np.maximum(work.moe_flops(t, h, i, k, tp, ep) / _peak(peaks, dtype),
                      work.moe_bytes(t, h, i, k, e, tp, ep, dtype) / peaks["mem_bw"])


def _comm_floor(key: dict[str, Any], ax: list[np.ndarray], peaks: dict[str, Any]) -> np.ndarray:
    return work.collective_floor_bytes(ax[0], int(key["num_gpus"])) / peaks["link_bw"]


FAMILIES: tuple[Family, ...] = (
    Family("gemm", "gemm", "gemm_perf.parquet", ("dtype",), ("m", "n", "k"), (1.0, 1.0, 1.0),
           _gemm, _gemm_floor),
    Family("attn_ctx", "attention", "context_attention_perf.parquet",
           ("kv_dtype", "head_dim", "window", "num_heads", "num_kv_heads"), ("batch", "isl"),
           (1.0, 2.0), lambda f: _attention(f, "context"), _ctx_floor),
    Family("attn_gen", "attention", "generation_attention_perf.parquet",
           ("kv_dtype", "head_dim", "window", "num_heads", "num_kv_heads"), ("batch", "kv_len"),
           (1.0, 1.0), lambda f: _attention(f, "generation"), _gen_floor),
    Family("mla_ctx", "mla", "mla_context_module_perf.parquet",
           ("kv_dtype", "gemm_type", "num_heads"), ("batch", "isl"), (1.0, 2.0),
           lambda f: _mla(f, "context")),
    Family("mla_gen", "mla", "mla_generation_module_perf.parquet",
           ("kv_dtype", "gemm_type", "num_heads"), ("batch", "kv_len"), (1.0, 1.0),
           lambda f: _mla(f, "generation")),
    Family("moe", "moe", "moe_perf.parquet",
           ("dtype", "hidden", "inter", "topk", "experts", "tp", "ep"), ("tokens",), (1.0,),
           _moe, _moe_floor),
    Family("gdn_ctx", "linear_attention", "gdn_perf.parquet", GDN_KEYS, ("batch", "seq_len"),
           (1.0, 1.0), lambda f: _gdn(f, "context")),
    Family("gdn_gen", "linear_attention", "gdn_perf.parquet", GDN_KEYS, ("batch",), (1.0,),
           lambda f: _gdn(f, "generation")),
    Family("allreduce", "comm", "custom_allreduce_perf.parquet", ("mode", "num_gpus"),
           ("bytes",), (1.0,), _allreduce, _comm_floor),
    Family("nccl", "comm", "nccl_perf.parquet", ("op", "num_gpus"), ("bytes",), (1.0,),
           _nccl, _comm_floor, engines=("nccl",)),
)
STRING_KEYS = {"dtype", "kv_dtype", "gemm_type", "mode", "op"}
VOCAB: dict[str, list[str]] = {}


def code(column: str, value: str) -> int:
    """A string key's index in the shared vocabulary (manifest 'vocab')."""
    words = VOCAB.setdefault(column, [])
    if value not in words:
        words.append(value)
    return words.index(value)


def build_family(family: Family, frame: pd.DataFrame,
                 peaks: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """One table -> dense grids + what happened to them (counts for the manifest)."""
    rows, meta = family.prepare(frame)
    axes = [np.array(sorted(rows[a].unique()), dtype=np.float64) for a in family.axes]
    keys, logts, filled = [], [], []
    counts = {"rows_raw": len(frame), "rows_kept": len(rows), "filled_cells": 0,
              "lowered_monotone_cells": 0, "raised_to_floor_cells": 0, "dropped_slices": 0}
    for key, group in rows.groupby(list(family.keys), sort=True):
        key_map = dict(zip(family.keys, key if isinstance(key, tuple) else (key,), strict=True))
        grid = _grid(group, family.axes, axes)
        hole = np.isnan(grid)
        grid = _fill(grid, axes, family.exponents)
        if np.isnan(grid).any():
            counts["dropped_slices"] += 1
            continue
        grid, lowered = _monotone(grid)
        if family.floor is not None:
            floor = np.log(family.floor(key_map, axes, peaks))
            counts["raised_to_floor_cells"] += int((floor > grid + 1e-9).sum())
            grid = np.maximum(grid, floor)
        counts["filled_cells"] += int(hole.sum())
        counts["lowered_monotone_cells"] += lowered
        keys.append([code(c, str(v)) if c in STRING_KEYS else int(v) for c, v in key_map.items()])
        logts.append(grid.astype(np.float32))
        filled.append(hole)
    counts["slices"] = len(keys)
    counts["cells"] = int(sum(g.size for g in logts))
    family.vocab.update({c: VOCAB[c] for c in family.keys if c in VOCAB})
    grids = {"keys": np.array(keys, dtype=np.int64), "logt": np.stack(logts),
             "filled": np.stack(filled)}
    grids.update({f"axis{i}": a for i, a in enumerate(axes)})
    return grids, {**meta, **counts}


def _grid(group: pd.DataFrame, names: tuple[str, ...], axes: list[np.ndarray]) -> np.ndarray:
    """log(seconds) on the axes' grid; several kernels at one point: the fastest."""
    best = group.groupby(list(names))["latency"].min()
    grid = np.full([len(a) for a in axes], np.nan)
    index = tuple(np.searchsorted(a, best.index.get_level_values(i).to_numpy(dtype=float))
                  for i, a in enumerate(axes))
    grid[index] = np.log(best.to_numpy() * 1e-3)  # tables are in milliseconds
    return grid


def _fill(grid: np.ndarray, axes: list[np.ndarray], exponents: tuple[float, ...]) -> np.ndarray:
    """Holes along each axis in turn: between two measured cells log-log linear, past the
    last t ~ size**e from it (the roofline from the nearest edge), before the first the first
    cell's time (a latency floor)."""
    out = grid.copy()
    for axis, (values, exponent) in enumerate(zip(axes, exponents, strict=True)):
        out = np.apply_along_axis(_fill_line, axis, out, np.log(values), exponent)
    return out


def _fill_line(line: np.ndarray, lx: np.ndarray, exponent: float) -> np.ndarray:
    known = ~np.isnan(line)
    if not known.any() or known.all():
        return line
    xs, ys = lx[known], line[known]
    out = np.interp(lx, xs, ys)  # interior: linear; outside: clamped to the edge value
    above = lx > xs[-1]
    out[above] = ys[-1] + exponent * (lx[above] - xs[-1])
    return np.where(known, line, out)


def _monotone(grid: np.ndarray) -> tuple[np.ndarray, int]:
    """A larger problem is never faster. Timing noise only adds time (a preempted or
    throttled run; the tables hold spikes of up to 12x), so where a cell is slower than a
    larger one it takes the larger one's time: a running minimum from the largest size down,
    along every axis (each pass keeps the earlier axes monotone). Counts cells moved > 2%."""
    out = grid
    for axis in range(grid.ndim):
        flipped = np.flip(out, axis=axis)
        out = np.flip(np.minimum.accumulate(flipped, axis=axis), axis=axis)
    return out, int((out < grid - 0.02).sum())
