"""CSV trace reading: cells -> a Trace, every malformed cell named by file, line and column."""

from __future__ import annotations

import contextlib
import csv
import itertools
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import numpy as np

from kvplan import input_file
from kvplan.errors import TraceError
from kvplan.limits import MAX_TOKENS, MAX_TRACE_ROWS
from kvplan.specs.requests.trace_dates import check_dates, datetime_ns, slow_datetimes
from kvplan.specs.requests.trace_rows import (
    check_hash_fit,
    hash_cells,
    in_arrival_order,
    usable_rows,
)

ArrivalUnit = Literal["s", "ms", "datetime"]
ARRIVAL_UNITS: tuple[str, ...] = ("s", "ms", "datetime")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceFormat:
    """Which CSV columns hold what, and in which unit the arrival column is written."""

    input: str
    output: str
    arrival: str | None = None
    arrival_unit: ArrivalUnit = "s"
    hashes: str | None = None
    hash_block_tokens: int = 0

    def __post_init__(self) -> None:
        if self.arrival_unit not in ARRIVAL_UNITS:
            raise TraceError(
                f"arrival unit {self.arrival_unit!r} is not one of {', '.join(ARRIVAL_UNITS)}"
            )
        if self.hashes is not None and self.hash_block_tokens < 1:
            raise TraceError("a hashes column needs hash_block_tokens >= 1 (512 for Mooncake)")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Trace:
    """A parsed trace: per-request lengths, arrivals (s from the first row) or None, hashes."""

    name: str
    path: str
    arrival_s: np.ndarray | None
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_hashes: tuple[np.ndarray, ...] | None = None
    hash_block_tokens: int = 0
    dropped_rows: int = 0
    """Rows of the file left out for having 0 output tokens (vLLM's BurstGPT loader's rule)."""
    reordered_rows: int = 0
    """Rows not at their place in arrival order in the file (replayed sorted by arrival)."""

    def __len__(self) -> int:
        return int(self.prompt_tokens.shape[0])


@dataclass(frozen=True, slots=True)
class _Table:
    """Raw CSV cells with the physical line number of each row, for error messages."""

    path: Path
    header: list[str]
    rows: list[list[str]]
    lines: list[int]
    head: int = 1
    """The header's line (blank lines before it are skipped)."""

    def where(self, row: int, column: str) -> str:
        return f"{self.path}, line {self.lines[row]}, column '{column}'"

    def cells(self, column: str, role: str) -> list[str]:
        idx = self.index(column, role)
        try:
            return [row[idx] for row in self.rows]
        except IndexError:
            bad = next(i for i, row in enumerate(self.rows) if len(row) <= idx)
            raise TraceError(
                f"{self.where(bad, column)}: the row has no such cell "
                f"({len(self.rows[bad])} cells); fix or delete the row"
            ) from None

    def index(self, column: str, role: str) -> int:
        if column not in self.header:
            raise TraceError(
                f"{self.path}, line {self.head}: no column '{column}' for the {role}; "
                f"the header has {', '.join(self.header) or 'nothing'}"
            )
        if self.header.count(column) > 1:
            raise TraceError(
                f"{self.path}, line {self.head}: the header names column '{column}' "
                f"{self.header.count(column)} times; rename the others so the {role} are "
                "read from one column"
            )
        return self.header.index(column)


_CHUNK_ROWS = 1 << 14
"""Rows parsed at a time. A row's cells are Python objects (~400 B a row with its list and
line number); only the columns' numpy arrays (8 B a cell) outlive a chunk, so a 10^7-row trace
is read in ~0.3 GB instead of ~4 GB (tests/test_hunt13_scale.py)."""


class _SlowDates(Exception):
    """A date-time numpy cannot read after the first chunk: the column is read again per cell,
    as a one-chunk file would be (the same floats whatever the chunking)."""


def _tables(path: Path) -> Generator[_Table, None, None]:
    """The trace's non-blank rows (CSV, or JSON lines as Mooncake writes them), _CHUNK_ROWS
    at a time, each chunk with the header."""
    try:
        with input_file.open_text(path, encoding="utf-8-sig") as f:
            header, source, head = _source(path, f)
            rows: list[list[str]] = []
            lines: list[int] = []
            seen = 0
            for row, line in source:
                rows.append(row)
                lines.append(line)
                seen += 1
                if seen > MAX_TRACE_ROWS:
                    raise TraceError(
                        f"{path}: more than {MAX_TRACE_ROWS:,} requests; kvplan reads at "
                        "most that many (cut the trace, then use --num-prompts)"
                    )
                if len(rows) == _CHUNK_ROWS:
                    yield _Table(path, header, rows, lines, head)
                    rows, lines = [], []
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(
            f"{path}: cannot read the trace ({_reason(exc)}); give a readable UTF-8 CSV file"
        ) from None
    if not seen:
        raise TraceError(f"{path}, line {head + 1}: no requests after the header row")
    if rows:
        yield _Table(path, header, rows, lines, head)


