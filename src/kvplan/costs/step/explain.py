"""Where a step's milliseconds go: one prefill step and one decode step of a static batch,
op by op from the measured kernel tables, and which tables (GPU, engine, version) the answer
stands on (``kvplan latency --explain``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.quantized import basis_note, quantized_gemm_s
from kvplan.costs.step.batch import idle_timer
from kvplan.costs.step.coefficients import at
from kvplan.costs.step.cudagraph import padded_tokens
from kvplan.costs.step.ops import StageOps
from kvplan.costs.step.records import StepAggregates
from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import (
    _DECODE_B,
    _DECODE_L,
    MeasuredStep,
    moe_dtype,
    moe_times,
    op_dtype,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOps:
    """One step's kernels, op by op, plus what the kernels do not cover."""

    phase: str
    tokens: int
    requests: int
    context_tokens: int
    ops: tuple[OpTime, ...]
    step_s: float
    """The whole step as the model prices it (kernels + all-reduces + overheads)."""

    @property
    def kernels_s(self) -> float:
        return sum(o.seconds for o in self.ops)


def kernel_basis(timer: StepCostModel) -> str:
    """One line: the measured tables (or the roofline and its donor) the answer stands on."""
    ms = timer.measured
    if ms is not None:
        from kvplan.costs import kernels as kn

        src = kn.gemm(ms.gpu, 1, 4096, 4096, timer.gemm_dtype).source
        ar = kn.all_reduce(src.gpu, 1024, 2).source if timer.constants.tp > 1 else src
        other = (f"its all-reduce {ar.engine} {ar.version}; "  # L40S: vLLM 0.22.0's run
                 if (ar.engine, ar.version) != (src.engine, src.version) else "")
        line = (f"kernels measured on {src.gpu} ({src.engine} {src.version}; {other}"
                "aiconfigurator-core tables, Apache-2.0)")
        if (ref := kn.capped_at(src.gpu)) is not None:
            line += f"; its cells slower than {ref}'s capped at {ref}'s (the same die)"
        if src.gpu.lower() != ms.gpu.lower():
            line += (f"; {ms.gpu} is the same die: its collectives at its own scale-up "
                     f"link ({kn.link_scale(ms.gpu):.3g}x slower)")
        if _fp8_moe_capped(timer):
            line += ("; its per-tensor fp8 experts are capped at its block-fp8 / bf16 experts "
                     "where those are faster")
        line += _marlin_note(timer, src.gpu) + _gdn_note(timer, src.gpu) + basis_note(
            src.gpu, timer.gemm_dtype, max((g.weight_bytes for g in timer.ops.gemms), default=0)
            if timer.ops is not None else 0)
        if timer.constants.compute_precision == "float16":
            line += "; float16 priced on its bfloat16 kernels (the same tensor-core rate)"
        mla = timer.ops is not None and any(a.kind == "mla" for a in timer.ops.attention)
        if mla and (donor := kn.mla_donor(ms.gpu)) is not None:
            line += (f"; no MLA table on {ms.gpu}: its MLA blocks are {donor}'s x the two "
                     "GPUs' measured attention ratio")
        return line
    if timer.donor is not None and timer.constants.compute_precision == "float32":
        return _fp32_basis(timer)
    if timer.donor is not None:
        above = () if timer._floor is None else timer._floor[0]
        names, who = " or ".join(f"{g}'s" for g in above), "it" if len(above) == 1 else "each"
        floor = "" if not above else (
            f"; never priced faster than {names} measured step ({who} beats "
            f"{timer.hardware.id} on every datasheet figure)")
        return (f"roofline: {timer.hardware.id} has no measured kernel tables; compute "
                f"{timer.profile.compute_eff:.0%}, bandwidth {timer.profile.bandwidth_eff:.0%} "
                f"of peak: the rates of {timer.donor}'s measured kernels{_own_cap(timer)}"
                f"{floor}")
    return "roofline under the profile's efficiencies"


