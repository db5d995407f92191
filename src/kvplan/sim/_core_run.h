/* kvplan.sim._core: runs of pure decode steps, stepped at O(1) each; included by _core.c
 * only, after _core_pool.h and before _core_sched.h. */

/* A decode run: steps in which every running request computes its one next token and
 * nothing else can happen - no request is due to arrive, none waiting can be admitted, none
 * needs a block the pool lacks (so none is preempted), none registers a prefix block, and
 * none finishes before the run's last step (where the first ones may: finish_all, as the
 * general step calls it). Each such step is what general_step would do, to the bit: the
 * same sums (tokens = requests = n, context = C0 + j n, pairs = context + n, and under a
 * window the clipped sums; integers, so their order does not matter), the same step_time
 * call, the same seven columns. What general_step does request by request (one token, one
 * emission, blocks opened every block_size tokens and, past a sliding window, given back)
 * is done once at the run's end: one take of the blocks taken, then one give of the blocks
 * given back. take consumes the free queue from its head and give_anon appends to its tail,
 * so while the run's takes stay below the blocks free at its start they never reach what
 * was given back within it, and the queue ends as the interleaved calls leave it. Full,
 * state and up to RUN_SLIDE sliding groups; aggregated serving or a disaggregated fleet's
 * decode instance (whose transfers ending are events too: next_event); anything else takes
 * the general step. */
#define RUN_MAX 256
#define RUN_SLIDE 2

static void finish_all(Sim *m, i64 nfin, double end); /* _core_sched.h */

/* The groups as a run counts them: full and sliding groups' weights (a request opens that
 * many pool blocks every block_size tokens) and bytes per token, state bytes per request,
 * the sliding groups (window, weight, bytes per token). */
typedef struct {
    i64 wopen, bpt_full, state, ns, win[RUN_SLIDE], wt[RUN_SLIDE], bpt[RUN_SLIDE];
} RunGroups;

static int run_groups(const Sim *m, RunGroups *q) {
    memset(q, 0, sizeof *q);
    for (i64 g = 0; g < m->ng; g++) {
        if (m->gkind[g] == G_STATE) {
            q->state += m->gstate[g];
            continue;
        }
        q->wopen += m->gweight[g];
        if (m->gkind[g] == G_FULL) {
            q->bpt_full += m->gbpt[g];
        } else {
            if (q->ns == RUN_SLIDE) return 0;
            q->win[q->ns] = m->gwin[g], q->wt[q->ns] = m->gweight[g];
            q->bpt[q->ns++] = m->gbpt[g];
        }
    }
    return q->wopen > 0;
}

/* the run's length bound from its requests (its last step may finish some), 0 if one of
 * them is not plainly decoding; *c0 the sum of their computed tokens */
static i64 run_bound(const Sim *m, i64 k, i64 *c0) {
    *c0 = 0;
    for (i64 i = 0; i < m->nrun; i++) {
        i64 r = m->run[i], c = m->computed[r], g = m->generated[r];
        if (g < 1 || c < 1 || c != m->prompt[r] + g - 1 || m->last_emit[r] != m->step - 1
            || m->held[r] != blocks_of(m, c, c - 1)
            || (m->caching && m->reg_next[r] < n_shared(m, r)))
            return 0;
        if (m->output[r] - g < k) k = m->output[r] - g; /* the first finish ends the run */
        *c0 += c;
    }
    return k;
}

/* out[j] = sum over the running requests of min(c + off + j, w), j < k (the clipped sums) */
static void clip_sums(const Sim *m, i64 k, i64 off, i64 w, i64 *out) {
    i64 reach[RUN_MAX], below = 0, s = 0;
    memset(reach, 0, sizeof(i64) * (size_t)k);
    for (i64 i = 0; i < m->nrun; i++) {
        i64 t = m->computed[m->run[i]] + off, a = w - t; /* below w for steps j < a */
        s += t < w ? t : w;
        if (a > 0) below++;
        if (a > 0 && a < k) reach[a]++;
    }
    for (i64 j = 0; j < k; j++) {
        below -= reach[j];
        out[j] = s;
        s += below;
    }
}

/* step j's blocks taken (tk) and given back (gv): each request, at c + j computed, opens
 * wopen blocks when c + j = 0 mod B and gives a sliding group's weight back when the
 * window's first token c + j - W + 1 > 0 passes a multiple of B (general_step's grow on
 * blocks_of's change, the net of both per request) */
