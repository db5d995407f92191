"""Bytes per weight: dtype and quantization formats vLLM loads (fp8, awq, gptq, mxfp4, nvfp4)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import EllipsisType
from typing import TypeAlias

from kvplan.errors import InputError, UnknownNameError
from kvplan.specs.quant_config import W8A8_INT8
from kvplan.units import cdiv

LINEAR_ROLES = frozenset({"attention", "dense_mlp", "experts", "shared_experts", "state_layers",
                          "lm_head"})
"""Roles whose linear layers a quantization method converts; embeddings and the router stay
in the model dtype (vLLM builds them with quant_config=None or skips them), and so does
lm_head unless a GPTQ / AWQ checkpoint says ``lm_head: true`` (``Part.linear`` then)."""


FP8_BLOCK = 128
"""Rows of one block-scaled fp8 weight block (128 x 128 in every block fp8 checkpoint vLLM
serves: DeepSeek-V3, Qwen's -FP8 releases). A column-parallel layer with fewer output rows
per GPU cannot be sharded in blocks (vLLM's ``validate_fp8_block_shape`` refuses it), so
such a checkpoint keeps that layer 16-bit (Qwen3-Next's in_proj_ba: 2 x 32 rows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightFormat:
    """How one quantized linear weight is stored: value bits plus scales (and zeros)."""

    name: str
    bits: int
    group: int | None = None
    """Values along the input dimension that share one scale; None = per-tensor scale, -1 =
    one scale per output channel (GPTQ/AWQ ``group_size: -1``)."""
    scale_bytes: int = 0
    zero_bits: int = 0
    block: tuple[int, int] | None = None
    """2-D block scales (rows x cols), e.g. DeepSeek-V3 fp8 128x128: one fp32 scale per block."""
    roles: frozenset[str] = LINEAR_ROLES

    def converts(self, role: str, linear: bool, shard: str, rows: int) -> bool:
        """Whether this format stores a weight (``rows`` output rows on one GPU): a linear
        layer of a role the method converts, and not a column-parallel block-fp8 layer with
        fewer rows per GPU than one block (vLLM cannot shard a partial block: 16-bit)."""
        return linear and role in self.roles and not (
            self.block is not None and shard == "col" and rows < self.block[0])

    def linear_bytes(self, rows: int, cols: int) -> int:
        """Bytes of one quantized (rows x cols) weight matrix, scales and zeros included."""
        values = cdiv(rows * cols * self.bits, 8)
        if self.block is not None:
            return values + cdiv(rows, self.block[0]) * cdiv(cols, self.block[1]) * self.scale_bytes
        if self.group is None:
            return values + self.scale_bytes
        groups = rows * (1 if self.group == -1 else cdiv(cols, self.group))
        return values + groups * self.scale_bytes + cdiv(groups * self.zero_bits, 8)


QUANTIZATIONS: dict[str, WeightFormat] = {
    # online / per-tensor fp8: one fp32 scale per matrix
    "fp8": WeightFormat(name="fp8", bits=8, scale_bytes=4),
    # int4, fp16 scale per 128 inputs; AWQ adds a packed 4-bit zero point per group,
    # GPTQ (symmetric, the common export) needs none
    "awq": WeightFormat(name="awq", bits=4, group=128, scale_bytes=2, zero_bits=4),
    "gptq": WeightFormat(name="gptq", bits=4, group=128, scale_bytes=2),
    # OCP MX fp4: e8m0 scale per 32 values; gpt-oss converts only the MoE experts
    "mxfp4": WeightFormat(
        name="mxfp4", bits=4, group=32, scale_bytes=1, roles=frozenset({"experts"})
    ),
    # NVIDIA fp4: fp8 (e4m3) scale per 16 values (+ one fp32 global scale, counted per matrix)
    "nvfp4": WeightFormat(name="nvfp4", bits=4, group=16, scale_bytes=1),
}
_QUANT_ALIASES = {
    "awq_marlin": "awq",
    "gptq_marlin": "gptq",
    "fbgemm_fp8": "fp8",
    "modelopt_fp4": "nvfp4",
    "modelopt": "fp8",
}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "float": "float32",
    "fp32": "float32",
}


def dtype_bytes(dtype: str, model_dtype: str) -> int:
    """Bytes per unquantized weight for vLLM's ``--dtype`` ('auto' = the model's dtype)."""
    name = dtype.strip().lower()
    name = model_dtype if name == "auto" else _DTYPE_ALIASES.get(name, name)
    if name not in DTYPE_BYTES:
        raise UnknownNameError(
            f"unknown --dtype {dtype!r}: choose auto, bfloat16, float16 or float32"
        )
    return DTYPE_BYTES[name]


def resolve_format(
    quantization: str | None, config_quant: str | None, block: tuple[int, int] | None,
    layout: tuple[str, int, int, int] | None = None,
) -> WeightFormat | None:
    """The user's ``--quantization``, else the config's own; None = unquantized.

    ``block`` is the config's ``weight_block_size``: fp8 then stores one fp32 scale per block.
    ``layout`` is a GPTQ / AWQ / compressed-tensors checkpoint's (method, bits, group_size,
    zero bits) (``specs.quant_config``): an 8-bit GPTQ checkpoint stores 8 bits a weight, not
    the usual 4; a compressed-tensors one is priced as the format its scheme is (fp8, nvfp4,
    int weights as GPTQ's).
    ``none`` (or empty) is no flag, as vLLM reads ``--quantization None``: the checkpoint's own
    format. A flag naming another method than a quantized checkpoint's own is refused, as
    vLLM's ``ModelConfig._verify_quantization`` refuses it ("Quantization method specified in
    the model config (mxfp4) does not match ... the `quantization` argument (fp8)").
    """
    given, own = _method(quantization), _method(config_quant)
    if own == "modelopt_fp4" and given is not None and _key(given) == "fp8":
        given = own  # vLLM's ModelOpt FP4 override turns --quantization modelopt into it
    if given is not None and own is not None and _key(given) != _key(own):
        raise InputError(
            f"--quantization {quantization} does not match the checkpoint's own quantization "
            f"{config_quant!r}: vLLM refuses to start (the method in the model config must "
            f"match the --quantization argument); drop --quantization or give {own}"
        )
    name = given if given is not None else own
    if name is None:
        return None
    key = _key(name)
    if key == "compressed_tensors" and own is not None and layout is not None:
        if layout[0] == W8A8_INT8:  # CompressedTensorsW8A8Int8: a float32 scale per row
            return WeightFormat(name="int8", bits=8, group=-1, scale_bytes=4)
        key = layout[0]
    _needs_own_config(key, own)
    if key not in QUANTIZATIONS:
        what = (f"--quantization {name!r}" if given is not None else
                f"quant_method {name!r} (the checkpoint's quantization_config)")
        raise UnknownNameError(f"unknown {what}: kvplan prices {', '.join(QUANTIZATIONS)} "
                               "and compressed-tensors (fp8, nvfp4, int4/int8 schemes)")
    fmt = QUANTIZATIONS[key]
    if key == "fp8" and block is not None:
        return WeightFormat(name="fp8", bits=8, scale_bytes=4, block=block)
    if key == "fp8" and own is not None and layout is not None and layout[2] == -1:
        return replace(fmt, group=-1)  # compressed-tensors channel: fp32 scale per out row
    if layout is not None and own is not None and key in ("gptq", "awq"):
        _, bits, group, zero_bits = layout
        return replace(fmt, bits=bits, group=group, zero_bits=zero_bits)
    return fmt


_FROM_CHECKPOINT = frozenset({"awq", "gptq", "nvfp4", "modelopt"})
"""Methods vLLM 0.11 builds from the checkpoint's own config (``get_quant_config``: "Cannot
find the config file for gptq" without one); fp8 quantizes 16-bit weights online."""


def what_if_note(quantization: str | None, config_quant: str | None, moe: bool) -> str:
    """A note when ``--quantization`` on a checkpoint with no quantization_config is priced
    as a what-if vLLM cannot start: AWQ / GPTQ / ModelOpt need the quantized export, and
    mxfp4 on a MoE cannot load 16-bit experts into its fp4 parameters (on a dense model it
    leaves the linears 16-bit, as priced); empty otherwise."""
    given = _method(quantization)
    if given is None or _method(config_quant) is not None:
        return ""
    key, raw = _key(given), given.lower().replace("-", "_")
    if not (key in _FROM_CHECKPOINT or raw in _FROM_CHECKPOINT or (key == "mxfp4" and moe)):
        return ""
    fmt = QUANTIZATIONS[key]
    group = "" if fmt.group is None else f", a scale per {fmt.group}"
    return (f"--quantization {given} on a checkpoint without a quantization_config is a "
            f"what-if: these weights priced as {key} ({fmt.bits}-bit{group}); vLLM cannot "
            f"serve it from this checkpoint (it needs the {given} export)")


def _needs_own_config(key: str, own: str | None) -> None:
    """compressed-tensors reads its scheme from the checkpoint: refused without one."""
    if key == "compressed_tensors" and own is None:
        raise InputError("--quantization compressed-tensors reads its scheme from a "
                         "checkpoint's own quantization_config, and this model's config.json "
                         "has none (vLLM cannot find the compressed-tensors config): give the "
                         "quantized checkpoint's config.json, or one of "
                         f"{', '.join(QUANTIZATIONS)}")


def _method(name: str | None) -> str | None:
    """A quantization method as given; None for no method (None, empty, ``none``)."""
    if name is None or name.strip().lower() in ("none", ""):
        return None
    return name.strip()


def _key(name: str) -> str:
    """The QUANTIZATIONS key of a method name (vLLM's Marlin / ModelOpt kernels of one format
    share it: awq_marlin is awq)."""
    key = name.strip().lower().replace("-", "_")
    return _QUANT_ALIASES.get(key, key)


FormatArg: TypeAlias = "WeightFormat | EllipsisType | None"
"""A weight format already resolved (None: unquantized), or ``...``: resolve it here."""


def given_format(fmt: FormatArg, quantization: str | None, config_quant: str | None,
                 block: tuple[int, int] | None,
                 layout: tuple[str, int, int, int] | None = None) -> WeightFormat | None:
    """``fmt`` when the caller resolved it, else ``resolve_format`` of the flags."""
    if isinstance(fmt, EllipsisType):
        return resolve_format(quantization, config_quant, block, layout)
    return fmt
