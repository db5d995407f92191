"""Parsed engine-flag settings -> EngineConfig, TP checked with vLLM's rule (no typer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.specs.model import ModelSpec
    from kvplan.specs.serving import EngineConfig


def resolve_engine(settings: Mapping[str, Any], model: ModelSpec | None = None) -> EngineConfig:
    """The EngineConfig for these settings (vLLM defaults for the rest), TP checked on ``model``
    with vLLM's rule: it divides the attention heads, and the KV heads split or replicate."""
    from kvplan.specs.kv import check_tensor_parallel
    from kvplan.specs.serving import EngineConfig

    engine = EngineConfig(**settings)
    if model is not None:
        check_tensor_parallel(model, engine.tensor_parallel_size)
    return engine
