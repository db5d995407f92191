"""Workload: N requests as parallel read-only arrays (the simulator's input)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvplan.errors import InputError
from kvplan.limits import MAX_ARRIVAL_SPAN_S


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSpec:
    """One request, for reading and tests; the simulator reads Workload's arrays directly."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_hashes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Workload:
    """N requests as parallel read-only arrays (8 bytes x 3 per request without hashes).

    ``prefix_hashes[i][k]`` names the content of prompt tokens ``[k*H, (k+1)*H)`` of request i
    and, being a prefix hash, of every token before them (H = ``hash_block_tokens``); tokens past
    the listed blocks are unique to the request. Equal ids = shareable KV (prefix caching)::

        request 0:  [ 0 ][ 1 ][ 2 ][ 3 ]..      ids 0, 1 shared -> 2*H tokens can hit the cache
        request 1:  [ 0 ][ 1 ][ 7 ]..
    """

    name: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_hashes: tuple[np.ndarray, ...] | None = None
    hash_block_tokens: int = 0
    closed_loop_concurrency: int | None = None

    def __post_init__(self) -> None:
        for field, dtype in (
            ("arrival_s", np.float64),
            ("prompt_tokens", np.int64),
            ("output_tokens", np.int64),
        ):
            object.__setattr__(self, field, _frozen_array(getattr(self, field), dtype))
        _check_workload(self)

    def __len__(self) -> int:
        return int(self.prompt_tokens.shape[0])

    def request(self, i: int) -> RequestSpec:
        """Request i as a small value object."""
        hashes = self.prefix_hashes[i].tolist() if self.prefix_hashes is not None else []
        return RequestSpec(
            request_id=i,
            arrival_s=float(self.arrival_s[i]),
            prompt_tokens=int(self.prompt_tokens[i]),
            output_tokens=int(self.output_tokens[i]),
            prefix_hashes=tuple(hashes),
        )

    def requests(self) -> Iterator[RequestSpec]:
        """Every request in arrival order (slow for millions; use the arrays there)."""
        return (self.request(i) for i in range(len(self)))

    @property
    def duration_s(self) -> float:
        """Seconds from t=0 to the last arrival (0 for an offline batch)."""
        return float(self.arrival_s[-1]) if len(self) else 0.0

    @property
    def is_offline(self) -> bool:
        """True when every request arrives at t=0 (request rate inf)."""
        return not bool(np.any(self.arrival_s))


def _frozen_array(values: Any, dtype: type[np.generic]) -> np.ndarray:
    array = np.asarray(values, dtype=dtype)
    if array.flags.writeable:
        array = array.copy() if array.base is not None or array is values else array
        array.setflags(write=False)
    return array


def _check_workload(w: Workload) -> None:
    n = len(w)
    if w.arrival_s.shape != (n,) or w.output_tokens.shape != (n,):
        raise InputError(f"workload '{w.name}': arrival, prompt and output arrays differ in length")
    if n and not (np.all(np.isfinite(w.arrival_s)) and w.arrival_s[0] >= 0):
        raise InputError(f"workload '{w.name}': arrival times must be finite seconds >= 0")
    if n and bool(np.any(np.diff(w.arrival_s) < 0)):
        raise InputError(f"workload '{w.name}': arrival times must be sorted ascending")
    if n and w.arrival_s[-1] - w.arrival_s[0] > MAX_ARRIVAL_SPAN_S:
        raise InputError(
            f"workload '{w.name}': the last request arrives {w.arrival_s[-1] - w.arrival_s[0]:.3g}"
            f" s after the first; kvplan's clock keeps microsecond detail only up to "
            f"{MAX_ARRIVAL_SPAN_S:.2g} s (~142 years): send fewer requests, or raise "
            "--request-rate or lower --time-scale")
    if n and (w.prompt_tokens.min() < 1 or w.output_tokens.min() < 1):
        raise InputError(f"workload '{w.name}': every prompt and output needs >= 1 token")
    _check_hashes(w, n)
    if w.closed_loop_concurrency is not None and w.closed_loop_concurrency < 1:
        raise InputError("--max-concurrency must be a positive whole number")


def _check_hashes(w: Workload, n: int) -> None:
    if w.prefix_hashes is None:
        return
    if len(w.prefix_hashes) != n:
        raise InputError(f"workload '{w.name}': prefix_hashes needs one array per request")
    if w.hash_block_tokens < 1:
        raise InputError(f"workload '{w.name}': prefix_hashes needs hash_block_tokens >= 1")