def _fp32_basis(timer: StepCostModel) -> str:
    """--dtype float32: IEEE fp32 GEMMs at the GPU's FP32 rate, which no table measures."""
    hw, p = timer.hardware, timer.profile
    above = () if timer._floor is None else timer._floor[0]
    floor = (f"; never priced faster than {' or '.join(above)}'s measured bf16 step (the same "
             "ops at half the bytes)") if above else ""
    return (f"roofline: --dtype float32 runs IEEE fp32 GEMMs (PyTorch's default: no TF32) at "
            f"{hw.id}'s FP32 rate, {hw.peak_flops_for('float32') / 1e12:,.1f} TFLOP/s, and "
            f"reads 4 B a weight; no kernel table measures fp32: compute "
            f"{p.compute_eff:.0%}, bandwidth {p.bandwidth_eff:.0%} of peak, the rates of "
            f"{timer.donor}'s measured bf16 kernels{_own_cap(timer)}{floor}")


def _marlin_note(timer: StepCostModel, gpu: str) -> str:
    """``--mxfp4-moe-backend marlin``: where the experts' Marlin time comes from."""
    from kvplan.costs.kernels.moe import MARLIN, has_dtype

    if timer.ops is None or timer.ops.moe is None or timer.ops.moe.dtype != MARLIN:
        return ""
    if not has_dtype(gpu, MARLIN):
        return f"; MXFP4 experts on Marlin: not measured on {gpu}, its default w4a16 kernel"
    return ("; MXFP4 experts on Marlin (as vLLM < 0.12 ran them on Hopper): the measured "
            "Marlin rows (Kimi-K3's shape) scaled to the model's")


def _gdn_note(timer: StepCostModel, gpu: str) -> str:
    """Gated DeltaNet layers: from their measured kernels, or from FLOPs and bytes."""
    op = timer.ops.gdn if timer.ops is not None else None
    if op is None or timer.measured is None:
        return ""
    if timer.measured.gdn is None:
        return (f"; no GDN table at {op.key_heads} key / {op.value_heads} value heads on "
                f"{gpu}: its GDN layers priced as state FLOPs and bytes")
    return ("; GDN layers from the measured GDN kernels (Qwen3.5's fp32 recurrent state: "
            "decode scaled to this deployment's state bytes)")


def _own_cap(timer: StepCostModel) -> str:
    """Where the GPU's own measured best rates (gpus.json ``achievable``) bound the donor's."""
    from kvplan.costs import kernels as kn

    hw = timer.hardware
    capped = kn.nearest_measured_gpu(hw, timer.constants.compute_precision).capped
    if not capped:
        return ""
    rate = hw.achievable.get(timer.constants.compute_precision) if "compute" in capped else None
    parts = ([f"{rate / 1e12:,.0f} TFLOP/s {timer.constants.compute_precision}"] if rate
             else []) + ([f"{hw.achievable['mem_bw'] / 1e12:.2f} TB/s"]
                         if "memory" in capped else [])
    return f", capped at the best measured on {hw.id} itself ({', '.join(parts)})"


def _fp8_moe_capped(timer: StepCostModel) -> bool:
    """Whether the step's MoE experts run per-tensor fp8 whose measured time the lookup capped
    (``kernels.moe``), read at one, 64 and 8,192 tokens."""
    from kvplan.costs import kernels as kn
    from kvplan.costs.step.tables import moe_dtype

    e = timer.ops.moe if timer.ops is not None else None
    if e is None or timer.measured is None or (e.dtype or moe_dtype(timer.gemm_dtype)) != "fp8":
        return False
    t = kn.moe(timer.measured.gpu, np.array([1, 64, 8192]), hidden=e.hidden, inter=e.inter,
               num_experts=e.experts, topk=e.topk, dtype="fp8", tp=e.tp, ep=e.ep)
    return any("per-tensor fp8 MoE capped" in n for n in t.notes)


