/* kvplan.sim._core: arrivals and the step loop (simulator.py, scheduler.py); included by
 * _core.c only. */

/* ------------------------------------------------------------ arrivals (simulator.py) */

static void heap_push(Sim *m, double t) {
    i64 i = m->nheap++;
    while (i > 0) {
        i64 p = (i - 1) / 2;
        if (!(t < m->heap[p])) break;
        m->heap[i] = m->heap[p];
        i = p;
    }
    m->heap[i] = t;
}

static void heap_pop(Sim *m) {
    double last = m->heap[--m->nheap];
    i64 i = 0, n = m->nheap;
    while (1) {
        i64 c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && m->heap[c + 1] < m->heap[c]) c++;
        if (!(m->heap[c] < last)) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (n) m->heap[i] = last;
}

/* _Loop._update_next: next_s is when the next request reaches the engine, next_send when
 * its client sent it */
static void update_next(Sim *m) {
    if (m->ptr >= m->n) {
        m->next_s = m->next_send = INFINITY;
        return;
    }
    double a = m->arrival[m->ptr];
    if (!m->closed) {
        m->next_s = a;
        m->next_send = m->send[m->ptr];
        return;
    }
    m->next_send = m->nheap ? (m->heap[0] > a ? m->heap[0] : a) : INFINITY;
    double gate = m->api_free > m->next_send ? m->api_free : m->next_send;
    m->next_s = (gate + m->admit[m->ptr]) + m->delay[m->ptr];
}

/* _Loop._slot_free */
static void slot_free(Sim *m, double t) {
    if (m->closed) {
        heap_push(m, t);
        update_next(m);
    }
}

/* _Loop._release */
static void release(Sim *m) {
    double t;
    while ((t = m->next_s) <= m->clock) {
        double sent = m->next_send;
        if (m->closed) {
            double gate = m->api_free > sent ? m->api_free : sent;
            m->api_free = gate + m->admit[m->ptr];
        }
        i64 i = m->order[m->ptr++];
        if (m->closed) heap_pop(m);
        update_next(m);
        m->sent[i] = sent;
        if (m->reject[i]) {
            m->status[i] = REJECTED;
            slot_free(m, t);
            m->done++;
        } else if (m->mode == 2) { /* DecodeLoop._release: the pending queue */
            m->pend[(m->ph + m->pn) % m->n] = i;
            m->pn++;
        } else {
            m->status[i] = WAITING;
            m->wq[(m->wh + m->wn) % m->n] = i;
            m->wn++;
        }
    }
}

/* ------------------------------------------------------------ one general step */

static void plan_add(Sim *m, i64 r, i64 new, i64 ctx) {
    m->p_id[m->np] = r;
    m->p_new[m->np] = new;
    m->p_ctx[m->np] = ctx;
    m->np++;
}

/* Scheduler._running_one_by_one (+ _make_room, _grow); returns the budget left */
static i64 schedule_running(Sim *m, i64 budget, int *preempted) {
    i64 i = 0;
    while (i < m->nrun && budget > 0) {
        i64 r = m->run[i];
        i64 c = m->computed[r];
        i64 left = m->prompt[r] + m->generated[r] - c;
        i64 want = cap(m, left);
        i64 new = want < budget ? want : budget;
        i64 need = blocks_of(m, c + new, c) - m->held[r];
        int gone = 0;
        while (need > m->free) {
            i64 victim = m->run[--m->nrun];
            preempt(m, victim);
            *preempted = 1;
            if (victim == r) {
                gone = 1;
                break;
            }
        }
        if (gone) break;
        grow(m, r, need);
        reg(m, r, c + new);
        if (left > 1) m->prefill_blocks += need > 0 ? need : 0;
        else m->decode_blocks += need > 0 ? need : 0;
        plan_add(m, r, new, c);
        budget -= new;
        i++;
    }
    return budget;
}

/* Scheduler._lookup: r's cached leading shared keys (*nhit), then its own blocks; vLLM
 * never hits the last token, so at most (total - 1) // B blocks */
