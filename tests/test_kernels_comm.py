"""Collective lookups against aiconfigurator-core 0.12.0 (h100_sxm/comm/vllm/0.24.0/
custom_allreduce_perf.parquet and h100_sxm/comm/nccl/2.29.2/nccl_perf.parquet; message_size
counts bf16/fp16 elements, latency in ms)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as K
from kvplan.costs.kernels import Status
from kvplan.errors import UnknownNameError


def test_vllm_custom_all_reduce_rows() -> None:
    """8 GPUs, 8192 elements (16 KiB; one decode token of an 8192-wide model): graph
    0.005310 ms; 8,388,608 elements (16 MiB) graph 0.092383 ms. Eager measured 0.022989 ms at
    8192 but 0.022487 at 32768 elements: the monotone pass (a smaller message is never
    slower) gives 8192 the larger message's time."""
    answer = K.all_reduce("H100", [16384, 16 * 2**20], 8)
    assert np.allclose(answer.seconds * 1e3, [0.005310, 0.092383], rtol=1e-4)
    assert answer.worst is Status.MEASURED
    assert answer.source.engine == "vllm" and answer.source.version == "0.24.0"
    eager = K.all_reduce_s("H100", 16384, 8, graph=False)
    assert float(eager) * 1e3 == pytest.approx(0.022487, rel=1e-4)


def test_nccl_rows() -> None:
    """8 GPUs, 8,388,608 fp16 elements: all_gather 0.06886, reduce_scatter 0.06967,
    alltoall 0.07566, all_reduce 0.12191 ms (NCCL 2.29.2)."""
    got = [float(K.nccl("H100", op, 16 * 2**20, 8).seconds) * 1e3
           for op in ("all_gather", "reduce_scatter", "alltoall", "all_reduce")]
    assert np.allclose(got, [0.06886, 0.06967, 0.07566, 0.12191], rtol=1e-4)
    assert K.all_gather("H100", 16 * 2**20, 8).source.engine == "nccl"
    with pytest.raises(UnknownNameError):
        K.nccl("H100", "broadcast", 1024, 8)


def test_one_gpu_costs_nothing() -> None:
    answer = K.all_reduce("H100", [1024, 2048], 1)
    assert np.array_equal(answer.seconds, [0.0, 0.0]) and answer.notes


def test_unmeasured_gpu_count_scales_by_ring_traffic_and_is_flagged() -> None:
    """GB200's tables stop at 4 GPUs (one compute tray): 8 is scaled by (7/8)/(3/4) (at
    1 MiB B200's measured 8-GPU time is no faster; where it is, that: test_gb200)."""
    four = float(K.all_reduce_s("GB200", 2**20, 4))
    eight = K.all_reduce("GB200", 2**20, 8)
    assert float(eight.seconds) == pytest.approx(four * (7 / 8) / (3 / 4), rel=1e-12)
    assert eight.worst is Status.EXTRAPOLATED and "8 GPUs not measured" in eight.notes[0]


@pytest.mark.parametrize("gpu", ["A100", "H100", "H200", "B200", "GB200", "L40S"])
def test_bigger_messages_never_faster(gpu: str) -> None:
    size = np.unique(np.geomspace(2, 2**31, 2000).astype(np.int64))
    for count in (2, 4, 8):
        assert np.all(np.diff(K.all_reduce_s(gpu, size, count)) >= 0)
        assert np.all(np.diff(K.nccl(gpu, "all_gather", size, count).seconds) >= 0)


def test_beyond_the_largest_message_is_linear_and_flagged() -> None:
    edge = float(K.all_reduce_s("H100", 2**30, 8))  # 536,870,912 elements, the last row
    beyond = K.all_reduce("H100", 2**31, 8)
    assert beyond.worst is Status.EXTRAPOLATED
    assert float(beyond.seconds) == pytest.approx(2 * edge, rel=1e-9)
