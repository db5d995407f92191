"""PLACEHOLDER (integration only; replaced by the silicon branch)."""
from typing import Any


def has_tables(gpu: str) -> bool:
    return False


def __getattr__(name: str) -> Any:
    raise AttributeError(name)
