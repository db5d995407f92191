"""hunt10-why: the words and numbers kvplan uses to explain (plan why / advice, levers,
batch, latency --explain), each pinned by a hand-checkable value."""

from __future__ import annotations

from tests.conftest import run_cli

L70 = "meta-llama/Llama-3.1-70B"


# ---------------- W1: a plan where nothing fits named a duplicate's twin, not the memory
# Llama-3.1-70B on L40S TP1: chunks 512 and 2048 are pruned_memory, the third chunk
# (L40S's default, 2048) is a `duplicate`. The why line quoted the duplicate's reason, "the
# same engine flags as c0001 ...", as if that were why nothing could be served. The weights
# alone are 70.55e9 params x 2 B = 141.1e9 B = 131.45 GiB > 0.9 x 44.53 GiB = 40.08 GiB, and
# the memory check computed the one lever that fits: TP 4 (131.45 / 4 = 32.9 GiB).
def test_nothing_fits_names_the_memory_miss_and_its_computed_lever() -> None:
    r = run_cli("plan", L70, "--gpu", "L40S", "-tp", "1", "--num-prompts", "100",
                "--request-rate", "1", "--slo", "ttft:p99:2000", "--json")
    assert r.code == 1, r.err
    why = r.json()["summary"]["why"]
    assert "the same engine flags" not in why
    assert why.startswith("no configuration in the space fits in memory (no memory left for "
                          "the KV cache on L40S: weights 131.45 GiB")
    assert why.endswith("exceed the requested 40.08 GiB); fits with --tensor-parallel-size 4")
