"""A checkpoint's quantization_config as vLLM 0.11 reads it: GPTQ / AWQ bits and groups, and
compressed-tensors schemes, as (method kvplan prices it as, bits, group, zero-point bits);
fp8's group is -1 for per-channel scales, 0 for one per tensor."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kvplan.errors import ConfigError
from kvplan.specs.config_checks import config_int, short_repr, weight_block
from kvplan.specs.model import ModelSpec

QuantLayout = tuple[str, int, int, int]
"""(kvplan method: gptq / awq / fp8 / nvfp4 / w8a8_int8, bits, group_size (-1: per output
channel), zero-point bits)."""

W8A8_INT8 = "w8a8_int8"
"""compressed-tensors int8 weights and int8 activations: CompressedTensorsW8A8Int8 keeps the
int8 weight and a float32 scale per output row (strategy channel; a fused layer's per-tensor
scales are spread to its rows too, ``convert_to_channelwise``), where the weight-only int
schemes keep their scales in the model dtype."""

_INT_METHODS = {"gptq": (("bits",), ("group_size",)),
                "awq": (("w_bit", "bits"), ("q_group_size", "group_size"))}
"""quantization_config keys vLLM 0.11 reads (GPTQConfig / AWQConfig.from_config)."""


def quant_method(q: Any) -> str | None:
    """The checkpoint's method as vLLM 0.11 resolves it: ``quant_method`` lower-cased, but a
    ModelOpt checkpoint (``quant_method: modelopt``) whose ``quant_algo`` names FP4 (NVFP4) is
    ``modelopt_fp4`` (``ModelOptNvFp4Config.override_quantization_method``), not ModelOpt's
    per-tensor fp8: 4 bits + an fp8 scale per 16 weights, not 8 bits."""
    if not isinstance(q, Mapping) or not q.get("quant_method"):
        return None
    method = str(q["quant_method"]).lower()
    nested = q.get("quantization")
    algo = nested.get("quant_algo") if isinstance(nested, Mapping) else q.get("quant_algo")
    if method == "modelopt" and "FP4" in str(algo or "").upper():
        return "modelopt_fp4"
    return method


def quant_layout(q: Any, file: str) -> QuantLayout | None:
    """The layout of a GPTQ, AWQ or compressed-tensors quantization_config, else None."""
    if not isinstance(q, Mapping):
        return None
    method = str(q.get("quant_method") or "").lower().replace("_marlin", "")
    if method == "compressed-tensors":
        return _compressed_tensors(q, file)
    return _int_layout(q, method, file) if method in _INT_METHODS else None


def _int_layout(q: Mapping[str, Any], method: str, file: str) -> QuantLayout:
    """GPTQ: ``bits`` (2, 3, 4, 8), ``group_size`` (-1: one scale per output channel), zero
    points only when not ``sym`` (gptq_marlin drops a symmetric checkpoint's qzeros); AWQ:
    ``w_bit``/``bits`` (4 only, as vLLM's AWQConfig), ``q_group_size``/``group_size``, a zero
    point per group when ``zero_point``."""
    bits_keys, group_keys = _INT_METHODS[method]
    bits = next((q[k] for k in bits_keys if q.get(k) is not None), 4)
    group = next((q[k] for k in group_keys if q.get(k) is not None), 128)
    where = f"quantization_config.{bits_keys[-1]}"
    if not isinstance(bits, int) or isinstance(bits, bool) or bits not in (2, 3, 4, 8):
        raise ConfigError(f"must be 2, 3, 4 or 8, got {short_repr(bits)}", field=where,
                          file=file)
    if method == "awq" and bits != 4:
        raise ConfigError(f"is {bits}: vLLM's AWQ serves 4-bit weights only", field=where,
                          file=file)
    if group != -1:
        group = config_int(f"quantization_config.{group_keys[-1]}", group, file)
    zeros = q.get("zero_point", True) if method == "awq" else not q.get("sym", True)
    return method, bits, group, bits if zeros else 0


def quant_lm_head(q: Any) -> bool:
    """Whether a GPTQ / AWQ checkpoint quantized its lm_head (``lm_head: true``): vLLM 0.11's
    GPTQConfig, GPTQMarlinConfig and AWQMarlinConfig then build ParallelLMHead with their
    linear method (``lm_head_quantized``)."""
    return (isinstance(q, Mapping) and q.get("lm_head") is True
            and str(q.get("quant_method") or "").lower().replace("_marlin", "") in _INT_METHODS)


def gptq_desc_act(q: Any) -> bool:
    """A GPTQ checkpoint's act order as vLLM 0.11 keeps it: ``desc_act`` with a group size
    (``GPTQMarlinConfig`` turns it off for ``group_size: -1``, one group per row)."""
    if not isinstance(q, Mapping) or str(q.get("quant_method") or "").lower() not in (
            "gptq", "gptq_marlin"):
        return False
    return q.get("desc_act") is True and q.get("group_size", 128) != -1


def compressed_weights(q: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``weights`` scheme of a compressed-tensors config's first config group."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        return None
    first = next(iter(groups.values()))
    weights = first.get("weights") if isinstance(first, Mapping) else None
    return weights if isinstance(weights, Mapping) else None


def _compressed_tensors(q: Mapping[str, Any], file: str) -> QuantLayout:
    """vLLM's CompressedTensorsConfig schemes by their weights: float 8 bits = fp8 (tensor,
    channel or block scales), float 4 bits in groups of 16 = nvfp4, int 4 / 8 bits = a GPTQ-
    like weight-only layout (Marlin) with the scheme's group (channel: -1) and zeros when
    not symmetric; int8 weights with int8 activations = W8A8 (float32 scales)."""
    w = compressed_weights(q)
    where = "quantization_config.config_groups"
    if w is None:
        raise ConfigError("holds no weights scheme; a compressed-tensors config lists "
                          "config_groups.<name>.weights", field=where, file=file)
    bits, kind = w.get("num_bits"), w.get("type")
    group = w.get("group_size") if w.get("strategy") in ("group", "tensor_group") else -1
    if kind == "float" and bits == 8:  # channel: an fp32 scale per output row; tensor: one
        return "fp8", 8, -1 if w.get("strategy") == "channel" else 0, 0
    if kind == "float" and bits == 4 and group == 16:
        return "nvfp4", 4, 16, 0
    if kind == "int" and bits == 8 and _int8_activations(q):
        return W8A8_INT8, 8, -1, 0
    if kind == "int" and bits in (4, 8):
        group = -1 if group in (None, -1) else config_int(f"{where}.weights.group_size",
                                                          group, file)
        return "gptq", bits, group, 0 if w.get("symmetric", True) else bits
    raise ConfigError(f"weights scheme {short_repr(dict(w))} is not one kvplan prices "
                      "(fp8, nvfp4, int4 / int8)", field=where, file=file)


def _int8_activations(q: Mapping[str, Any]) -> bool:
    """Whether the first config group quantizes activations to int8 too (W8A8: vLLM's
    CompressedTensorsW8A8Int8, not the weight-only Marlin scheme)."""
    first = next(iter(q["config_groups"].values()))
    act = first.get("input_activations") if isinstance(first, Mapping) else None
    return isinstance(act, Mapping) and act.get("type") == "int" and act.get("num_bits") == 8


def checkpoint_block(q: Any, file: str) -> tuple[int, int] | None:
    """fp8 block scales: quantization_config.weight_block_size, or a compressed-tensors
    scheme's ``block_structure`` under strategy ``block``."""
    if not isinstance(q, Mapping):
        return None
    block = q.get("weight_block_size")
    scheme = compressed_weights(q)
    if block is None and scheme is not None and scheme.get("strategy") == "block":
        block = scheme.get("block_structure")
    return weight_block(block, file)


_IGNORE_KEYS = ("ignore", "modules_to_not_convert", "ignored_layers", "exclude_modules")
"""Where a quantization_config lists the modules it leaves unquantized: compressed-tensors
``ignore``, Fp8Config / AWQ / Mxfp4 ``modules_to_not_convert`` (``ignored_layers``), ModelOpt
``exclude_modules`` (also under its nested ``quantization``)."""


def quant_ignore(q: Any, file: str) -> tuple[str, ...]:
    """The module names / patterns a checkpoint's quantization_config keeps unquantized."""
    if not isinstance(q, Mapping):
        return ()
    nested = q.get("quantization")
    out: list[str] = []
    for where in (q, nested if isinstance(nested, Mapping) else {}):
        for key in _IGNORE_KEYS:
            names = where.get(key)
            if isinstance(names, list):
                out += [n for n in names if isinstance(n, str) and n]
    for entry in out:
        try:
            re.compile(_entry_regex(entry))
        except re.error as e:
            raise ConfigError(f"entry {short_repr(entry)} is not a valid regular expression "
                              f"({e})", field="quantization_config.ignore", file=file) from None
    return tuple(dict.fromkeys(out))


def _entry_regex(entry: str) -> str:
    """An ignore-list entry as a regular expression over a whole module name, read as vLLM's
    methods read them: ``re:`` a regular expression matched from the start of the name
    (compressed-tensors), ``*`` a wildcard over the whole name (ModelOpt), else whole dotted
    segments (``lm_head``, ``model.layers.0.self_attn``, an exact module name); an entry
    naming a module also names the modules inside it."""
    if entry.startswith("re:"):
        return f"(?:{entry[3:]}).*"
    if "*" in entry:
        return re.escape(entry).replace(r"\*", ".*") + r"(?:\..*)?"
    return r"(?:.*\.)?" + re.escape(entry) + r"(?:\..*)?"


@lru_cache(maxsize=256)
def _ignore_pattern(entries: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{_entry_regex(e)})" for e in entries))


def ignore_matches(entries: tuple[str, ...], name: str) -> bool:
    """Whether any ignore-list entry names module ``name`` (``_entry_regex``)."""
    return _ignore_pattern(entries).fullmatch(name) is not None


_NAMED = frozenset({"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen3_next",
                    "deepseek_v2", "deepseek_v3", "mixtral", "gemma", "gemma2", "gemma3_text",
                    "olmo2", "olmoe", "gpt_oss", "ernie4_5_moe"})
"""Families whose checkpoints name decoder layers ``model.layers.N.self_attn.q_proj`` /
``mlp.gate_proj`` (the names ignore lists use); other families' ignore lists are not read."""
_MLP = (("gate_proj", "up_proj"), ("down_proj",))


def _role_names(m: ModelSpec, role: str) -> tuple[tuple[str, ...], ...]:
    """Checkpoint module names (under ``model.layers.N.``) of a role's linear weights, in the
    order ``costs.memory.params`` yields them (a fused weight: all its shards' names)."""
    if role == "attention" and m.mla is not None:
        q = ("q_a_proj", "q_b_proj") if m.mla.q_lora_rank is not None else ("q_proj",)
        return tuple((f"self_attn.{n}",) for n in (*q, "kv_a_proj_with_mqa", "kv_b_proj",
                                                    "o_proj"))
    if role == "attention":
        return tuple((f"self_attn.{n}_proj",) for n in "qkvo")
    if role in ("dense_mlp", "shared_experts"):
        mlp = {"dense_mlp": "mlp", "shared_experts": "mlp.shared_experts"}[role]
        if role == "shared_experts" and m.model_type in ("qwen2_moe", "qwen3_next"):
            mlp = "mlp.shared_expert"
        return tuple(tuple(f"{mlp}.{n}" for n in names) for names in _MLP)
    if role == "state_layers" and m.linear_attention is not None:
        return tuple((f"linear_attn.{n}",) for n in ("in_proj_qkvz", "in_proj_ba", "out_proj"))
    return ()  # routed experts and the router: FusedMoE / replicated, not read here


@lru_cache(maxsize=8192)
def kept_linears(m: ModelSpec, layer: int, parts: tuple[tuple[str, bool], ...]) -> frozenset[int]:
    """Positions, among decoder layer ``layer``'s (role, is-linear) weights, of the linear
    layers the checkpoint's ignore list keeps in the model dtype (vLLM builds them with
    UnquantizedLinearMethod); a fused weight is kept when all its shards are listed.
    Cached: every pass over the layers (weights, scales, the step's GEMMs) asks again."""
    if not m.quant_ignore or m.model_type not in _NAMED:
        return frozenset()
    seen: dict[str, int] = {}
    kept = set()
    for i, (role, linear) in enumerate(parts):
        nth = seen.get(role, 0)
        seen[role] = nth + linear
        names = _role_names(m, role) if linear else ()
        if nth < len(names) and all(
                ignore_matches(m.quant_ignore, f"model.layers.{layer}.{n}") for n in names[nth]):
            kept.add(i)
    return frozenset(kept)
