"""Date-time arrival cells (ISO 8601, like Azure's 2023-11-16 18:17:03.97) -> seconds, every
bad cell named by WHERE(row), a callable the CSV reader passes in."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np

from kvplan.errors import TraceError


def check_dates(cells: list[str], where: Callable[[int], str]) -> None:
    """No cell is a bare number or a word: numpy reads a number as a year (epoch seconds
    1700000000 and 1700000001 became arrivals a year apart) and 'now' or 'today' as the
    clock; ISO dates (2023-11-16 ..., 20231116T18...) have a '-' or a 'T', not in front."""
    bad = next((i for i, cell in enumerate(cells) if not_a_date(cell)), None)
    if bad is not None:
        raise TraceError(
            f"{where(bad)}: {cells[bad].strip()[:40]!r} is not a date-time like "
            "2023-11-16 18:17:03.97; for a number of seconds or milliseconds give "
            "arrival_unit=s or arrival_unit=ms"
        )


def not_a_date(cell: str) -> bool:
    c = cell.strip()
    return c[:1] in ("-", "+", "") or ("-" not in c and "T" not in c)


def datetime_ns(cells: list[str]) -> np.ndarray | None:
    """The cells as int64 ns since 1970 when numpy reads every one, else None."""
    try:
        with warnings.catch_warnings():  # numpy warns on '+00:00' offsets, then applies them
            warnings.simplefilter("ignore", (UserWarning, DeprecationWarning))
            stamps = np.array(cells, dtype="datetime64[ns]")
    except ValueError:
        return None
    return None if np.isnat(stamps).any() else stamps.astype(np.int64)


def slow_datetimes(cells: list[str], where: Callable[[int], str]) -> np.ndarray:
    """Per-cell ISO parsing: handles time-zone offsets and names the first bad cell."""
    out = np.empty(len(cells), dtype=np.float64)
    for i, cell in enumerate(cells):
        try:
            stamp = datetime.fromisoformat(cell.strip())
        except ValueError:
            raise TraceError(
                f"{where(i)}: {cell.strip()!r} is not a date-time "
                "like 2023-11-16 18:17:03.97; fix the cell"
            ) from None
        out[i] = stamp.replace(tzinfo=stamp.tzinfo or UTC).timestamp()
    return out
