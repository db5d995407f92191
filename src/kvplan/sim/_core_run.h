/* kvplan.sim._core: runs of pure decode steps, stepped at O(1) each; included by _core.c
 * only, after _core_pool.h and before _core_sched.h. */

/* A decode run: steps in which every running request computes its one next token and
 * nothing else can happen - no request is due to arrive, none waiting can be admitted, none
 * needs a block the pool lacks (so none is preempted), none registers a prefix block, and
 * none finishes before the run's last step (where the first ones may: finish_all, as the
 * general step calls it). Each such step is what general_step would do, to the bit: the same sums (tokens =
 * requests = n, context = C0 + j n, pairs = context + n; integers, so their order does not
 * matter), the same step_time call, the same seven columns; what general_step does request
 * by request (one token, one emission, a block every block_size tokens) is done once at the
 * run's end, and the pool's takes are one take of their sum (take consumes the free queue in
 * order, and nothing is given back within the run). Full-attention and state groups (no
 * sliding window: its blocks are given back as it moves), no priced window; aggregated serving or a disaggregated fleet's decode instance (whose
 * transfers ending are events too: next_event); anything else takes the general step. */
#define RUN_MAX 256

static void finish_all(Sim *m, i64 nfin, double end); /* _core_sched.h */

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

/* the groups' weight of full-attention blocks (a request opens that many pool blocks each
 * block_size tokens) and bytes per token over them, and the state groups' bytes per
 * request; 0 if a sliding group is there (its blocks are given back as the window moves) */
static i64 run_groups(const Sim *m, i64 *bpt, i64 *state) {
    i64 w = 0;
    *bpt = *state = 0;
    for (i64 g = 0; g < m->ng; g++) {
        if (m->gkind[g] == G_SLIDING) return 0;
        if (m->gkind[g] == G_STATE) {
            *state += m->gstate[g];
        } else {
            w += m->gweight[g];
            *bpt += m->gbpt[g];
        }
    }
    return w;
}

/* up to `limit` steps of a decode run; returns how many ran (0: the general step runs) */
static i64 decode_run(Sim *m, i64 limit) {
    i64 n = m->nrun, c0, cnt[RUN_MAX], bpt, state;
    i64 wfull = run_groups(m, &bpt, &state);
    if (m->mode == 1 || wfull == 0 || m->f.win
        || n == 0 || n > m->budget || (m->wn && n < m->max_seqs && m->budget > n)
        || (m->mode == 2 && n < m->max_seqs && (m->rn || (m->pn && m->wn == 0))))
        return 0; /* a decode instance: no transferred request may start, none be admitted */
    i64 k = run_bound(m, limit < RUN_MAX ? limit : RUN_MAX, &c0);
    if (k < 2) return 0;
    memset(cnt, 0, sizeof(i64) * (size_t)k);
    for (i64 i = 0; i < n; i++) { /* step j: wfull blocks for each request at c0 + j = 0 mod B */
        i64 c = m->computed[m->run[i]];
        for (i64 j = bceil(m, c) * m->bs - c; j < k; j += m->bs) cnt[j] += wfull;
    }
    i64 free0 = m->free, taken = 0, j = 0;
    for (; j < k && next_event(m) > m->clock && taken + cnt[j] <= free0; j++) {
        taken += cnt[j];
        i64 ctx = c0 + j * n;
        Sums q = {n, n, ctx, ctx + n, 0, 0, 0, 0, 0};
        double start = m->clock;
        double end = start + step_time(&m->f, &q);
        if (PUSH(m->st, double, start) || PUSH(m->en, double, end)
            || PUSH(m->used, i64, m->usable - (free0 - taken))
            || PUSH(m->logical, i64, bpt * (ctx + n) + state * n) || PUSH(m->nrun_col, i64, n)
            || PUSH(m->nwait_col, i64, m->wn) || PUSH(m->newtok, i64, n))
            m->oom = 1;
        m->clock = end;
        m->step++;
    }
    for (i64 i = 0; j && i < n; i++) {
        i64 r = m->run[i];
        m->computed[r] += j;
        m->generated[r] += j;
        m->last_emit[r] = m->step - 1;
        m->held[r] = blocks_of(m, m->computed[r], m->computed[r] - 1);
    }
    take(m, taken);
    m->decode_blocks += taken;
    m->run_steps += j;
    i64 nfin = 0;
    for (i64 i = 0; j && i < n; i++) /* finishers in plan order (= running order), as emit */
        if (m->generated[m->run[i]] == m->output[m->run[i]]) m->p_id[nfin++] = m->run[i];
    if (nfin) finish_all(m, nfin, m->clock);
    return j;
}