static void block_moves(const Sim *m, const RunGroups *q, i64 k, i64 *tk, i64 *gv) {
    memset(tk, 0, sizeof(i64) * (size_t)k);
    memset(gv, 0, sizeof(i64) * (size_t)k);
    for (i64 i = 0; i < m->nrun; i++) {
        i64 c = m->computed[m->run[i]], first[1 + RUN_SLIDE], nf = 0;
        first[nf++] = bceil(m, c) * m->bs - c;
        for (i64 s = 0; s < q->ns; s++) { /* j >= W - c (x > 0), x = 0 mod B */
            i64 lo = q->win[s] - c > 0 ? q->win[s] - c : 0;
            first[nf++] = lo + (m->bs - (c + lo - q->win[s] + 1) % m->bs) % m->bs;
        }
        for (i64 e = 0; e < nf; e++) {
            /* each step once per request: the events of one residue mod B together, from
             * the earliest of them (two windows W1 > W2 with W1 = W2 mod B: W2's start) */
            int dup = 0;
            i64 start = first[e];
            for (i64 d = 0; d < nf; d++) {
                if (d == e || (first[d] - first[e]) % m->bs != 0) continue;
                dup |= d < e;
                if (first[d] < start) start = first[d];
            }
            if (dup) continue;
            for (i64 j = start; j < k; j += m->bs) {
                i64 net = j >= first[0] && (j - first[0]) % m->bs == 0 ? q->wopen : 0;
                for (i64 s = 0; s < q->ns; s++)
                    if (j >= first[1 + s] && (j - first[1 + s]) % m->bs == 0) net -= q->wt[s];
                if (net > 0) tk[j] += net;
                else gv[j] -= net;
            }
        }
    }
}

/* the state a run may start from: every running request decodes (run_bound), nothing can
 * be admitted (waiting; on a decode instance also transferred and pending requests) */
static int run_may_start(const Sim *m, RunGroups *q) {
    i64 n = m->nrun;
    if (m->mode == 1 || !run_groups(m, q) || n == 0 || n > m->budget
        || (m->wn && n < m->max_seqs && m->budget > n))
        return 0;
    return !(m->mode == 2 && n < m->max_seqs && (m->rn || (m->pn && m->wn == 0)));
}

/* The run's clipped sums, each over the running requests at step j: the priced window's
 * context (min(c + j, W)) and pairs (min(c + j + 1, W)), each sliding group's tokens held
 * (min(c + j + 1, W_s)). */
typedef struct { i64 sctx[RUN_MAX], spairs[RUN_MAX], held[RUN_SLIDE][RUN_MAX]; } RunSums;

static void run_sums(const Sim *m, const RunGroups *q, i64 k, RunSums *u) {
    if (m->f.win) {
        clip_sums(m, k, 0, m->f.win, u->sctx);
        clip_sums(m, k, 1, m->f.win, u->spairs);
    }
    for (i64 s = 0; s < q->ns; s++) clip_sums(m, k, 1, q->win[s], u->held[s]);
}

/* step j of the run: its time from the closed-form sums, its seven columns */
static void run_step(Sim *m, const RunGroups *q, const RunSums *u, i64 c0, i64 j,
                     i64 used) {
    i64 n = m->nrun, ctx = c0 + j * n, logical = q->bpt_full * (ctx + n) + q->state * n;
    Sums sums = {n, n, ctx, ctx + n, 0, 0, 0, 0, 0};
    if (m->f.win) sums.sctx = u->sctx[j], sums.spairs = u->spairs[j];
    for (i64 s = 0; s < q->ns; s++) logical += q->bpt[s] * u->held[s][j];
    double start = m->clock;
    double end = start + step_time(&m->f, &sums, m->idle);
    m->idle = 0;
    if (PUSH(m->st, double, start) || PUSH(m->en, double, end) || PUSH(m->used, i64, used)
        || PUSH(m->logical, i64, logical) || PUSH(m->nrun_col, i64, n)
        || PUSH(m->nwait_col, i64, m->wn) || PUSH(m->newtok, i64, n))
        m->oom = 1;
    m->clock = end;
    m->step++;
}

/* after j steps: every request j tokens further, its blocks moved in one take and one give,
 * the first finishers (plan order = running order, as emit gives them) finished */
static void run_close(Sim *m, i64 j, i64 taken, i64 given) {
    i64 n = m->nrun, nfin = 0;
    for (i64 i = 0; i < n; i++) {
        i64 r = m->run[i];
        m->computed[r] += j;
        m->generated[r] += j;
        m->last_emit[r] = m->step - 1;
        m->held[r] = blocks_of(m, m->computed[r], m->computed[r] - 1);
        if (m->generated[r] == m->output[r]) m->p_id[nfin++] = r;
    }
    take(m, taken);
    give_anon(m, given);
    m->decode_blocks += taken;
    m->run_steps += j;
    if (nfin) finish_all(m, nfin, m->clock);
}

/* up to `limit` steps of a decode run; returns how many ran (0: the general step runs) */
static i64 decode_run(Sim *m, i64 limit) {
    RunGroups q;
    RunSums u;
    i64 c0, tk[RUN_MAX], gv[RUN_MAX];
    if (!run_may_start(m, &q)) return 0;
    i64 k = run_bound(m, limit < RUN_MAX ? limit : RUN_MAX, &c0);
    if (k < 2) return 0;
    block_moves(m, &q, k, tk, gv);
    run_sums(m, &q, k, &u);
    /* takes stay within the blocks free at the start (no preemption); with gives, below
     * them (takes never reach a block given back within the run) */
    i64 free0 = m->free - (q.ns > 0), taken = 0, given = 0, j = 0;
    for (; j < k && next_event(m) > m->clock && taken + tk[j] <= free0; j++) {
        taken += tk[j];
        given += gv[j];
        run_step(m, &q, &u, c0, j, m->usable - (m->free - taken + given));
    }
    if (j) run_close(m, j, taken, given);
    return j;
}
