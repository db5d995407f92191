"""A bounded memo for pure arithmetic keyed by frozen values (a model spec and a few flags)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """``get(key, compute)``: the value computed once per key, kept for later candidates.

    For results that depend on nothing but the key (a planner prices the same model, TP and
    weight format for every KV dtype, sequence cap and chunk size it tries). Bounded: when
    ``size`` keys are held the memo starts again, so a long-running web server does not grow
    without end. A key that cannot be hashed (a spec holding a dict) is computed every time.
    """

    __slots__ = ("_held", "_size", "hits", "misses")

    def __init__(self, size: int = 256) -> None:
        self._held: dict[Hashable, T] = {}
        self._size = size
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        try:
            value = self._held[key]
        except KeyError:
            pass
        except TypeError:  # unhashable: compute, keep nothing
            return compute()
        else:
            self.hits += 1
            return value
        self.misses += 1
        value = compute()
        if len(self._held) >= self._size:
            self._held.clear()
        self._held[key] = value
        return value

    def clear(self) -> None:
        self._held.clear()
        self.hits = self.misses = 0
