"""What the server allows: body size and time, upload count, the compute cap and its queue,
connections, and the token asked for when bound beyond loopback (set by `kvplan web`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.units import KiB, MiB


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSettings:
    """Limits that keep one page (or one client on the network) from taking the machine."""

    max_body_bytes: int = 2 * MiB
    """Request bodies above this are refused with 413 (declared or chunked)."""
    body_timeout_s: float = 30.0
    """A body not complete this long after its headers: 408, connection closed."""
    header_timeout_s: float = 10.0
    """A connection whose request headers are not complete this long after it opened (or after
    its previous response) is closed (uvicorn's h11 protocol, see transport.py)."""
    max_header_bytes: int = 16 * KiB
    """Request line and headers above this: 400 (h11's incomplete-event limit)."""
    max_connections: int = 1000
    """Open connections (or tasks) beyond this are answered 503 by uvicorn."""
    max_uploads: int = 64
    """config.json uploads kept in memory (oldest dropped first)."""
    max_sim_requests: int = 2000
    """Requests one page-started simulation may hold."""
    max_sim_seconds: float = 60.0
    """Wall time one simulation or plan may take, from its start, before it is stopped."""
    max_running_sims: int = 2
    """Simulations and plans running at once over all endpoints and clients (sync and jobs)."""
    max_queued_sims: int = 8
    """More that wait their turn; beyond that, 503 with Retry-After."""
    field_help: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    """command -> field (its flag in snake_case) -> the CLI's --help line for that flag, shown
    by /docs as the field's meaning and unit (`kvplan web` passes it: the web never imports
    the CLI)."""
    token: str | None = field(default=None, repr=False)
    """When set, every request needs it (auth.py); `kvplan web` sets one off loopback."""
