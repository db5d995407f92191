"""Per-row rules of a parsed trace: hash ids read and fitted to their prompt, and rows with
0 output tokens dropped (failed requests, as vLLM's BurstGPT loader drops them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kvplan.errors import TraceError


def hash_cells(cells: Sequence[str], where: Callable[[int], str]) -> list[np.ndarray]:
    """Each cell's space-separated hash ids; WHERE(i) names row i's cell in an error."""
    out: list[np.ndarray] = []
    for i, cell in enumerate(cells):
        try:
            ids = np.array(cell.split(), dtype=np.int64)
        except (ValueError, OverflowError):
            raise TraceError(
                f"{where(i)}: hash ids must be space-separated whole "
                f"numbers like '0 14 15', got {cell.strip()[:40]!r}"
            ) from None
        ids.setflags(write=False)
        out.append(ids)
    return out


def check_hash_fit(hashes: Sequence[np.ndarray], prompt: np.ndarray, block_tokens: int,
                   where: Callable[[int], str]) -> None:
    """No row names more hash blocks than its prompt fills: a P-token prompt spans
    cdiv(P, H) blocks of H tokens (Mooncake's hash_ids: exactly that many)."""
    counts = np.fromiter((len(h) for h in hashes), dtype=np.int64, count=len(hashes))
    spans = -(-prompt // block_tokens)
    bad = np.flatnonzero(counts > spans)
    if bad.size:
        i = int(bad[0])
        raise TraceError(
            f"{where(i)}: {counts[i]} hash ids for a {prompt[i]}-token prompt, which fills "
            f"at most {spans[i]} block(s) of {block_tokens} tokens (one id each); fix the ids, "
            "the input length or hash_block_tokens"
        )


def usable_rows(path: Path, output: np.ndarray) -> np.ndarray | None:
    """The indices of the rows with output tokens (None: every row has some); a file where
    no row has any is refused. vLLM's BurstGPT loader drops 0-output rows the same way."""
    keep = np.flatnonzero(output > 0)
    if keep.size == len(output):
        return None
    if not keep.size:
        raise TraceError(
            f"{path}: no usable request: all {len(output):,} rows have 0 output tokens "
            "(failed requests, dropped as vLLM's BurstGPT loader drops them); give rows "
            "with at least 1 output token"
        )
    return keep


def in_arrival_order(arrival: np.ndarray) -> np.ndarray | None:
    """The row indices in arrival order (a stable sort: equal times keep the file's order),
    or None when the rows already are: each row says when its request arrives, so rows
    written out of order (merged logs, a file sorted by request id) are replayed sorted."""
    if not bool(np.any(np.diff(arrival) < 0)):
        return None
    order: np.ndarray = np.argsort(arrival, kind="stable")
    return order
