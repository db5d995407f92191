"""Which engine behaviour a measured run had by default, read from its engine version.

A point is priced with the engine its run used, not with kvplan's own defaults (vLLM 0.11's):

* **vLLM's async scheduling** (the host's per-step and per-request work overlaps the GPU's,
  ``StepCostModel._finish``) is on by default from vLLM 0.14.0: PR #27614 "[Core] Enable async
  scheduling by default" was merged in the week to 2026-01-02 (vLLM's weekly summary of that
  date); v0.13.0 was already out. Before it, ``--async-scheduling`` had to be passed.
* **SGLang's overlap scheduler** (the same overlap: the CPU schedules batch n + 1 while the GPU
  runs batch n) is on by default since SGLang v0.4 (December 2024; ``--disable-overlap-schedule``
  turns it off). Every SGLang point in the set is v0.5 or later.
* TensorRT-LLM's points are its C++ runtime's static-batch tables (v0.5 / v0.6): no overlap.

A flag the page prints (``engine_args.async_scheduling``) wins over the version. A version is
read from the first ``0.N.M`` in the point's ``engine_version`` (``v0.11.0``,
``rocm/vllm:rocm7.0.0_vllm_0.10.2_...``); a run of vLLM's main branch or nightly wheel without
one is dated by a month in that text ("main at the PR's base (Aug 2025)") or else by the
point's ``date`` (January 2026 or later: on); a run with neither (e.g. "not stated (2024 blog)") is taken as before 0.14.
"""

from __future__ import annotations

import re

ASYNC_DEFAULT_VERSION = (0, 14, 0)
ASYNC_DEFAULT_MONTH = "2026-01"
"""vLLM main branches from this month on run async scheduling by default (PR #27614, merged
between 2025-12-26 and 2026-01-02)."""

_VERSION = re.compile(r"(?<![\d.])0\.(\d+)\.(\d+)")
_ISO = re.compile(r"\b(20\d\d)-(\d\d)(?:-(\d\d))?\b")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r")[a-z]*\.?\s+(20\d\d)\b", re.IGNORECASE)


def vllm_version(text: str) -> tuple[int, int, int] | None:
    """The first vLLM release number in ``text`` (0.N.M), or None."""
    m = _VERSION.search(text)
    return None if m is None else (0, int(m.group(1)), int(m.group(2)))


def month_of(text: str) -> str | None:
    """The first date in ``text`` as YYYY-MM(-DD) (ISO, or "Aug 2025" -> 2025-08), or None."""
    iso = _ISO.search(text)
    if iso is not None:
        return iso.group(0)
    m = _MONTH_YEAR.search(text)
    if m is None:
        return None
    return f"{m.group(2)}-{_MONTHS.index(m.group(1)[:3].lower()) + 1:02d}"


def runs_async(engine: str, version: str, date: str | None = None,
               printed: bool | None = None) -> bool:
    """Whether a run of ``engine`` (vllm, sglang, trtllm) at ``version`` (the point's
    ``engine_version`` text; ``date``: its publication date) overlapped host work with the
    GPU's by default; ``printed``: the flag as its page prints it, if it does."""
    if printed is not None:
        return printed
    if engine == "sglang":
        return True
    if engine != "vllm":
        return False
    v = vllm_version(version)
    if v is not None:
        return v >= ASYNC_DEFAULT_VERSION
    when = month_of(version) or (month_of(date) if date else None)
    return when is not None and when[:7] >= ASYNC_DEFAULT_MONTH