static i64 lookup(const Sim *m, i64 r, i64 total, i64 *nhit, i64 *evictable) {
    *nhit = *evictable = 0;
    if (!m->caching) return 0;
    i64 limit = (total - 1) / m->bs, nk = n_shared(m, r), h = 0;
    const i64 *keys = m->keys + m->koff[r];
    while (h < nk && h < limit && m->khead[keys[h]] >= 0) { /* the first copy is hit */
        *evictable += AT(m->c_ref, i64, m->khead[keys[h]]) == 0;
        h++;
    }
    *nhit = h;
    if (h < nk || h >= limit) return 0;
    i64 own = own_cached(m, r);
    return own < limit - h ? own : limit - h;
}

/* r leaves the waiting ring from behind the k skipped requests at its front: they move up */
static void wq_take(Sim *m, i64 k) {
    for (i64 j = k; j > 0; j--) m->wq[(m->wh + j) % m->n] = m->wq[(m->wh + j - 1) % m->n];
    m->wh = (m->wh + 1) % m->n;
    m->wn--;
}

/* vLLM 0.11.0 puts skipped requests back at the front in reverse order */
static void wq_reverse_front(Sim *m, i64 k) {
    for (i64 a = 0, b = k - 1; a < b; a++, b--) {
        i64 *x = &m->wq[(m->wh + a) % m->n], *y = &m->wq[(m->wh + b) % m->n], t = *x;
        *x = *y;
        *y = t;
    }
}

/* Scheduler._schedule_waiting (+ _admit); chunked prefill off, a request whose tokens
 * exceed the budget left is skipped (k of them stay at the ring's front) */
static void schedule_waiting(Sim *m, i64 budget) {
    i64 k = 0;
    while (m->wn > k && budget > 0 && m->nrun < m->max_seqs) {
        i64 r = m->wq[(m->wh + k) % m->n];
        i64 total = m->prompt[r] + m->generated[r];
        i64 nhit, evictable;
        i64 own = lookup(m, r, total, &nhit, &evictable);
        i64 hit = (nhit + own) * m->bs;
        /* vLLM 0.11.0 counts every lookup, failed ones and a preempted request's too */
        m->p_query += total;
        m->p_hits += hit;
        i64 new = cap(m, total - hit);
        if (!m->chunked && new > budget) {
            k++;
            continue;
        }
        if (new > budget) new = budget;
        /* vLLM (0.11) frees skipped blocks on request.num_computed_tokens, 0 here */
        i64 need = blocks_of(m, hit + new, 0) - nhit - own;
        if (need + evictable + own > m->free) break;
        wq_take(m, k);
        touch(m, r, nhit, own);
        forget_own(m, r);
        take(m, need);
        m->held[r] = need + nhit + own;
        m->hk_n[r] = nhit; /* touch put the hit copies in hk */
        m->reg_next[r] = nhit + own;
        m->computed[r] = hit;
        m->run[m->nrun++] = r;
        m->status[r] = RUNNING;
        if (isnan(m->scheduled[r])) m->scheduled[r] = m->clock;
        m->prefill_blocks += need;
        if (m->preempts[r] == 0) m->hits[r] = hit; /* vLLM's num_cached_tokens: set once */
        reg(m, r, hit + new);
        plan_add(m, r, new, hit);
        budget -= new;
    }
    wq_reverse_front(m, k);
}

/* _Loop._finish */
static void finish_all(Sim *m, i64 nfin, double end) {
    for (i64 j = 0; j < nfin; j++) {
        i64 r = m->p_id[j]; /* finishers were compacted to the plan's front */
        if (m->mode != 1) sched_free(m, r, 0); /* a prefill instance holds them */
        close_segment(m, r);
        slot_free(m, end);
        m->status[r] = FINISHED;
        m->finish[r] = end;
    }
    m->done += nfin;
    i64 k = 0;
    for (i64 j = 0; j < m->nrun; j++) {
        i64 r = m->run[j];
        if (m->status[r] != FINISHED) m->run[k++] = r;
    }
    m->nrun = k;
}

