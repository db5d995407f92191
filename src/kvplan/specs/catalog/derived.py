"""Published checkpoints that are a catalog model's architecture under another name: a
maker's own FP8 re-release of the same weights (Qwen's ``-FP8`` repos), a later training
run of the same network (DeepSeek-R1 and the V3 updates on DeepSeek-V3's config.json), or an
Instruct release whose config.json differs in a field the plan reads (Qwen2.5's: 32,768
positions against the base model's 131,072).

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

from kvplan.specs.catalog.ids import lookup

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
    fields: Mapping[str, Any] | None = None
    """config.json fields the repo's own file sets otherwise than the base model's."""


_FP8 = "Qwen's FP8 release of that model, its weights in block-scaled fp8 (128 x 128 blocks)"
_DEEPSEEK = "a later DeepSeek training run of that network, the same architecture"
_LLAMA33 = "Meta's Llama 3.3 release of the Llama 3.1 70B network, the same architecture"
_V3 = "deepseek-ai/DeepSeek-V3"
_QWEN25 = ("Qwen's instruction-tuned release of that network, whose config.json holds 32,768 "
           "positions (the base model's 131,072 need YaRN there, its model card)")

_LISTED: tuple[Derived, ...] = (
    *(Derived(id=f"Qwen/Qwen3-{size}-FP8", base=f"Qwen/Qwen3-{size}", quantization=QWEN_FP8,
              why=_FP8) for size in ("8B", "32B", "30B-A3B", "235B-A22B")),
    Derived(id="meta-llama/Llama-3.3-70B-Instruct", base="meta-llama/Llama-3.1-70B",
            quantization=None, why=_LLAMA33),
    *(Derived(id=f"deepseek-ai/DeepSeek-{name}", base=_V3, quantization=None, why=_DEEPSEEK)
      for name in ("R1", "R1-0528", "R1-Zero", "V3-Base", "V3-0324", "V3.1", "V3.1-Base",
                   "V3.1-Terminus")),
    # vLLM serves Qwen/Qwen2.5-7B-Instruct at max_seq_len=32768 when no --max-model-len is
    # given (v0.9.0, v0.13.0, v0.18.0 logs), and its rope cache holds 32,768 rows
    *(Derived(id=f"Qwen/Qwen2.5-{size}-Instruct", base=f"Qwen/Qwen2.5-{size}",
              quantization=None, why=_QWEN25, fields={"max_position_embeddings": 32768})
      for size in ("7B", "72B")),
)
_BY_KEY = {d.id.lower(): d for d in _LISTED}


def listed() -> tuple[Derived, ...]:
    """Every published checkpoint listed here, in the order shown to users."""
    return _LISTED


def find_derived(name: str) -> Derived | None:
    """The entry for a published id (case-insensitive, 'org/name' or 'org--name'; the org may
    be left out when the name is unique), as ``catalog.find_entry`` reads catalog ids."""
    return lookup(name, _BY_KEY)


def with_quantization(raw: Mapping[str, Any], derived: Derived) -> dict[str, Any]:
    """The base config.json with the derived repo's own fields and quantization_config."""
    out = dict(raw) | dict(derived.fields or {})
    if derived.quantization is not None:
        out["quantization_config"] = dict(derived.quantization)
    return out
