"""GPU price rows (bundled table, a user's file, --price overrides), each with its source."""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from kvplan import input_file
from kvplan.errors import InputError, KvplanError, located
from kvplan.limits import MAX_PARALLEL as MAX_GPUS_PER_NODE
from kvplan.limits import USD_PER_GPU_HOUR

T = TypeVar("T")
DEFAULT_PROVIDER = "runpod-secure"
STALE_AFTER_DAYS = 90
COLUMNS = ("gpu", "provider", "instance", "gpus_per_instance", "gpus_per_node",
           "usd_per_instance_hour", "source_url", "observed_on", "transcribed_by")


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceRow:
    """One rentable instance shape of one GPU at one provider."""

    gpu: str
    provider: str
    instance: str
    gpus_per_instance: int
    gpus_per_node: int
    usd_per_instance_hour: float
    source_url: str
    observed_on: str
    transcribed_by: str = ""
    override: bool = False
    """True for a user's --price (or a --prices FILE row): not from the bundled table."""

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_instance_hour / self.gpus_per_instance

    def age_days(self, today: dt.date) -> int:
        return (today - dt.date.fromisoformat(self.observed_on)).days


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceTable:
    """The rows of one provider that a plan prices with (GPU ids from the catalog)."""

    provider: str
    rows: tuple[PriceRow, ...]

    def for_gpu(self, gpu: str) -> tuple[PriceRow, ...]:
        return tuple(r for r in self.rows if r.gpu == gpu)

    @property
    def gpus(self) -> tuple[str, ...]:
        """GPU ids with at least one price, in table order."""
        return tuple(dict.fromkeys(r.gpu for r in self.rows))

    def stale_rows(self, today: dt.date) -> tuple[PriceRow, ...]:
        """Rows observed more than STALE_AFTER_DAYS before ``today`` (--price rows are new)."""
        return tuple(r for r in self.rows if r.age_days(today) > STALE_AFTER_DAYS)


def read_rows(text: str, origin: str) -> tuple[PriceRow, ...]:
    """Price rows from CSV text with the bundled table's columns (``origin`` names the file)."""
    reader = csv.DictReader(io.StringIO(text))
    try:
        if (twice := input_file.repeated_column(reader.fieldnames)) is not None:
            raise InputError(f"{origin}: the header names column '{twice}' twice; keep one")
        missing = [c for c in COLUMNS[:-1] if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{origin}: missing price column(s) {', '.join(missing)}; "
                             f"expected {','.join(COLUMNS)}")
        rows = tuple(_row(line, origin, i + 2) for i, line in enumerate(reader))
    except csv.Error as exc:  # a field over csv's limit (131,072 characters), a NUL byte
        raise InputError(f"{origin} line {reader.line_num + 1}: not a readable CSV row "
                         f"({exc}); fix that row") from None
    if not rows:
        raise InputError(f"{origin}: no price rows")
    _check_repeats(rows, origin)
    return rows


def _check_repeats(rows: Sequence[PriceRow], origin: str) -> None:
    """One instance of one provider priced twice, differently, is refused: which row won
    was silent (the planner took the cheaper), as --price's two prices once were."""
    seen: dict[tuple[str, str, str], tuple[int, PriceRow]] = {}
    for i, row in enumerate(rows):
        key = (row.gpu, row.provider, row.instance)
        first = seen.setdefault(key, (i, row))
        if _numbers(first[1]) != _numbers(row):
            raise InputError(
                f"{origin} line {i + 2}: {row.provider} {row.instance!r} ({row.gpu}) is also "
                f"on line {first[0] + 2} with other numbers "
                f"(${first[1].usd_per_instance_hour:g} vs ${row.usd_per_instance_hour:g} an "
                "instance-hour); keep one row, or name the instances apart")


def _numbers(row: PriceRow) -> tuple[float, int, int]:
    return row.usd_per_instance_hour, row.gpus_per_instance, row.gpus_per_node


def _row(line: dict[str, str], origin: str, lineno: int) -> PriceRow:
    where = f"{origin} line {lineno}"
    short = [c for c in COLUMNS[:-1] if line.get(c) is None]
    if short:  # csv leaves the columns past a short row's last comma as None
        raise InputError(f"{where}: the row has no {', '.join(short)} (fewer fields than the "
                         "header); fill every column")
    try:  # an unknown GPU's own message (the date and count hint below is not about it)
        gpu = _gpu_id(line["gpu"] or "")
    except KvplanError as exc:
        raise InputError(located(where, exc)) from None
    try:
        row = PriceRow(
            gpu=gpu, provider=line["provider"].strip(),
            instance=line["instance"].strip(),
            gpus_per_instance=_cell(line, "gpus_per_instance", int, "a whole number"),
            gpus_per_node=_cell(line, "gpus_per_node", int, "a whole number"),
            usd_per_instance_hour=_cell(line, "usd_per_instance_hour", float, "a number"),
            source_url=line["source_url"].strip(),
            observed_on=_cell(line, "observed_on", _date, "a date YYYY-MM-DD").isoformat(),
            transcribed_by=(line.get("transcribed_by") or "").strip())
        day = dt.date.fromisoformat(row.observed_on)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(f"{where}: {exc}") from None
    if day > dt.date.today() + dt.timedelta(days=1):  # a day's slack for time zones
        raise InputError(f"{where}: observed_on {row.observed_on} is in the future; give the "
                         "day the price was read (a future day is never stale)")
    _check_row(row, where)
    return row


