"""The context length vLLM 0.11 derives from a config.json (``_get_and_verify_max_len``):
the smallest of its length keys, scaled by rope_scaling's factor where vLLM scales it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kvplan.limits import MAX_CONFIG_INT
from kvplan.specs.config_checks import config_int, real_fraction


class Fields(Protocol):
    """What is read off a config (``hf_config._Fields``)."""

    cfg: Mapping[str, Any]
    file: str
    notes: list[str]

    def get(self, key: str, fallback: Any = None) -> Any: ...

    def integer(self, *keys: str, required: bool = True, default: int | None = None) -> int: ...


_UNSCALED_ROPE = ("su", "longrope", "llama3")


def derived_max_len(f: Fields, model_type: str) -> int:
    """vLLM 0.11's derived max_model_len (``config._get_and_verify_max_len``): the config's
    max_position_embeddings times rope_scaling's factor (yarn: its
    original_max_position_embeddings x factor); llama3 / longrope / su and Gemma 3 (whose
    128K is already scaled) keep the field. A linear x4 config of 4,096 positions serves
    16,384 tokens."""
    positions = _config_max_len(f)
    rope = f.cfg.get("rope_scaling")
    if not isinstance(rope, Mapping) or "gemma3" in model_type:
        return positions
    kind = rope.get("rope_type") or rope.get("type")
    if kind in _UNSCALED_ROPE or rope.get("factor") is None:
        return positions
    if kind == "yarn" and rope.get("original_max_position_embeddings") is not None:
        positions = config_int("rope_scaling.original_max_position_embeddings",
                               rope["original_max_position_embeddings"], f.file)
    derived = int(positions * float(rope["factor"]))
    if derived != _config_max_len(f):
        f.notes.append(f"rope_scaling {kind} x{float(rope['factor']):g}: max_model_len up to "
                       f"{derived:,} tokens (as vLLM derives it)")
    return min(max(1, derived), MAX_CONFIG_INT)


_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len")
"""vLLM 0.11's ``_get_and_verify_max_len`` keys: the smallest present wins, except that a
``model_max_length`` (Command-R / Cohere) is taken as it is."""


def has_max_len_key(f: Fields) -> bool:
    """Whether the config (or its class's defaults) gives vLLM a length key to derive from."""
    return any(f.get(k) is not None for k in _MAX_LEN_KEYS)


def _config_max_len(f: Fields) -> int:
    """The config's context length as vLLM reads it, before rope scaling (2,048 when no key
    is present)."""
    found = [f.integer(k) for k in _MAX_LEN_KEYS if f.get(k) is not None]
    if f.get("model_max_length"):
        return f.integer("model_max_length")
    return min(found) if found else 2048


def rope_cache_positions(f: Fields, model_type: str) -> int:
    """Rows of vLLM's rotary caches (0: one cache of max_position_embeddings rows). Gemma 3
    (``gemma3.py``) always builds two: the sliding layers get_rope(base=rope_local_base_freq,
    rope_scaling={"rope_type": "default"}) and the global layers get_rope(base=rope_theta,
    the config's rope_scaling), two keys of get_rope's cache even unscaled (gemma-3-1b-it:
    2 x 32,768 rows). A linear rope_scaling's cache (``LinearScalingRotaryEmbedding``) holds
    max_position_embeddings x factor rows."""
    if "gemma3" not in model_type:
        return 0
    rows = _config_max_len(f)  # Gemma 3's own length: vLLM does not scale it
    rope = f.cfg.get("rope_scaling")
    if not isinstance(rope, Mapping):
        return 2 * rows
    kind = rope.get("rope_type") or rope.get("type")
    factor = rope.get("factor")
    if kind != "linear" or factor is None:
        return 2 * rows
    return rows + int(rows * float(factor))


FP32_ROPE = frozenset({"gpt_oss"})
"""Families whose rotary cache vLLM builds in float32 whatever the --dtype: ``gpt_oss.py``
calls ``get_rope(..., dtype=torch.float32)`` (0.10 through 0.13 alike), so gpt-oss's 131,072
yarn rows x 64 hold 32 MiB, not 16."""

NO_ROPE = frozenset({"nemotron_h", "mamba2", "gpt2", "gpt_bigcode", "opt", "bloom"})
"""Families whose attention layers vLLM builds without a rotary embedding (``nemotron_h.py``:
no position encoding in its few attention layers; ``mamba2.py``: no attention at all; GPT-2,
BigCode, OPT: learned absolute positions; BLOOM: ALiBi), so no cos/sin cache is allocated."""


def rotary_dim(f: Fields, model_type: str, head_dim: int) -> int | None:
    """Dimensions vLLM's rotary cache holds per position (None: the whole head, 0: no cache):
    ``get_rope`` keeps int(head_dim x partial_rotary_factor) when the factor is below 1
    (Qwen3-Next: 256 x 0.25 = 64); GPT-NeoX names it ``rotary_pct``."""
    if model_type in NO_ROPE:
        return 0
    for key in ("partial_rotary_factor", "rotary_pct"):
        value = f.get(key)
        if value is not None:
            factor = real_fraction(key, value, f.file)
            return int(head_dim * factor) if factor < 1 else None
    return None
