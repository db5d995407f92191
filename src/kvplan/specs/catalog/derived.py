"""Published checkpoints that are a catalog model's architecture under another name: a
maker's own FP8 re-release of the same weights (Qwen's ``-FP8`` repos), or a later training
run of the same network (DeepSeek-R1 and the V3 updates on DeepSeek-V3's config.json).

Listed one by one, never matched by pattern: a quantized repo's config.json says how its
weights are stored, and makers differ (block-scaled, per-channel, per-tensor; which modules
stay 16-bit), so only repos whose scheme their maker documents are here. Versions that
change a shape the plan depends on (the Qwen3 ``-2507`` updates raise the context length
from 40,960 to 262,144 tokens) are not, nor are distillations into another family's network
(DeepSeek-R1-Distill-*: "we slightly change their configs and tokenizers"): their own
config.json is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

QWEN_FP8: Mapping[str, Any] = {
    "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
    "weight_block_size": [128, 128]}
"""Qwen's FP8 releases: "fine-grained fp8 quantization with block size of 128" (their model
cards, e.g. huggingface.co/Qwen/Qwen3-8B-FP8), the same quantization_config as DeepSeek-V3's."""


@dataclass(frozen=True, slots=True)
class Derived:
    """A published id and what it is: the catalog model's config, and the
    quantization_config its repo replaces (None: the base config's own)."""

    id: str
    """The published id as its maker spells it (the model's name in kvplan's answers)."""
    base: str
    quantization: Mapping[str, Any] | None
    why: str


_FP8 = "Qwen's FP8 release of that model, its weights in block-scaled fp8 (128 x 128 blocks)"
_DEEPSEEK = "a later DeepSeek training run of that network, the same architecture"
_LLAMA33 = "Meta's Llama 3.3 release of the Llama 3.1 70B network, the same architecture"

_TABLE: dict[str, tuple[str, Mapping[str, Any] | None, str]] = {
    "Qwen/Qwen3-8B-FP8": ("Qwen/Qwen3-8B", QWEN_FP8, _FP8),
    "Qwen/Qwen3-32B-FP8": ("Qwen/Qwen3-32B", QWEN_FP8, _FP8),
    "Qwen/Qwen3-30B-A3B-FP8": ("Qwen/Qwen3-30B-A3B", QWEN_FP8, _FP8),
    "Qwen/Qwen3-235B-A22B-FP8": ("Qwen/Qwen3-235B-A22B", QWEN_FP8, _FP8),
    "meta-llama/Llama-3.3-70B-Instruct": ("meta-llama/Llama-3.1-70B", None, _LLAMA33),
    "deepseek-ai/DeepSeek-R1": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-R1-Zero": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-V3-Base": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-V3-0324": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-V3.1": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-V3.1-Base": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
    "deepseek-ai/DeepSeek-V3.1-Terminus": ("deepseek-ai/DeepSeek-V3", None, _DEEPSEEK),
}


def derived_ids() -> list[str]:
    """The published ids listed here, as their makers spell them."""
    return list(_TABLE)


def find_derived(name: str) -> Derived | None:
    """The entry for a published id (case-insensitive, 'org/name' or 'org--name'), if listed."""
    key = name.strip().lower().replace("--", "/", 1)
    ids = {k.lower(): k for k in _TABLE}
    if key not in ids and "/" not in key:
        hits = [k for k in ids if k.split("/", 1)[1] == key]
        key = hits[0] if len(hits) == 1 else key
    if key not in ids:
        return None
    base, quant, why = _TABLE[ids[key]]
    return Derived(id=ids[key], base=base, quantization=quant, why=why)


def with_quantization(raw: Mapping[str, Any], derived: Derived) -> dict[str, Any]:
    """The base config.json with the derived repo's quantization_config in place."""
    out = dict(raw)
    if derived.quantization is not None:
        out["quantization_config"] = dict(derived.quantization)
    return out
