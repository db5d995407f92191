"""Print the fuzz suite's counts per family (and outcome) at the end of the session."""

from __future__ import annotations

from typing import Any

from tests.fuzz.harness import COUNTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not COUNTS:
        return
    write = terminalreporter.write_line
    write("fuzz examples per family (ok = exit 0 with valid output, error = one-line exit 2, "
          "FAIL = contract broken):")
    total: dict[str, int] = {}
    for family in sorted(COUNTS):
        counts = COUNTS[family]
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
        write(f"  {family:<48} ok {counts['ok']:>5}  error {counts['error']:>5}  "
              f"FAIL {counts['FAIL']:>3}  total {sum(counts.values()):>6}")
    write(f"  {'all':<48} ok {total.get('ok', 0):>5}  error {total.get('error', 0):>5}  "
          f"FAIL {total.get('FAIL', 0):>3}  total {sum(total.values()):>6}")
