"""KV cache precisions (vLLM --kv-cache-dtype names) and state-cache dtype widths."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import UnknownNameError
from kvplan.units import cdiv


@dataclass(frozen=True, slots=True, kw_only=True)
class KvPrecision:
    """How one cached value is stored: value bits plus optional per-group scales."""

    name: str
    value_bits: int
    scale_bytes: int = 0
    scale_group: int | None = None
    """Values sharing one scale; None with scale_bytes > 0 means one scale per head vector."""
    risk: str

    def vector_bytes(self, n: int) -> int:
        """Bytes to store one head vector of n values, scales included (integer)."""
        values = cdiv(n * self.value_bits, 8)
        if self.scale_bytes == 0:
            return values
        scales = 1 if self.scale_group is None else cdiv(n, self.scale_group)
        return values + scales * self.scale_bytes

    @property
    def bytes_per_value(self) -> float:
        """Average bytes per value for a 128-wide head (for display only)."""
        return self.vector_bytes(128) / 128


_RISKS = {
    "float32": "Exact for every 16-bit model; twice the memory of fp16/bf16 for no accuracy gain.",
    # one line each (kvplan kv prints the model's own on one line)
    "float16": (
        "Exact for fp16 models; a bf16 model's K/V bits are kept as is, read as fp16: "
        "nonsense (vllm #54338)."
    ),
    "bfloat16": (
        "Exact for bf16 models; an fp16 model's K/V bits are kept as is, read as bf16: "
        "nonsense (vllm #54338)."
    ),
    "fp8_e4m3": (
        "Halves the cache. 3 mantissa bits, range +-448 (ROCm's e4m3fnuz: +-240), so the "
        "per-tensor k/v scales matter: vLLM loads them from the checkpoint, computes them with "
        "--calculate-kv-scales, else uses 1.0 (uncalibrated). vLLM's docs: fp8 e4m3 "
        "'typically only minimally degrades inference accuracy'."
    ),
    "fp8_e5m2": (
        "Halves the cache. Range +-57344 needs no calibrated scale, but only 2 mantissa bits: "
        "lower precision than e4m3 (vLLM's docs: 'The E4M3 format offers higher precision')."
    ),
    "int8_per_token_head": (
        "1 byte per value plus one fp32 scale per token per head (K and V), computed as each "
        "token is written: no calibration; scales cost 4 bytes per head per token."
    ),
    "fp8_per_token_head": (
        "fp8 e4m3 values with one fp32 scale per token per head, computed as each token is "
        "written: no calibration; scales cost 4 bytes per head per token."
    ),
    "nvfp4": (
        "4-bit values (e2m1: 1 mantissa bit) with an fp8 scale per 16 values (~0.5625 "
        "bytes/value): about 3.6x smaller than fp16 and the coarsest format here; needs "
        "Blackwell (vLLM's nvfp4 cache kernels are built for SM100 / SM120 only)."
    ),
}

PRECISIONS: dict[str, KvPrecision] = {
    "float32": KvPrecision(name="float32", value_bits=32, risk=_RISKS["float32"]),
    "float16": KvPrecision(name="float16", value_bits=16, risk=_RISKS["float16"]),
    "bfloat16": KvPrecision(name="bfloat16", value_bits=16, risk=_RISKS["bfloat16"]),
    "fp8_e4m3": KvPrecision(name="fp8_e4m3", value_bits=8, risk=_RISKS["fp8_e4m3"]),
    "fp8_e5m2": KvPrecision(name="fp8_e5m2", value_bits=8, risk=_RISKS["fp8_e5m2"]),
    "int8_per_token_head": KvPrecision(
        name="int8_per_token_head", value_bits=8, scale_bytes=4, risk=_RISKS["int8_per_token_head"]
    ),
    "fp8_per_token_head": KvPrecision(
        name="fp8_per_token_head", value_bits=8, scale_bytes=4, risk=_RISKS["fp8_per_token_head"]
    ),
    "nvfp4": KvPrecision(
        name="nvfp4", value_bits=4, scale_bytes=1, scale_group=16, risk=_RISKS["nvfp4"]
    ),
}

_ALIASES = {
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "float": "float32",
    "fp8": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "fp8_inc": "fp8_e4m3",
}

KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto",
    "bfloat16",
    "float16",
    "fp16",
    "bf16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
)


FP8_DS_MLA = KvPrecision(
    name="fp8_ds_mla", value_bits=8,
    risk="DeepSeek-V3.2's own fp8 cache (vLLM's default for it): fp8 latent with a scale per "
         "128 values, rope part kept in bf16; the format its sparse FlashMLA kernel reads.")
"""DeepSeek-V3.2's cache format: vLLM 0.11 ``DeepseekV32ForCausalLM.verify_and_update_config``
turns 'auto' and every fp8 --kv-cache-dtype into it ('bfloat16' keeps bf16)."""
FP8_DS_MLA_TOKEN_BYTES = 656
"""One token of one layer in fp8_ds_mla (``MLAAttentionSpec.page_size_bytes``: block x 656):
512 fp8 latent values + 4 fp32 scales + 64 bf16 rope values = 512 + 16 + 128."""


def resolve_precision(kv_cache_dtype: str, model_dtype: str, *,
                      sparse_mla: bool = False) -> KvPrecision:
    """vLLM ``--kv-cache-dtype`` name -> KvPrecision; 'auto' means the model's dtype, except
    for DeepSeek-V3.2 (``sparse_mla``), where 'auto', fp8 names and vLLM's own 'fp8_ds_mla'
    mean fp8_ds_mla (a name only that model takes)."""
    name = kv_cache_dtype.strip().lower()
    if sparse_mla and (name == "auto" or name.startswith("fp8")):
        if name != FP8_DS_MLA.name:  # vLLM's own name for the format is one of its choices
            resolve_precision(kv_cache_dtype, model_dtype)  # an unknown fp8... name is refused
        return FP8_DS_MLA
    if name == FP8_DS_MLA.name:
        raise UnknownNameError(
            f"--kv-cache-dtype {kv_cache_dtype!r} is DeepSeek-V3.2's sparse-MLA cache format "
            "(models whose config has index_topk); this model has none: use fp8 or auto"
        )
    name = model_dtype if name == "auto" else _ALIASES.get(name, name)
    if name not in PRECISIONS:
        raise UnknownNameError(
            f"unknown --kv-cache-dtype {kv_cache_dtype!r}: "
            f"choose one of {', '.join(KV_CACHE_DTYPES)}"
        )
    return PRECISIONS[name]


MAMBA_CACHE_DTYPES: dict[str, int | None] = {
    "auto": None,
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
}
"""vLLM ``MambaDType`` names -> bytes per value (None: the model's dtype)."""


def mamba_dtype_bytes(name: str, model_dtype: str) -> int:
    """vLLM ``get_kv_cache_torch_dtype(mamba_cache_dtype, model_dtype)`` as a width."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in MAMBA_CACHE_DTYPES:
        raise UnknownNameError(
            f"unknown mamba cache dtype {name!r}: choose one of {', '.join(MAMBA_CACHE_DTYPES)}"
        )
    width = MAMBA_CACHE_DTYPES[key]
    return width if width is not None else PRECISIONS[model_dtype].value_bits // 8
