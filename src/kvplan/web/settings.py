"""What the server allows: body size, upload size, simulation caps (set by `kvplan web`)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.units import MiB


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSettings:
    """Limits that keep one page from taking the machine."""

    max_body_bytes: int = 2 * MiB
    """Request bodies above this are refused with 413 before they are read."""
    max_uploads: int = 64
    """config.json uploads kept in memory (oldest dropped first)."""
    max_sim_requests: int = 2000
    """Requests one page-started simulation may hold."""
    max_sim_seconds: float = 60.0
    """Wall time one page-started simulation may take before it is stopped."""
    max_running_sims: int = 2
    """Simulations running at once over all clients (each client: one at a time)."""