def explain_steps(timer: StepCostModel, batch: int, prompt: int,
                  chunk: int | None) -> tuple[StepOps, ...]:
    """The first prefill step and the first decode step of ``batch`` requests of ``prompt``
    tokens (prefill chunked at ``chunk`` tokens; None: one step), op by op."""
    import numpy as np

    if timer.measured is None or timer.ops is None:
        return ()
    total = batch * prompt
    first = min(total, chunk or total)
    full, rest = divmod(first, prompt)
    new = [prompt] * full + ([rest] if rest else [])
    # the batch's first step starts on an idle engine: nothing hides its host work (async)
    idle = idle_timer(timer)
    pre = _step(idle, "prefill", np.array(new), np.zeros(len(new), dtype=np.int64))
    dec = _step(timer, "decode", np.ones(batch, dtype=np.int64),
                np.full(batch, prompt, dtype=np.int64))
    return pre, dec


def _step(timer: StepCostModel, phase: str, new: object, ctx: object) -> StepOps:
    import numpy as np

    n, c = np.asarray(new, dtype=np.int64), np.asarray(ctx, dtype=np.int64)
    step_s = timer.step_time_s(n, c)  # first: grows the token tables to this step's size
    assert timer.measured is not None and timer.ops is not None
    gdn = timer.measured.gdn
    ratio = gdn.state_ratio(timer.constants.state_bytes_per_request) if gdn else 1.0
    ops = op_times(timer.ops, timer.measured, timer.gemm_dtype, timer.aggregates(n, c), ratio)
    ops += _other_stages(timer, n, c, ops)
    return StepOps(phase=phase, tokens=int(n.sum()), requests=len(n),
                   context_tokens=int(c.sum()), ops=ops, step_s=step_s)


def _other_stages(timer: StepCostModel, n: object, c: object,
                  ops: tuple[OpTime, ...]) -> tuple[OpTime, ...]:
    """Under pipeline parallelism the step passes pp stages; the rows above are the fullest
    one (with the whole lm_head, which the last stage runs once), so one more row holds the
    other pp - 1 stages and the hand-offs between them: the breakdown's ``pipeline_s`` less
    the lm_head share it carries ((pp - 1) / pp of the head)."""
    pp = timer.constants.pp
    if pp <= 1:
        return ()
    pipe = timer.cost(n, c).seconds.pipeline_s  # type: ignore[arg-type]
    head = sum(o.seconds for o in ops if o.op in _HEAD) * (pp - 1) / pp
    layers = (pp - 1) * (timer.ops.layers if timer.ops is not None else 0)
    return (OpTime(op="other pipeline stages", count=layers,
                   shape=f"{pp - 1} more stage(s) like this one + the hand-offs",
                   seconds=pipe - head),)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTime:
    """One op family's seconds in one step (summed over its ``count`` layers)."""

    op: str
    count: int
    shape: str
    seconds: float
    extrapolated: bool = False
    """Read past the measured range (the roofline from the nearest measured edge,
    docs/silicon.md): the table's GEMM / MoE / all-reduce lookup at this shape, or attention
    past its line's measured grid (more than 256 requests or 32,768 cached tokens each) or
    past the prompt lengths its context table measures (a longer prefill chunk)."""