def _date(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


def _cell(line: dict[str, str], name: str, read: Callable[[str], T], what: str) -> T:
    """One cell read by ``read``; ValueError names the column and the value."""
    text = (line[name] or "").strip()
    try:
        return read(text)
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be {what}, got {text!r}") from None


def _check_row(row: PriceRow, where: str) -> None:
    if not (row.usd_per_instance_hour > 0 and math.isfinite(row.usd_per_instance_hour)):
        raise InputError(f"{where}: usd_per_instance_hour must be a positive number")
    if not (1 <= row.gpus_per_instance <= MAX_GPUS_PER_NODE
            and 1 <= row.gpus_per_node <= MAX_GPUS_PER_NODE):
        raise InputError(f"{where}: gpus_per_instance and gpus_per_node must be in "
                         f"[1, {MAX_GPUS_PER_NODE}]")
    low, high = USD_PER_GPU_HOUR
    if not low <= row.usd_per_gpu_hour <= high:
        raise InputError(f"{where}: the price per GPU-hour (usd_per_instance_hour / "
                         f"gpus_per_instance) must be in [{low:g}, {high:,.0f}] USD, got "
                         f"{row.usd_per_gpu_hour:g}")
    if not row.provider or not row.gpu:
        raise InputError(f"{where}: gpu and provider must not be empty")


def _gpu_id(name: str) -> str:
    from kvplan.specs.hardware import load_gpu

    return load_gpu(name.strip()).id


def bundled_rows() -> tuple[PriceRow, ...]:
    """The table shipped in kvplan/data/prices/prices.csv (sources in SOURCES.md there)."""
    text = input_file.read_text(input_file.package_file("data", "prices", "prices.csv"))
    return read_rows(text, "bundled prices.csv")


def load_price_file(path: Path) -> tuple[PriceRow, ...]:
    """A user's price CSV; its rows are marked as overrides."""
    try:
        text = input_file.read_text(path, "utf-8-sig")
    except OSError as exc:
        raise InputError(f"--prices {path}: cannot read it ({input_file.reason(exc)})") \
            from None
    return tuple(replace(r, override=True) for r in read_rows(text, f"--prices {path}"))


def parse_price(item: str) -> tuple[str, float]:
    """``H100=2.49`` -> (catalog GPU id, USD per GPU-hour)."""
    name, sep, value = item.partition("=")
    try:
        usd = float(value)
    except ValueError:
        usd = math.nan
    if not sep or not name.strip() or not (usd > 0 and math.isfinite(usd)):
        raise InputError(f"--price {item!r}: use GPU=USD_PER_GPU_HOUR, e.g. H100=2.49")
    low, high = USD_PER_GPU_HOUR
    if not low <= usd <= high:
        raise InputError(f"--price {item!r}: the price must be in [{low:g}, {high:,.0f}] USD "
                         "per GPU-hour")
    try:
        return _gpu_id(name), usd
    except KvplanError as exc:  # which of several --price items, and that it is a price
        raise InputError(located(f"--price {item!r}", exc)) from None


def _overrides(items: Sequence[str]) -> dict[str, tuple[float, int]]:
    """--price items by GPU id: (USD per GPU-hour, GPUs a node joins: the GPU's node_gpus,
    GB200's NVL72 domain 72, else 8); one GPU given two prices is refused (the last won
    silently)."""
    from kvplan.specs.hardware import load_gpu

    out: dict[str, tuple[float, int]] = {}
    for item in items:
        gpu, usd = parse_price(item)
        if out.get(gpu, (usd,))[0] != usd:
            raise InputError(f"--price gives {gpu} two prices ({out[gpu][0]:g} and {usd:g} "
                             "USD per GPU-hour); keep one")
        node = load_gpu(item.partition("=")[0].strip()).node_gpus or 8  # not given: 8
        out[gpu] = (usd, min(node, MAX_GPUS_PER_NODE))
    return out


def price_table(provider: str | None = None, *, prices_file: Path | None = None,
                overrides: Sequence[str] = (), today: dt.date | None = None) -> PriceTable:
    """The provider's rows, after --prices FILE (replaces the table) and --price overrides."""
    rows = load_price_file(prices_file) if prices_file is not None else bundled_rows()
    known = tuple(dict.fromkeys(r.provider for r in rows))
    name = provider if provider is not None else (
        DEFAULT_PROVIDER if DEFAULT_PROVIDER in known else known[0])  # "" is not "unset"
    folded = [k for k in known if k.casefold() == name.strip().casefold()]
    if name not in known and len(folded) != 1:  # case-insensitive, as --gpu and model names
        raise InputError(f"unknown --provider {name!r}: choose one of {', '.join(known)}")
    name = name if name in known else folded[0]
    chosen = [r for r in rows if r.provider == name]
    day = (today or dt.date.today()).isoformat()
    for gpu, (usd, node) in _overrides(overrides).items():
        chosen = [r for r in chosen if r.gpu != gpu] + [PriceRow(
            gpu=gpu, provider=name, instance=f"{gpu} (--price)", gpus_per_instance=1,
            gpus_per_node=node, usd_per_instance_hour=usd, source_url="--price",
            observed_on=day, override=True)]
    return PriceTable(provider=name, rows=tuple(chosen))


def providers(rows: Sequence[PriceRow]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(r.provider for r in rows))