/* _Loop._emit: requests that caught up sample; returns how many finished (their ids are
 * moved to the front of p_id, in plan order) */
static i64 emit(Sim *m, double end) {
    i64 nfin = 0;
    for (i64 j = 0; j < m->np; j++) {
        i64 r = m->p_id[j];
        if (m->computed[r] != m->prompt[r] + m->generated[r]) continue;
        i64 gen = ++m->generated[r];
        if (m->last_emit[r] != m->step - 1) {
            close_segment(m, r);
            m->seg_start[r] = m->step;
        }
        m->last_emit[r] = m->step;
        if (gen == 1) m->first[r] = end;
        if (gen == m->output[r]) m->p_id[nfin++] = r; /* nfin <= j: p_id[j] already read */
    }
    return nfin;
}

/* _Loop._general_step; returns 1 if a step ran, 0 if only preemptions happened, -1 if
 * nothing happened (Python asserts this never occurs) */
static int general_step(Sim *m) {
    int preempted = 0;
    m->np = m->p_query = m->p_hits = 0;
    i64 budget = schedule_running(m, m->budget, &preempted);
    if (!preempted) schedule_waiting(m, budget);
    if (m->np == 0) return preempted ? 0 : -1;
    m->query_tokens += m->p_query; /* a step's lookups count where it runs (_account) */
    m->lookup_hits += m->p_hits;
    Sums q;
    memset(&q, 0, sizeof q);
    for (i64 j = 0; j < m->np; j++) {
        sums_add(&q, &m->f, m->p_new[j], m->p_ctx[j]);
        m->computed[m->p_id[j]] = m->p_ctx[j] + m->p_new[j];
    }
    double start = m->clock;
    double end = start + step_time(&m->f, &q, m->idle);
    m->idle = 0;
    /* every running request planned (np == nrun) and every group full: the running
     * requests' computed tokens are the plan's context + new tokens (integers: the sum
     * logical_bytes takes request by request) */
    i64 logical = m->full_bpt >= 0 && m->np == m->nrun ? m->full_bpt * (q.ctx + q.tok)
                                                       : logical_bytes(m);
    if (PUSH(m->st, double, start) || PUSH(m->en, double, end)
        || PUSH(m->used, i64, m->usable - m->free) || PUSH(m->logical, i64, logical)
        || PUSH(m->nrun_col, i64, m->nrun) || PUSH(m->nwait_col, i64, m->wn)
        || PUSH(m->newtok, i64, q.tok))
        m->oom = 1;
    i64 nfin = emit(m, end);
    if (nfin) finish_all(m, nfin, end);
    m->clock = end;
    m->step++;
    return 1;
}

/* books.check_books: queue counts == free; refs == holders; physical + free == pool */
static int books_ok(const Sim *m) {
    i64 queued = 0, held = 0, extra = 0;
    for (i64 i = 0; i < q_len(m); i++) queued += AT(m->seg_count, i64, q_at(m, i));
    i64 nc = m->c_key.n;
    i64 *holders = calloc((size_t)(nc + 1), sizeof(i64));
    if (!holders) return 0;
    int ok = 1;
    for (i64 r = 0; r < m->n; r++) {
        held += m->held[r];
        for (i64 i = 0; i < m->hk_n[r]; i++) {
            i64 c = m->hk[m->koff[r] + i];
            if (c >= 0 && c < nc) holders[c]++;
            else ok = 0;
        }
    }
    for (i64 c = 0; c < nc; c++) {
        if (holders[c] && holders[c] != AT(m->c_ref, i64, c)) ok = 0;
        if (holders[c]) extra += holders[c] - 1;
    }
    free(holders);
    return ok && queued == m->free && held - extra + m->free == m->usable && m->free >= 0;
}

