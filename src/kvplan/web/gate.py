"""One cap and one queue for every request that computes (GET /api/simulate, GET /api/plan and
their jobs): at most ``running`` at once, ``queued`` more wait their turn in arrival order, and
the rest are refused at once with 503 and a ``Retry-After`` estimate.

The work runs on daemon threads of its own, never on the thread pool that answers the light
endpoints, so a full queue does not slow ``/api/models`` or a page down.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
TYPICAL_S = 5.0
"""Assumed run time before any run has finished (for the first Retry-After estimates)."""


class Busy(Exception):
    """Refused for load: HTTP ``status`` (503 server full, 429 this client) with Retry-After."""

    def __init__(self, message: str, retry_after_s: int, status: int = 503,
                 job: str | None = None) -> None:
        super().__init__(message)
        self.retry_after_s, self.status = retry_after_s, status
        self.job = job
        """429: the client's own job in the way (its id, so the page can cancel it)."""


class Left(Exception):
    """The ticket left the queue before its turn (its job was cancelled while waiting)."""


class Ticket:
    """One admitted request: ``started`` is set when it holds a running slot."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.since = time.monotonic()


class Gate:
    """Admission and FIFO hand-over of ``running`` slots; thread-safe."""

    def __init__(self, running: int, queued: int) -> None:
        self.running, self.queued = running, queued
        self._active: set[Ticket] = set()
        self._waiting: deque[Ticket] = deque()
        self._recent: deque[float] = deque(maxlen=16)
        self._lock = threading.Lock()

    def admit(self) -> Ticket:
        """A ticket that runs now or waits in line; Busy (503) when the line is full."""
        with self._lock:
            if len(self._active) + len(self._waiting) >= self.running + self.queued:
                raise Busy(f"the server is busy: {len(self._active)} simulations or plans "
                           f"running and {len(self._waiting)} waiting (at most "
                           f"{self.running} + {self.queued}); try again in "
                           f"{self._retry_after()} s", self._retry_after())
            ticket = Ticket()
            if len(self._active) < self.running and not self._waiting:
                self._start(ticket)
            else:
                self._waiting.append(ticket)
            return ticket

    def wait(self, ticket: Ticket, stop: Callable[[], bool] = lambda: False) -> None:
        """Block until ``ticket`` runs; Left (and out of the line) once ``stop()`` is true."""
        while not ticket.started.wait(0.1):
            if stop():
                self.release(ticket)
                raise Left()

    def release(self, ticket: Ticket) -> None:
        """Free the ticket's slot (or its place in line) and start the next in line."""
        with self._lock:
            if ticket in self._active:
                self._active.discard(ticket)
                self._recent.append(time.monotonic() - ticket.since)
            elif ticket in self._waiting:
                self._waiting.remove(ticket)
            while self._waiting and len(self._active) < self.running:
                self._start(self._waiting.popleft())

    def ahead(self, ticket: Ticket) -> int:
        """How many wait before ``ticket`` (0 once it runs)."""
        with self._lock:
            return self._waiting.index(ticket) + 1 if ticket in self._waiting else 0

    def retry_after(self) -> int:
        with self._lock:
            return self._retry_after()

    def _start(self, ticket: Ticket) -> None:
        self._active.add(ticket)
        ticket.since = time.monotonic()
        ticket.started.set()

    def _retry_after(self) -> int:
        """Seconds until a place is likely free: the line ahead times the median run time."""
        typical = statistics.median(self._recent) if self._recent else TYPICAL_S
        return max(1, math.ceil(typical * (len(self._waiting) + 1) / self.running))


def spawn(gate: Gate, ticket: Ticket, body: Callable[[], None]) -> None:
    """Run ``body`` on a daemon thread once ``ticket`` holds a slot; the slot is freed after."""

    def run() -> None:
        try:
            body()
        finally:
            gate.release(ticket)

    threading.Thread(target=run, daemon=True, name="kvplan-compute").start()


async def gated(gate: Gate, work: Callable[[], T]) -> T:
    """``work()`` in its turn, on a thread of its own; its result or exception, awaited."""
    ticket = gate.admit()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def body() -> None:
        try:
            gate.wait(ticket)
            result = work()
        except BaseException as exc:  # handed to the awaiting request, not swallowed
            loop.call_soon_threadsafe(_settle, future, exc, None)
        else:
            loop.call_soon_threadsafe(_settle, future, None, result)

    spawn(gate, ticket, body)
    return await future


def _settle(future: asyncio.Future[Any], exc: BaseException | None, result: Any) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
