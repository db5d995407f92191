"""Physics the MoE tables must not break: per-tensor fp8 experts are never priced slower than
the same GPU's block-scaled fp8 or bf16 experts where fp8 tensor cores exist. The measured
per-tensor rows (ModelOpt's FlashInfer CUTLASS path) were 1.2-3.7x slower than bf16 on H100
and H200 at every catalog MoE shape: `-q fp8` made a Hopper MoE slower, and a plan never took
the lever."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn

SHAPES = {"Qwen3-30B-A3B": (2048, 768, 128, 8), "Qwen3-235B-A22B": (4096, 1536, 128, 8),
          "Mixtral-8x7B": (4096, 14336, 8, 2), "Qwen3-Next-80B": (2048, 512, 512, 10),
          "DeepSeek-V3": (7168, 2048, 256, 8)}
TOKENS = np.array([1, 2, 16, 64, 256, 1024, 4096, 8192, 16384])


@pytest.mark.parametrize("gpu", ["H100-SXM-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200"])
@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("tp", [1, 2, 8])
def test_per_tensor_fp8_is_never_slower_than_block_fp8_or_bf16(gpu: str, name: str,
                                                                tp: int) -> None:
    hidden, inter, experts, topk = SHAPES[name]
    kw = dict(hidden=hidden, inter=inter, num_experts=experts, topk=topk, tp=tp)
    fp8 = kn.moe_s(gpu, TOKENS, dtype="fp8", **kw)
    assert np.all(fp8 <= kn.moe_s(gpu, TOKENS, dtype="fp8_block", **kw))
    assert np.all(fp8 <= kn.moe_s(gpu, TOKENS, dtype="bfloat16", **kw))


def test_the_cap_says_so_where_it_binds() -> None:
    """Qwen3-Next's 64-token decode on H100 at TP2: the per-tensor row read 1.469 ms; the
    block-scaled row 0.304 ms is what it is priced at, and the answer says why."""
    kw = dict(hidden=2048, inter=512, num_experts=512, topk=10, tp=2)
    t = kn.moe("H100-SXM-80GB", np.array([64]), dtype="fp8", **kw)
    block = kn.moe_s("H100-SXM-80GB", np.array([64]), dtype="fp8_block", **kw)
    assert t.seconds[0] == block[0]
    assert t.seconds[0] < 0.5e-3
    assert any("per-tensor fp8 MoE capped" in n for n in t.notes)


def test_no_cap_where_the_measured_kernel_is_faster() -> None:
    """B200's per-tensor fp8 experts are measured faster than bf16: read as measured."""
    kw = dict(hidden=4096, inter=1536, num_experts=128, topk=8, tp=4)
    t = kn.moe("B200-SXM-180GB", np.array([64]), dtype="fp8", **kw)
    assert not any("capped" in n for n in t.notes)


@pytest.mark.parametrize(("gpu", "capped"), [("H100", True), ("B200", False)])
def test_the_answer_says_the_cap_binds(gpu: str, capped: bool) -> None:
    """`latency -q fp8` on an MoE names the cap in the line of tables it stands on."""
    from tests.conftest import run_cli

    r = run_cli("latency", "Qwen/Qwen3-30B-A3B", "--gpu", gpu, "-q", "fp8", "--prompt", "100",
                "--output", "4", "--json")
    assert r.code == 0, r.err
    said = "per-tensor fp8 experts are capped" in r.json()["kernels"]
    assert said is capped