/* _Loop.run, without the GIL (taken back only to call progress). Returns 0, or an error
 * code for core_run to raise once it holds the GIL again. */
enum { LOOP_OK, LOOP_NOMEM, LOOP_BOOKS, LOOP_STUCK, LOOP_PYERR, LOOP_EARLY, LOOP_MORE };

/* _Instance.turn's _release: a prefill instance's releases, then the arrivals; a decode
 * instance's arrivals, then its transfers and admissions. -1: a release guess failed */
static int instance_release(Sim *m) {
    if (m->mode == 1 && prefill_release(m) < 0) return -1;
    release(m);
    if (m->mode == 2) decode_release(m);
    return 0;
}

/* an idle (or, in a fleet, stalled) instance's clock moves to its next event: 1 moved, 0
 * nothing left, -1 no progress (an event due now was missed) */
static int idle_until_next(Sim *m) {
    double t = next_event(m);
    if (t == INFINITY) return 0;
    if (m->mode && !(t > m->clock)) return -1;
    if (t > m->clock) m->clock = t;
    return 1;
}

static int call_progress(Sim *m, PyObject *progress, PyThreadState **ts) {
    PyEval_RestoreThread(*ts);
    PyObject *got = PyObject_CallFunction(progress, "LL", (long long)m->done,
                                          (long long)m->n);
    Py_XDECREF(got);
    *ts = PyEval_SaveThread();
    return got ? LOOP_OK : LOOP_PYERR;
}

/* one pass of _Loop.run's loop at the clock: releases (a decode instance's admissions
 * among them), then an idle instance's move to its next event, a decode run of at most
 * `limit` steps or a general step. LOOP_MORE: go on; LOOP_OK: nothing is left */
static int loop_once(Sim *m, i64 limit) {
    if (m->nrun == 0 && m->wn == 0) m->idle = 1; /* the last step left nothing to run */
    if (instance_release(m) < 0) return LOOP_EARLY;
    if (m->nrun == 0 && m->wn == 0) {
        int moved = idle_until_next(m);
        if (moved < 0) return LOOP_STUCK;
        return moved ? LOOP_MORE : LOOP_OK;
    }
    i64 ran = decode_run(m, limit);
    int got = ran ? 1 : general_step(m);
    if (got < 0 && m->mode && m->nrun == 0) { /* stalled: the head waits for an event */
        m->idle = 1;
        if (idle_until_next(m) <= 0) return LOOP_STUCK;
        got = 0;
    }
    if (got < 0) return LOOP_STUCK;
    if (m->oom) return LOOP_NOMEM;
    if (m->validate && !books_ok(m)) return LOOP_BOOKS;
    return LOOP_MORE;
}

/* the loop's end: the emission runs still open are closed (_Loop._result) */
static int loop_end(Sim *m) {
    for (i64 r = 0; r < m->n; r++)
        if (m->last_emit[r] >= 0) close_segment(m, r);
    return m->oom ? LOOP_NOMEM : LOOP_OK;
}

static int loop(Sim *m, PyObject *progress, PyThreadState **ts) {
    i64 shown = 0;
    int code;
    while ((code = loop_once(m, progress != Py_None ? shown + 4096 - m->step : RUN_MAX))
           == LOOP_MORE) {
        if (progress != Py_None && m->step - shown >= 4096) {
            shown = m->step;
            if (call_progress(m, progress, ts) != LOOP_OK) return LOOP_PYERR;
        }
    }
    return code == LOOP_OK ? loop_end(m) : code;
}

/* with the GIL held: the Python exception for a loop error code (0 if none) */
static int loop_error(int code) {
    if (code == LOOP_NOMEM) PyErr_NoMemory();
    else if (code == LOOP_BOOKS)
        PyErr_SetString(PyExc_AssertionError, "kvplan core: block books do not balance");
    else if (code == LOOP_STUCK)
        PyErr_SetString(PyExc_AssertionError, "kvplan core: the scheduler made no progress");
    return code != LOOP_OK;
}