def op_times(ops: StageOps, ms: MeasuredStep, gemm_dtype: str,
             agg: StepAggregates, state_ratio: float = 1.0) -> tuple[OpTime, ...]:
    """Where one step's kernel milliseconds go, op by op (``kvplan latency --explain``), for
    the step whose sums are ``agg`` (one step: Python ints); ``state_ratio``: the
    deployment's GDN state bytes over the measured ones (``gdn_rates``)."""
    gpu, out = ms.gpu, []
    tokens, requests = int(agg.tokens), int(agg.requests)
    m = padded_tokens(np.array([max(1, tokens)]), ops.cudagraph_max_tokens)
    for op in ops.gemms:
        if op.per == "prefill_context":
            continue
        rows = requests if op.per == "request" else int(m[0])
        dtype = op_dtype(op, gemm_dtype)
        t = float(quantized_gemm_s(gpu, np.array([max(1, rows)]), op.n, op.k, dtype,
                                   op.weight_bytes)[0])
        out.append(OpTime(op=op.name, count=op.count, shape=f"m={rows} n={op.n} k={op.k}",
                          seconds=op.count * t,
                          extrapolated=_past(kn.gemm(gpu, max(1, rows), op.n, op.k, dtype))))
        if op.per == "request" and ops.tp > 1:
            out.append(_gather_row(gpu, max(1, rows), op.n, ops.tp))
    if ops.moe is not None:
        e = ops.moe
        t = float(moe_times(gpu, e, np.array([max(1, tokens)]), gemm_dtype)[0])  # real rows
        where = f" ep={e.ep} x{e.imbalance:.2f}" if e.ep > 1 else ""
        out.append(OpTime(op="moe_experts", count=e.count,
                          shape=f"tokens={tokens * e.token_scale} E={e.experts} top-{e.topk} "
                                f"inter={e.inter}/{e.tp}{where}",
                          seconds=e.count * t, extrapolated=_past(kn.moe(
                              gpu, max(1, tokens) * e.token_scale, hidden=e.hidden,
                              inter=e.inter, num_experts=e.experts, topk=e.topk,
                              dtype=e.dtype or moe_dtype(gemm_dtype), tp=e.tp,
                              ep=1 if e.dispatched else e.ep))))
    out += _attention_rows(ops, ms, agg, state_ratio)
    if ms.allreduce_s is not None:  # past TABLE_CAP tokens: the line the step extends
        out += _comm_rows(ops, ms, tokens, sum(o.seconds for o in out
                                               if not o.op.startswith("attention")
                                               and o.op not in _HEAD))
    return tuple(out)


def _attention_rows(ops: StageOps, ms: MeasuredStep, agg: StepAggregates,
                    state_ratio: float) -> list[OpTime]:
    """One row per attention kind, each over its own layers' pairs and context (a sliding
    layer attends at most its window), and one for measured GDN layers. The step prices all
    sequence mixing as one roofline, max(all scoring, all KV / state reads): each row takes
    the side that binds there, so the rows add up to the step's mixing (KV writes and
    unmeasured state stay in the rest)."""
    rows: list[tuple[str, int, str, float, float, float]] = []
    for a in ops.attention:
        r = ms.full if a.kind != "sliding" else ms.sliding
        if r is None:
            continue
        if a.kind == "sliding":
            pairs, ctx = agg.sliding_pairs, agg.sliding_context
        elif a.kind == "mla":
            pairs, ctx = agg.prefill_pairs, agg.full_context
        else:
            pairs, ctx = agg.full_pairs, agg.full_context
        work = r.per_pair_s * pairs + (ms.mla_context_s * agg.prefill_context
                                       if a.kind == "mla" else 0.0)
        shape = (f"{a.heads} heads x {a.head_dim} over one {a.latent}-wide latent" if a.latent
                 else f"{a.heads} heads / {a.kv_heads} kv x {a.head_dim}")
        rows.append((f"attention_{a.kind}", a.count, shape, r.per_step_s, work,
                     r.per_context_s * ctx + r.per_request_s * agg.requests))
    g, rates = ops.gdn, ms.gdn
    if g is not None and rates is not None:
        seq = ms.gdn_seq_s
        work = rates.per_token_s * agg.tokens
        if seq is not None:  # no faster than the longest prompt chunk alone
            work = max(work, float(seq[min(int(agg.prefill_longest), len(seq) - 1)]))
        rows.append(("gdn", g.count, f"{g.key_heads} key / {g.value_heads} value heads x "
                     f"{g.key_dim}", rates.per_step_s, work,
                     rates.per_request_s * state_ratio * agg.requests))
    compute_bound = sum(r[4] for r in rows) >= sum(r[5] for r in rows)
    past = agg.requests > _DECODE_B[-1] or agg.full_context > _DECODE_L[-1] * agg.requests
    return [OpTime(op=name, count=count, shape=shape,
                   seconds=float(step + (work if compute_bound else mem)),
                   extrapolated=name.startswith("attention") and bool(
                       past or agg.prefill_longest > _measured_isl(ms.gpu, name)))
            for name, count, shape, step, work, mem in rows]