def _source(path: Path, f: IO[str]) -> tuple[list[str], Iterator[tuple[list[str], int]], int]:
    """The header and the (cells, line number) of each non-blank row: JSON lines when the
    first line is an object, else CSV (blank lines before either are skipped)."""
    first, skipped = f.readline(), 0
    while first and not first.strip():
        first, skipped = f.readline(), skipped + 1
    if first.lstrip().startswith("{"):
        from kvplan.specs.requests.trace_jsonl import jsonl_rows

        return (*jsonl_rows(path, first, f, skipped + 1), skipped + 1)
    reader = csv.reader(itertools.chain([first], f))
    header = _checked_header(path, [h.strip() for h in next(reader, [])], skipped + 1)

    def rows() -> Iterator[tuple[list[str], int]]:
        for row in reader:
            if row and any(cell.strip() for cell in row):
                if len(row) > len(header) and any(c.strip() for c in row[len(header):]):
                    raise TraceError(  # a comma inside a number shifts every later cell
                        f"{path}, line {reader.line_num}: {len(row)} cells for the "
                        f"header's {len(header)} columns (a comma inside a number?); fix "
                        "or delete the row")
                yield row, reader.line_num + skipped

    return header, rows(), skipped + 1


def _checked_header(path: Path, header: list[str], line: int) -> list[str]:
    if not header:
        raise TraceError(f"{path}, line 1: the file is empty; expected a CSV header row")
    if header[0].startswith("["):  # JSON lines (Mooncake's) start with an object
        raise TraceError(f"{path}, line {line}: this is a JSON array, not CSV; write one JSON "
                         "object a line (Mooncake's traces) or CSV with a header row")
    return header


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError | UnicodeDecodeError):
        return input_file.reason(exc)
    return str(exc)


def read_csv_trace(path: Path, fmt: TraceFormat | None, name: str,
                   known: Sequence[TraceFormat] = ()) -> Trace:
    """Parse the CSV at PATH; FMT None: the first of KNOWN whose columns the header has."""
    try:
        return _parse(path, fmt, name, known, slow_dates=False)
    except _SlowDates:
        return _parse(path, fmt, name, known, slow_dates=True)


def _parse(path: Path, fmt: TraceFormat | None, name: str, known: Sequence[TraceFormat], *,
           slow_dates: bool) -> Trace:
    prompt: list[np.ndarray] = []
    output: list[np.ndarray] = []
    hashes: list[np.ndarray] = []
    arrivals: _Arrivals | None = None
    with contextlib.closing(_tables(path)) as tables:
        for table in tables:
            fmt = fmt or _detect_format(table, known)
            prompt.append(_count_column(table, fmt.input, "input tokens"))
            if fmt.hashes:
                hashes.extend(_hash_column(table, fmt, prompt[-1]))
            if fmt.arrival:
                arrivals = arrivals or _Arrivals(fmt.arrival, fmt.arrival_unit, slow_dates)
                arrivals.add(table)
            output.append(_count_column(table, fmt.output, "output tokens", least=0))
    assert fmt is not None
    return _trace(path, name, fmt, arrivals.column() if arrivals else None,
                  np.concatenate(prompt), np.concatenate(output), hashes)


def _trace(path: Path, name: str, fmt: TraceFormat, arrival: np.ndarray | None,
           prompt: np.ndarray, output: np.ndarray, hashes: list[np.ndarray]) -> Trace:
    """The Trace of the usable rows (0-output rows dropped), in arrival order, arrivals from
    the first kept."""
    rows = len(output)
    keep = usable_rows(path, output)
    if keep is not None:
        prompt, output, hashes, arrival = _rows(keep, prompt, output, hashes, arrival)
    order = None if arrival is None else in_arrival_order(arrival)
    if order is not None:
        prompt, output, hashes, arrival = _rows(order, prompt, output, hashes, arrival)
    moved = 0 if order is None else int(np.count_nonzero(order != np.arange(len(order))))
    if arrival is not None:
        arrival = arrival - arrival[0]
    return Trace(name=name, path=str(path),
                 arrival_s=None if arrival is None else _readonly(arrival),
                 prompt_tokens=_readonly(prompt), output_tokens=_readonly(output),
                 prefix_hashes=tuple(hashes) if fmt.hashes else None,
                 hash_block_tokens=fmt.hash_block_tokens if fmt.hashes else 0,
                 dropped_rows=rows - len(output), reordered_rows=moved)


def _rows(take: np.ndarray, prompt: np.ndarray, output: np.ndarray, hashes: list[np.ndarray],
          arrival: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray],
                                               np.ndarray | None]:
    """The rows TAKE (indices) of each column; ``hashes`` empty when the trace has none."""
    picked = [hashes[i] for i in take.tolist()] if hashes else hashes
    return prompt[take], output[take], picked, None if arrival is None else arrival[take]


def _detect_format(table: _Table, known: Sequence[TraceFormat]) -> TraceFormat:
    """The first of KNOWN whose every column the header has (Vidur's arrived_at read where
    present); else the first with the token columns, which names the column it lacks."""
    fits = [f for f in known if f.input in table.header and f.output in table.header]
    for fmt in fits:
        if all(c in table.header for c in (fmt.arrival, fmt.hashes) if c):
            return fmt
    if fits:
        return _whole_layout(table, fits[0])
    raise TraceError(
        f"{table.path}, line {table.head}: unknown trace layout; say which columns to use, e.g. "
        "--trace-columns arrival=COL,input=COL,output=COL"
    )

