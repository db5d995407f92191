/* kvplan.sim._core: the block pool (blocks.py) and per-request bookkeeping (state.py,
 * Scheduler.free/preempt/register); included by _core.c only. */

/* ------------------------------------------------------------ block pool (blocks.py) */

static i64 q_len(const Sim *m) { return m->q.n - m->qh; }
static i64 q_at(const Sim *m, i64 i) { return AT(m->q, i64, m->qh + i); }

static void q_popleft(Sim *m) {
    m->qh++;
    if (m->qh > 4096 && m->qh * 2 > m->q.n) { /* compact */
        i64 len = q_len(m);
        memmove(m->q.p, (i64 *)m->q.p + m->qh, (size_t)len * sizeof(i64));
        m->q.n = len;
        m->qh = 0;
    }
}

static i64 new_seg(Sim *m, i64 kind, i64 count, i64 rid) {
    i64 id = m->seg_kind.n;
    if (PUSH(m->seg_kind, i64, kind) || PUSH(m->seg_count, i64, count)
        || PUSH(m->seg_rid, i64, rid) || PUSH(m->q, i64, id)) {
        m->oom = 1;
        return -1;
    }
    return id;
}

/* a copy evicted: out of its key's list (the key's other copies stay cached) */
static void drop_copy(Sim *m, i64 c) {
    i64 k = AT(m->c_key, i64, c), p = AT(m->c_prev, i64, c), x = AT(m->c_next, i64, c);
    if (p >= 0) AT(m->c_next, i64, p) = x;
    else m->khead[k] = x;
    if (x >= 0) AT(m->c_prev, i64, x) = p;
    else m->ktail[k] = p;
    AT(m->c_seg, i64, c) = -1;
    AT(m->c_ref, i64, c) = -1;
    AT(m->c_next, i64, c) = m->cfree; /* its id is free for the next copy */
    m->cfree = c;
}

/* BlockPool._evicted (seg_rid holds the copy of a shared segment) */
static void evicted(Sim *m, i64 seg) {
    i64 rid = AT(m->seg_rid, i64, seg), kind = AT(m->seg_kind, i64, seg);
    if (kind == OWN && m->own[rid] == seg) {
        m->own[rid] = -1;
    } else if (kind == SHARED && AT(m->c_seg, i64, rid) == seg) {
        drop_copy(m, rid);
    }
}

/* BlockPool.take */
static void take(Sim *m, i64 n) {
    m->free -= n;
    while (n > 0) {
        i64 seg = q_at(m, 0);
        i64 c = AT(m->seg_count, i64, seg);
        i64 got = n < c ? n : c;
        AT(m->seg_count, i64, seg) = c - got;
        n -= got;
        if (c - got == 0) {
            q_popleft(m);
            evicted(m, seg);
        }
    }
}

/* BlockPool.give_anon */
static void give_anon(Sim *m, i64 n) {
    if (n <= 0) return;
    m->free += n;
    if (q_len(m)) {
        i64 tail = AT(m->q, i64, m->q.n - 1);
        if (AT(m->seg_kind, i64, tail) == ANON) {
            AT(m->seg_count, i64, tail) += n;
            return;
        }
    }
    new_seg(m, ANON, n, -1);
}

/* BlockPool.give_own */
static void give_own(Sim *m, i64 rid, i64 n) {
    if (n <= 0) return;
    m->free += n;
    i64 seg = new_seg(m, OWN, n, rid);
    if (seg >= 0) m->own[rid] = seg;
}

/* BlockPool.release */
static void release_copy(Sim *m, i64 c) {
    if (c < 0) return; /* only after an allocation failed (m->oom) */
    if (--AT(m->c_ref, i64, c) == 0) {
        m->free += 1;
        i64 seg = new_seg(m, SHARED, 1, c);
        if (seg >= 0) AT(m->c_seg, i64, c) = seg;
    }
}

/* BlockPool.register: a new copy of key k (cached even where another copy is), held by
 * one request, last in k's list; its id */
static i64 new_copy(Sim *m, i64 k) {
    i64 c = m->cfree, t = m->ktail[k];
    if (c >= 0) {
        m->cfree = AT(m->c_next, i64, c);
        AT(m->c_key, i64, c) = k;
        AT(m->c_ref, i64, c) = 1;
        AT(m->c_prev, i64, c) = t;
        AT(m->c_next, i64, c) = -1;
    } else {
        c = m->c_key.n;
        if (PUSH(m->c_key, i64, k) || PUSH(m->c_ref, i64, 1) || PUSH(m->c_seg, i64, -1)
            || PUSH(m->c_prev, i64, t) || PUSH(m->c_next, i64, -1)) {
            m->oom = 1;
            return -1;
        }
    }
    if (t >= 0) AT(m->c_next, i64, t) = c;
    else m->khead[k] = c;
    m->ktail[k] = c;
    return c;
}

/* BlockPool.touch: r's first nhit keys are hit (each key's first copy, now held by r),
 * then own_blocks of its own */
static void touch(Sim *m, i64 rid, i64 nhit, i64 own_blocks) {
    const i64 *keys = m->keys + m->koff[rid];
    i64 *held = m->hk + m->koff[rid];
    for (i64 i = 0; i < nhit; i++) {
        i64 c = m->khead[keys[i]];
        if (AT(m->c_ref, i64, c) == 0) {
            AT(m->seg_count, i64, AT(m->c_seg, i64, c)) = 0;
            AT(m->c_seg, i64, c) = -1;
            m->free -= 1;
        }
        AT(m->c_ref, i64, c) += 1;
        held[i] = c;
    }
    if (own_blocks) {
        i64 seg = m->own[rid];
        m->own[rid] = -1;
        AT(m->seg_count, i64, seg) -= own_blocks;
        AT(m->seg_kind, i64, seg) = ANON;
        m->free -= own_blocks;
    }
    while (q_len(m) && AT(m->seg_count, i64, q_at(m, 0)) == 0) q_popleft(m);
}

