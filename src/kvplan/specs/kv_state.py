"""State caches of Mamba2 / Gated DeltaNet layers: one fixed-size state per request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan.specs.kv_precision import mamba_dtype_bytes
from kvplan.specs.model import ModelSpec
from kvplan.units import fmt_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSpec:
    """Mamba2 / Gated DeltaNet layer: a fixed-size state per request (vLLM ``MambaSpec``).

    The state is two tensors, each in its own dtype (vLLM ``MambaStateDtypeCalculator``):
    a short convolution window and the temporal (SSM / recurrent) state. One page holds one
    request's whole state, whatever the block size; in a hybrid model the page is padded up
    to the attention page (``page_size_padded``) so every layer's page has the same size::

        state_bytes     = conv_elements x conv_dtype + temporal_elements x temporal_dtype
        page_size_bytes = page_size_padded if set, else state_bytes
    """

    layer_type: str
    conv_elements: int
    conv_dtype_bytes: int
    temporal_elements: int
    temporal_dtype_bytes: int
    page_size_padded: int | None = None
    """vLLM ``cache_config.mamba_page_size_padded``: the attention page it is padded to."""
    kind: Literal["state"] = "state"

    def __post_init__(self) -> None:
        assert self.page_size_padded is None or self.page_size_padded >= self.state_bytes

    @property
    def bytes_per_token(self) -> int:
        return 0

    @property
    def state_elements(self) -> int:
        return self.conv_elements + self.temporal_elements

    @property
    def conv_bytes(self) -> int:
        return self.conv_elements * self.conv_dtype_bytes

    @property
    def temporal_bytes(self) -> int:
        return self.temporal_elements * self.temporal_dtype_bytes

    @property
    def state_bytes(self) -> int:
        """The state itself (vLLM's unpadded ``MambaSpec`` page): conv + temporal bytes."""
        return self.conv_bytes + self.temporal_bytes

    @property
    def dtype_bytes(self) -> int:
        """Bytes per value when conv and temporal states share a dtype (the vLLM default);
        otherwise the temporal state's, the larger tensor (see ``formula`` for both)."""
        return self.temporal_dtype_bytes

    def page_size_bytes(self, block_size: int) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.state_bytes

    def tokens_held(self, tokens: int) -> int:
        return 0

    def bytes_for(self, tokens: int) -> int:
        return self.state_bytes if tokens > 0 else 0

    def blocks_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        return 1 if tokens > 0 else 0

    @property
    def formula(self) -> str:
        """The state's bytes written out: conv + temporal, each with its dtype width."""
        return (
            f"{self.conv_elements:,} conv x {self.conv_dtype_bytes} B + "
            f"{self.temporal_elements:,} temporal x {self.temporal_dtype_bytes} B = "
            f"{self.state_bytes:,} bytes"
        )

    @property
    def label(self) -> str:
        padded = (
            f", page padded to {fmt_bytes(self.page_size_padded)}" if self.page_size_padded else ""
        )
        return (
            f"{self.layer_type} state (conv {fmt_bytes(self.conv_bytes)} + temporal "
            f"{fmt_bytes(self.temporal_bytes)}{padded})"
        )


def state_spec(
    model: ModelSpec, kind: str, tp: int, cache_dtype: str, ssm_cache_dtype: str
) -> StateSpec | None:
    """vLLM 0.11 ``MambaStateDtypeCalculator``: the conv state is in ``mamba_cache_dtype``;
    Mamba2's SSM state in ``mamba_ssm_cache_dtype`` ('auto' = the conv dtype); Gated
    DeltaNet keeps both in ``mamba_cache_dtype`` (``gated_delta_net_state_dtype``)."""
    conv = mamba_dtype_bytes(cache_dtype, model.dtype)
    if kind == "linear_attention" and model.linear_attention is not None:
        la = model.linear_attention
        return StateSpec(
            layer_type="linear attention",
            conv_elements=la.conv_elements(tp),
            conv_dtype_bytes=conv,
            temporal_elements=la.temporal_elements(tp),
            temporal_dtype_bytes=conv,
        )
    if kind == "mamba" and model.mamba is not None:
        ssm = conv if ssm_cache_dtype == "auto" else mamba_dtype_bytes(ssm_cache_dtype, model.dtype)
        return StateSpec(
            layer_type="mamba2",
            conv_elements=model.mamba.conv_elements(tp),
            conv_dtype_bytes=conv,
            temporal_elements=model.mamba.temporal_elements(tp),
            temporal_dtype_bytes=ssm,
        )
    return None