def _whole_layout(table: _Table, fmt: TraceFormat) -> TraceFormat:
    """FMT when the header has its arrival and hash columns too; else one line saying which
    is missing and the --trace-columns that reads the columns the file has."""
    missing = [c for c in (fmt.arrival, fmt.hashes) if c and c not in table.header]
    if not missing:
        return fmt
    spec = [f"input={fmt.input}", f"output={fmt.output}"]
    if fmt.arrival and fmt.arrival in table.header:
        spec[:0] = [f"arrival={fmt.arrival}", f"arrival_unit={fmt.arrival_unit}"]
    raise TraceError(
        f"{table.path}, line {table.head}: the header has {fmt.input} and {fmt.output} but no "
        f"'{missing[0]}' column; to read it without, give --trace-columns {','.join(spec)}"
    )


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _count_column(table: _Table, column: str, role: str, least: int = 1) -> np.ndarray:
    cells = table.cells(column, role)
    try:
        values = np.array(cells, dtype=np.int64)
    except (ValueError, OverflowError):
        values = _slow_ints(table, cells, column, least)
    bad = np.flatnonzero((values < least) | (values > MAX_TOKENS))
    if bad.size:
        i = int(bad[0])
        what = "a positive whole number" if least == 1 else f"a whole number >= {least}"
        raise TraceError(
            f"{table.where(i, column)}: {role} must be {what} (at most {MAX_TOKENS:,}), "
            f"got {cells[i].strip()}; fix or delete the row"
        )
    return values


def _slow_ints(table: _Table, cells: list[str], column: str, least: int) -> np.ndarray:
    """Whole numbers written as floats ('12.0') are fine; anything else names its cell."""
    out = np.empty(len(cells), dtype=np.int64)
    for i, cell in enumerate(cells):
        try:
            value = float(cell)
        except ValueError:
            value = float("nan")
        if not (np.isfinite(value) and value == int(value) and abs(value) <= MAX_TOKENS):
            raise TraceError(
                f"{table.where(i, column)}: {cell.strip()[:40]!r} is not a whole number "
                f"of tokens in [{least}, {MAX_TOKENS:,}]; fix or delete the row"
            )
        out[i] = int(value)
    return out


class _Arrivals:
    """The arrival column, chunk by chunk: the seconds are those the whole column read at
    once gives (rows out of arrival order are sorted later, ``trace_rows.in_arrival_order``)."""

    def __init__(self, column: str, unit: ArrivalUnit, slow_dates: bool) -> None:
        self.name, self.unit, self.slow = column, unit, slow_dates
        self.parts: list[np.ndarray] = []
        self.first_ns: int | None = None

    def add(self, table: _Table) -> None:
        cells = table.cells(self.name, "arrival time")
        self.parts.append(self._seconds(table, cells))

    def _seconds(self, table: _Table, cells: list[str]) -> np.ndarray:
        if self.unit != "datetime":
            seconds = _float_cells(table, cells, self.name, self.unit)
            return seconds / 1000.0 if self.unit == "ms" else seconds
        check_dates(cells, lambda i: table.where(i, self.name))
        if not self.slow:
            ns = datetime_ns(cells)
            if ns is not None:  # ns since the first row, exactly, then to seconds
                self.first_ns = int(ns[0]) if self.first_ns is None else self.first_ns
                since: np.ndarray = (ns - self.first_ns) / 1e9
                return since
            if self.parts:
                raise _SlowDates
            self.slow = True
        return slow_datetimes(cells, lambda i: table.where(i, self.name))

    def column(self) -> np.ndarray:
        seconds = np.concatenate(self.parts)
        return _readonly(seconds - seconds[0])


def _float_cells(table: _Table, cells: list[str], column: str, unit: str) -> np.ndarray:
    try:
        values = np.array(cells, dtype=np.float64)
    except ValueError:
        values = np.full(len(cells), np.nan)
        for i, cell in enumerate(cells):
            values[i] = _float_or_nan(cell)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        i = int(bad[0])
        raise TraceError(
            f"{table.where(i, column)}: arrival {cells[i].strip()!r} is not a number of "
            f"{'milliseconds' if unit == 'ms' else 'seconds'}; fix the cell or set "
            "arrival_unit=datetime"
        )
    return values


def _float_or_nan(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return float("nan")


def _hash_column(table: _Table, fmt: TraceFormat, prompt: np.ndarray) -> list[np.ndarray]:
    """The chunk's hash ids, each row's no more than its PROMPT tokens fill."""
    column = fmt.hashes or ""

    def where(i: int) -> str:
        return table.where(i, column)

    hashes = hash_cells(table.cells(column, "prefix-block hash ids"), where)
    check_hash_fit(hashes, prompt, fmt.hash_block_tokens, where)
    return hashes