/* BlockPool.forget_own */
static void forget_own(Sim *m, i64 rid) {
    i64 seg = m->own[rid];
    if (seg >= 0) {
        m->own[rid] = -1;
        AT(m->seg_kind, i64, seg) = ANON;
    }
}

static i64 own_cached(const Sim *m, i64 rid) {
    return m->own[rid] < 0 ? 0 : AT(m->seg_count, i64, m->own[rid]);
}

static i64 cdiv(i64 a, i64 b) { return (a + b - 1) / b; }

/* floor(a / B) and ceil(a / B) for a >= 0, B the block size: a shift when B is a power of
 * two (bshift >= 0; a division is the step loop's costliest instruction), else a division */
static i64 bdiv(const Sim *m, i64 a) { return m->bshift >= 0 ? a >> m->bshift : a / m->bs; }
static i64 bceil(const Sim *m, i64 a) { return bdiv(m, a + m->bs - 1); }

/* KvShape.blocks_one: pool blocks a request holds at `tokens` after a step that started at
 * `before` computed tokens (sliding windows free the blocks before the window on `before`) */
static i64 blocks_of(const Sim *m, i64 tokens, i64 before) {
    if (m->simple) return bceil(m, tokens);
    i64 total = 0;
    for (i64 g = 0; g < m->ng; g++) {
        i64 n;
        if (m->gkind[g] == G_STATE) {
            n = tokens > 0;
        } else {
            n = bceil(m, tokens);
            if (m->gkind[g] == G_SLIDING) {
                i64 x = before - m->gwin[g] + 1;
                n -= bdiv(m, x > 0 ? x : 0);
            }
        }
        total += m->gweight[g] * n;
    }
    return total;
}

/* sum over the running requests of KvShape.logical_bytes(computed) */
static i64 logical_bytes(const Sim *m) {
    i64 total = 0;
    for (i64 g = 0; g < m->ng; g++) {
        i64 kind = m->gkind[g], w = m->gwin[g], sum = 0;
        for (i64 j = 0; j < m->nrun; j++) {
            i64 t = m->computed[m->run[j]];
            sum += kind == G_STATE ? t > 0 : kind == G_SLIDING ? (t < w ? t : w) : t;
        }
        total += (kind == G_STATE ? m->gstate[g] : m->gbpt[g]) * sum;
    }
    return total;
}

/* Scheduler._grow: take the blocks, or give back the ones a sliding window left behind */
static void grow(Sim *m, i64 r, i64 need) {
    if (need > 0) take(m, need); /* take(m, 0) and give_anon(m, 0) do nothing */
    else if (need < 0) give_anon(m, -need);
    m->held[r] += need;
}

/* Limits.cap: vLLM's long_prefill_token_threshold */
static i64 cap(const Sim *m, i64 tokens) {
    return m->thr > 0 && m->thr < tokens ? m->thr : tokens;
}

/* ------------------------------------------------------------ requests (state.py) */

/* SimState.close_segment */
static void close_segment(Sim *m, i64 r) {
    if (m->last_emit[r] >= 0) {
        if (PUSH(m->sreq, i64, r) || PUSH(m->sfirst, i64, m->seg_start[r])
            || PUSH(m->slast, i64, m->last_emit[r]))
            m->oom = 1;
        m->last_emit[r] = -2;
    }
}

static i64 n_shared(const Sim *m, i64 r) { return m->koff[r + 1] - m->koff[r]; }

static void reg_keys(Sim *m, i64 r, i64 start, i64 stop);

/* Scheduler.register: cache r's shared-content blocks that are full at `tokens` (the
 * checks inline: a step's call registers nothing but once in block_size tokens) */
static inline void reg(Sim *m, i64 r, i64 tokens) {
    if (!m->caching) return;
    i64 start = m->reg_next[r], stop = bdiv(m, tokens), nk = n_shared(m, r);
    if (stop > nk) stop = nk;
    if (start < stop) reg_keys(m, r, start, stop);
}

/* reg's blocks [start, stop) of r's shared keys, start < stop */
static void reg_keys(Sim *m, i64 r, i64 start, i64 stop) {
    const i64 *keys = m->keys + m->koff[r];
    for (i64 j = start; j < stop; j++) m->hk[m->koff[r] + m->hk_n[r]++] = new_copy(m, keys[j]);
    m->reg_next[r] = stop;
}

/* Scheduler.free, tail first: the partial tail, own full blocks, then the shared-key copies */
static void sched_free(Sim *m, i64 r, int keep_own) {
    i64 own = 0, nh = m->hk_n[r];
    if (keep_own && m->caching) {
        own = bdiv(m, m->computed[r]) - n_shared(m, r);
        if (own < 0) own = 0;
    }
    give_anon(m, m->held[r] - nh - own);
    give_own(m, r, own);
    for (i64 i = nh - 1; i >= 0; i--) {
        release_copy(m, m->hk[m->koff[r] + i]);
    }
    m->hk_n[r] = 0;
    m->reg_next[r] = 0;
    m->held[r] = 0;
}

/* Scheduler.preempt */
static void preempt(Sim *m, i64 r) {
    sched_free(m, r, 1);
    m->computed[r] = 0;
    m->status[r] = WAITING;
    m->preempts[r] += 1;
    if (PUSH(m->psteps, i64, m->step)) m->oom = 1;
    close_segment(m, r);
    m->wh = (m->wh + m->n - 1) % m->n; /* appendleft */
    m->wq[m->wh] = r;
    m->wn++;
}