def _measured_isl(gpu: str, row: str) -> float:
    """The longest prompt the GPU's context-attention table measures (MLA: its MLA prefill
    table, or its donor's): a longer prefill chunk is priced at the per-pair rate of a
    shorter one, past the measured range."""
    from kvplan.costs.kernels.tables import require

    family = "mla_ctx" if row == "attention_mla" else "attn_ctx"
    donor = kn.mla_donor(gpu) if family == "mla_ctx" else None
    return float(require(donor or gpu, family).axes[1][-1])


def _comm_rows(ops: StageOps, ms: MeasuredStep, tokens: int, compute_s: float
               ) -> list[OpTime]:
    """The all-reduce and exchange rows; under DBO (``ops.overlap``, a step above its
    threshold) a last row: the overlapped GEMMs + experts + exchange less their serial sum
    (``compute_s``: the GEMM and expert rows)."""
    assert ms.allreduce_s is not None
    x, one, out = ops.exchange, np.array([tokens]), []
    moved = 0.0 if x is None else float(x.seconds(one)[0])
    o = ops.overlap
    split = o is not None and tokens > max(o.threshold, 1)
    if ops.allreduces:  # inside the CUDA graph: the padded token count, as the GEMMs
        m = int(padded_tokens(np.array([max(1, tokens)]), ops.cudagraph_max_tokens)[0])
        size = m * ops.allreduce_bytes_per_token
        past = ops.allreduce_link is None and _past(kn.all_reduce(ms.gpu, size, ops.tp))
        out.append(OpTime(op="all_reduce", count=ops.allreduces,
                          shape=f"{size} B x {ops.tp} GPUs", extrapolated=past,
                          seconds=float(at(ms.allreduce_s, tokens)) - (0.0 if split else moved)))
    if x is not None:
        out.append(OpTime(op=f"moe_dispatch_combine ({x.backend})", count=2 * x.layers,
                          shape=f"{int(x.bytes_per_layer(one, dispatch=True)[0])} + "
                                f"{int(x.bytes_per_layer(one)[0])} B, dp {x.dp} ep {x.ep}",
                          seconds=moved))
    if split and x is not None:
        hidden = float(at(ms.dense_s, tokens)) - compute_s - moved
        out.append(OpTime(op="dual_batch_overlap", count=x.layers,
                          shape=f"2 micro-batches of {-(-tokens // 2)} + {tokens // 2} tokens",
                          seconds=hidden))
    return out


_HEAD = ("lm_head", "logits_gather")
"""The rows the last stage runs once a step (the head and its gather)."""


def _gather_row(gpu: str, rows: int, n: int, tp: int) -> OpTime:
    """The lm_head's logits all-gather under TP (``tables.logits_gather_s``)."""
    size = rows * n * tp * 2
    return OpTime(op="logits_gather", count=1, shape=f"{size} B x {tp} GPUs",
                  seconds=float(kn.logits_gather_s(gpu, np.array([rows]), n, tp)[0]),
                  extrapolated=_past(kn.all_gather(gpu, size, tp)))


def _past(t: kn.OpTime) -> bool:
    """Whether a kernel lookup stands past the measured range (``Status.EXTRAPOLATED``)."""
    return bool(np.any(t.status >= kn.Status.EXTRAPOLATED))
