"""JSON-lines traces (Mooncake's own format, one object a line, as AIPerf and Dynamo replay
it) read as the CSV reader reads a CSV: a header (the first object's keys) and text cells,
each row with its line number, so every check and message is the CSV's."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kvplan.errors import TraceError

Rows = Iterator[tuple[list[str], int]]


def jsonl_rows(path: Path, first: str, rest: Iterable[str],
               start: int = 1) -> tuple[list[str], Rows]:
    """The header (the keys of FIRST, line START) and the non-blank lines as (cells, line
    number); a key a line lacks is an empty cell, keys the first line lacks are not read."""
    header = list(_object(path, start, first))

    def rows() -> Rows:
        yield _cells(_object(path, start, first), header), start
        for number, line in enumerate(rest, start=start + 1):
            if line.strip():
                yield _cells(_object(path, number, line), header), number

    return header, rows()


def _object(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        obj = exc
    if not isinstance(obj, dict):
        why = f" ({obj.msg})" if isinstance(obj, json.JSONDecodeError) else ""
        raise TraceError(f"{path}, line {number}: not a JSON object{why}; write one object a "
                         "line, as Mooncake's traces: {\"timestamp\": 0, \"input_length\": "
                         "655, \"output_length\": 52, \"hash_ids\": [46, 47]}")
    return obj


def _cells(obj: dict[str, Any], header: list[str]) -> list[str]:
    return [_cell(obj.get(key)) for key in header]


def _cell(value: Any) -> str:
    """A value as the CSV cell that says it: numbers as Python writes them, a list of whole
    numbers space-separated (hash_ids), nothing as an empty cell, anything else as JSON (so
    the column's check names it)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    if isinstance(value, list) and all(type(v) is int for v in value):
        return " ".join(str(v) for v in value)
    return json.dumps(value)
