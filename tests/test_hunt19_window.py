"""hunt19: a sliding-window decode never gets cheaper as its cache grows. The cap at the
full kernel (test_hunt17_window) started at 4 windows, so one token more of cache dropped
the windowed decode from its own measured row to the full kernel's (a random example of
test_hunt16_ops16's windowed physics found it)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn

SHAPE = {"num_heads": 64, "num_kv_heads": 8, "head_dim": 64, "kv_dtype": "bfloat16"}


def test_windowed_decode_does_not_fall_where_the_full_kernel_cap_starts() -> None:
    # H100, one request, gpt-oss's 64 x 8 x 64 slice, window 128: the window row reads
    # 14.29 us at 511 cached tokens, the full kernel 11.79 us at 512 (4 windows). Below 4
    # windows the windowed decode reads fewer keys than the full kernel does at 4 windows,
    # so it is capped there too: 511 -> 11.79 us (was 14.29 us, then 11.79 us at 512).
    t = kn.decode_attention_s("H100", 1, np.array([163, 511, 512, 4096]), window=128, **SHAPE)
    full512 = kn.decode_attention_s("H100", 1, np.array([512]), **SHAPE)[0]
    assert full512 == pytest.approx(11.787e-6, rel=1e-3)
    assert t[1] == full512 and t[2] == full512
    assert np.all(np.diff(t) >= 0)


@pytest.mark.parametrize("gpu", ["H100", "H200", "B200", "GB200", "L40S"])
def test_windowed_decode_is_monotone_over_every_cache_length(gpu: str) -> None:
    # every cache length from 2 to 3,000 tokens, small and large batches, both KV dtypes
    lengths = np.arange(2, 3001)
    for kv_dtype in ("bfloat16", "fp8"):
        for batch in (1, 3, 16, 64, 256):
            t = kn.decode_attention_s(gpu, batch, lengths, window=128,
                                      **{**SHAPE, "kv_dtype": kv_dtype})
            assert np.all(np.diff(t) >= 0), (gpu, kv_dtype, batch)
