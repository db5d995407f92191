"""Small stand-ins for tests and benchmarks: a linear step timer and an in-memory workload."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from kvplan.costs.step.batch import AggregateForm

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearTimer:
    """step = base_s + per_token_s * sum(new) + per_context_s * sum(context) (hand-checkable).

    decode_run_s evaluates the same expression on the same integers, so it equals step-by-step
    step_time_s calls bit for bit.
    """

    base_s: float = 1.0
    per_token_s: float = 0.0
    per_context_s: float = 0.0

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        return self._t(int(new_tokens.sum()), int(context_tokens.sum()))

    def decode_run_s(self, context_tokens: IntArray, num_steps: int) -> FloatArray:
        n = len(context_tokens)
        c0 = int(context_tokens.sum())
        return np.array([self._t(n, c0 + n * k) for k in range(num_steps)], dtype=np.float64)

    supports_aggregates = True

    def step_time_agg(self, tokens: int, requests: int, context: int, pairs: int,
                      prefill: bool) -> float:
        return self._t(tokens, context)

    def decode_run_agg(self, requests: int, context: int, num_steps: int) -> FloatArray:
        return np.array([self._t(requests, context + requests * k) for k in range(num_steps)],
                        dtype=np.float64)

    def aggregate_form(self, max_tokens: int) -> AggregateForm:
        """_t as the roofline-shaped form: dense = base + per_token * T (the other branch of
        each max is -inf, the zero terms add +0.0), mix = per_context * C: the same bits."""
        t = np.arange(max_tokens + 1, dtype=np.float64)
        never = np.full(max_tokens + 1, -np.inf)
        return AggregateForm(
            max_tokens=max_tokens, gemm=self.base_s + self.per_token_s * t, weights=never,
            state=never, kv_write=np.zeros(max_tokens + 1), allreduce=None, p2p=None,
            lm_per_request=0.0, attn_per_pair=0.0, kv_per_context=self.per_context_s,
            state_per_request=0.0, layer_s=0.0, pp_minus_1=0.0, request_s=0.0,
            overhead_s=(0.0, 0.0))

    def _t(self, new: int, ctx: int) -> float:
        return self.base_s + self.per_token_s * float(new) + self.per_context_s * float(ctx)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipeTimer:
    """``pp`` pipeline stages (hand-checkable): a stage takes stage_s + per_token_s x sum(new),
    the hop between two stages hop_s, the host host_s; a step alone takes
    ``stage + (pp - 1) x (stage + hop) + host``, the step model's shape (roofline._finish)."""

    pp: int = 2
    stage_s: float = 1.0
    per_token_s: float = 0.0
    hop_s: float = 0.0
    host_s: float = 0.0

    @property
    def pipeline_stages(self) -> int:
        return self.pp

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        stage = self.stage_s + self.per_token_s * float(new_tokens.sum())
        return stage + (self.pp - 1) * (stage + self.hop_s) + self.host_s

    def decode_run_s(self, context_tokens: IntArray, num_steps: int) -> FloatArray:
        one = self.step_time_s(np.ones(len(context_tokens), dtype=np.int64), context_tokens)
        return np.full(num_steps, one)

    def aggregate_form(self, max_tokens: int) -> AggregateForm:
        """The hop table, the stage count and the host; the stage tables as a linear timer's
        (the pipelined loop reads only the first three)."""
        form = LinearTimer(base_s=self.stage_s, per_token_s=self.per_token_s).aggregate_form(
            max_tokens)
        return replace(form, p2p=np.full(max_tokens + 1, self.hop_s),
                       pp_minus_1=float(self.pp - 1), overhead_s=(self.host_s, self.host_s))


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrayWorkload:
    """Workload-shaped arrays (the fields ``kvplan.specs.requests.workload.Workload`` has)."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    prefix_hashes: tuple[IntArray, ...] | None = None
    hash_block_tokens: int = 512
    closed_loop_concurrency: int | None = None
    name: str = "arrays"

    def __len__(self) -> int:
        return len(self.arrival_s)


def workload(
    arrivals: list[float], prompts: list[int], outputs: list[int], *,
    concurrency: int | None = None, hashes: list[list[int]] | None = None, hash_tokens: int = 512,
) -> ArrayWorkload:
    """An ArrayWorkload from plain lists."""
    return ArrayWorkload(
        arrival_s=np.asarray(arrivals, dtype=np.float64),
        prompt_tokens=np.asarray(prompts, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        prefix_hashes=None if hashes is None else tuple(np.asarray(h, dtype=np.int64)
                                                        for h in hashes),
        hash_block_tokens=hash_tokens, closed_loop_concurrency=concurrency,
    )


def poisson_workload(n: int, *, rate: float, prompt: tuple[int, int], output: tuple[int, int],
                     seed: int = 0) -> ArrayWorkload:
    """n requests, Poisson arrivals at ``rate``/s, uniform prompt and output lengths."""
    rng = np.random.default_rng(seed)
    return ArrayWorkload(
        arrival_s=np.cumsum(rng.exponential(1.0 / rate, n)),
        prompt_tokens=rng.integers(prompt[0], prompt[1] + 1, n),
        output_tokens=rng.integers(output[0], output[1] + 1, n),
    )
