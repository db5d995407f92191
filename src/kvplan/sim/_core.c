/* The simulator's optional compiled core: vLLM v1 scheduling rules, step by step, for the
 * shape the lean path covers (one full-attention KV group, a timer priced from sums, no
 * long-prefill cap). See src/kvplan/sim/core.py and docs/simulator.md.
 *
 * It holds scheduling rules only: the step time is a fixed expression over tables and
 * scalars the timer computed in Python (kvplan.costs.batch.AggregateForm), evaluated with
 * the same float operations in the same order as the timer's step_time_agg, so the results
 * equal the pure-Python path's to the bit. Built with -ffp-contract=off (no fused
 * multiply-add). Every rule below mirrors a Python function, named in its comment.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

/* ------------------------------------------------------------ growable i64 / f64 buffers */

typedef struct { char *p; i64 n, cap; } Buf;

static int buf_room(Buf *b, i64 more, size_t item) {
    if (b->n + more <= b->cap) return 0;
    i64 cap = b->cap ? b->cap : 1024;
    while (cap < b->n + more) cap *= 2;
    char *p = realloc(b->p, (size_t)cap * item);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

#define PUSH(b, type, v) (buf_room(&(b), 1, sizeof(type)) ? -1 \
                          : (((type *)(b).p)[(b).n++] = (v), 0))
#define AT(b, type, i) (((type *)(b).p)[i])

/* ------------------------------------------------------------ the step-time form */

typedef struct {
    const double *g, *w, *s, *k, *ar, *p2p;  /* tables over tokens 0..tmax */
    i64 tmax;
    double lm_r, attn_p, kv_c, state_r, layer_s, pm1, req_r, ov[2];
} Form;

/* kvplan.costs.roofline.StepCostModel.step_time_agg (_stage then _finish) */
static double step_time(const Form *f, i64 tok, i64 req, i64 ctx, i64 pairs, int pre) {
    double r = (double)req;
    double x1 = f->g[tok] + f->lm_r * r;
    double x2 = f->w[tok];
    double dense = x2 > x1 ? x2 : x1;
    double mc = f->attn_p * (double)pairs + f->s[tok];
    double mm = f->kv_c * (double)ctx + (f->k[tok] + f->state_r * r);
    double stage = dense + (mm > mc ? mm : mc);
    if (f->ar) stage = stage + f->ar[tok];
    stage = stage + f->layer_s;
    if (f->p2p) stage = stage + f->pm1 * (stage + f->p2p[tok]);
    return stage + (f->ov[pre] + f->req_r * r);
}

/* ------------------------------------------------------------ the simulation state */

enum { PENDING, WAITING, RUNNING, FINISHED, REJECTED };
enum { ANON = 0, OWN = 1, SHARED = 2 };

typedef struct {
    i64 n;
    const double *arrival;
    const i64 *prompt, *output;
    const uint8_t *reject;
    i64 *computed, *generated, *held, *preempts, *hits, *last_emit, *seg_start;
    int8_t *status;
    double *sent, *scheduled, *first, *finish;
    i64 budget, max_seqs, bs, bpt, usable;
    int chunked, caching, validate;
    Form f;
    /* running list, waiting deque (ring of n), closed-loop slots (min-heap) */
    i64 *run, nrun;
    i64 *wq, wh, wn;
    double *heap;
    i64 nheap;
    int closed;
    /* the free-block queue: segments (arena) and the queue of their ids */
    i64 free;
    Buf seg_kind, seg_count, seg_rid, q;
    i64 qh;
    i64 *own; /* request -> its queued own segment, or -1 */
    /* prefix keys (interned 0..nkeys-1): request r's are keys[koff[r] .. koff[r + 1]) */
    const i64 *koff, *keys;
    i64 nkeys;
    i64 *ref;      /* key -> requests holding its cached block, or -1 if not cached */
    i64 *key_seg;  /* key -> its queued shared segment, or -1 */
    i64 *hk, *hk_n; /* r's held keys: hk[koff[r] ..], hk_n[r] of them */
    i64 *reg_next; /* r's next key index to register */
    /* plan scratch */
    i64 *p_id, *p_new, *p_ctx, np;
    /* outputs */
    Buf st, en, used, logical, nrun_col, nwait_col, newtok, sreq, sfirst, slast, psteps;
    i64 query_tokens, prefill_blocks, decode_blocks, ptr, done, step;
    double clock, next_s;
    int oom;
} Sim;

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

/* BlockPool._evicted (seg_rid holds the key of a shared segment) */
static void evicted(Sim *m, i64 seg) {
    i64 rid = AT(m->seg_rid, i64, seg), kind = AT(m->seg_kind, i64, seg);
    if (kind == OWN && m->own[rid] == seg) {
        m->own[rid] = -1;
    } else if (kind == SHARED && m->key_seg[rid] == seg) {
        m->key_seg[rid] = -1;
        m->ref[rid] = -1;
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

/* BlockPool.release_key */
static void release_key(Sim *m, i64 k) {
    if (--m->ref[k] == 0) {
        m->free += 1;
        i64 seg = new_seg(m, SHARED, 1, k);
        if (seg >= 0) m->key_seg[k] = seg;
    }
}

/* BlockPool.touch: r's first nhit keys are hit, then own_blocks of its own */
static void touch(Sim *m, i64 rid, i64 nhit, i64 own_blocks) {
    const i64 *keys = m->keys + m->koff[rid];
    for (i64 i = 0; i < nhit; i++) {
        i64 k = keys[i];
        if (m->ref[k] == 0) {
            AT(m->seg_count, i64, m->key_seg[k]) = 0;
            m->key_seg[k] = -1;
            m->free -= 1;
        }
        m->ref[k] += 1;
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

/* Scheduler.register: cache r's shared-content blocks that are full at `tokens` */
static void reg(Sim *m, i64 r, i64 tokens) {
    if (!m->caching) return;
    i64 start = m->reg_next[r], stop = tokens / m->bs, nk = n_shared(m, r);
    if (stop > nk) stop = nk;
    if (start >= stop) return;
    const i64 *keys = m->keys + m->koff[r];
    for (i64 j = start; j < stop; j++) {
        if (m->ref[keys[j]] < 0) { /* BlockPool.register */
            m->ref[keys[j]] = 1;
            m->hk[m->koff[r] + m->hk_n[r]++] = keys[j];
        }
    }
    m->reg_next[r] = stop;
}

/* Scheduler.free: partial/duplicate blocks, own full blocks, then shared keys tail first */
static void sched_free(Sim *m, i64 r, int keep_own) {
    i64 own = 0, nh = m->hk_n[r];
    if (keep_own && m->caching) {
        own = m->computed[r] / m->bs - n_shared(m, r);
        if (own < 0) own = 0;
    }
    give_anon(m, m->held[r] - nh - own);
    give_own(m, r, own);
    for (i64 i = nh - 1; i >= 0; i--) release_key(m, m->hk[m->koff[r] + i]);
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

/* _Loop._update_next */
static void update_next(Sim *m) {
    if (m->ptr >= m->n) {
        m->next_s = INFINITY;
        return;
    }
    double a = m->arrival[m->ptr];
    if (!m->closed) m->next_s = a;
    else if (m->nheap) m->next_s = m->heap[0] > a ? m->heap[0] : a;
    else m->next_s = INFINITY;
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
        i64 i = m->ptr++;
        if (m->closed) heap_pop(m);
        update_next(m);
        m->sent[i] = t;
        if (m->reject[i]) {
            m->status[i] = REJECTED;
            slot_free(m, t);
            m->done++;
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

/* Scheduler._running_one_by_one (+ _make_room, _grow); returns the budget left, or -1
 * after a preemption */
static i64 schedule_running(Sim *m, i64 budget, int *preempted) {
    i64 i = 0;
    while (i < m->nrun && budget > 0) {
        i64 r = m->run[i];
        i64 c = m->computed[r];
        i64 left = m->prompt[r] + m->generated[r] - c;
        i64 new = left < budget ? left : budget;
        i64 need = cdiv(c + new, m->bs) - m->held[r];
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
        take(m, need);
        m->held[r] += need;
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
    while (h < nk && h < limit && m->ref[keys[h]] >= 0) {
        *evictable += m->ref[keys[h]] == 0;
        h++;
    }
    *nhit = h;
    if (h < nk || h >= limit) return 0;
    i64 own = own_cached(m, r);
    return own < limit - h ? own : limit - h;
}

/* Scheduler._schedule_waiting (+ _admit) */
static void schedule_waiting(Sim *m, i64 budget) {
    while (m->wn && budget > 0 && m->nrun < m->max_seqs) {
        i64 r = m->wq[m->wh];
        i64 total = m->prompt[r] + m->generated[r];
        i64 nhit, evictable;
        i64 own = lookup(m, r, total, &nhit, &evictable);
        i64 hit = (nhit + own) * m->bs;
        i64 new = total - hit;
        if (!m->chunked && new > budget) return;
        if (new > budget) new = budget;
        i64 need = cdiv(hit + new, m->bs) - nhit - own;
        if (need + evictable + own > m->free) return;
        m->wh = (m->wh + 1) % m->n;
        m->wn--;
        touch(m, r, nhit, own);
        forget_own(m, r);
        take(m, need);
        m->held[r] = need + nhit + own;
        for (i64 i = 0; i < nhit; i++) m->hk[m->koff[r] + i] = m->keys[m->koff[r] + i];
        m->hk_n[r] = nhit;
        m->reg_next[r] = nhit + own;
        m->computed[r] = hit;
        m->hits[r] += hit;
        m->run[m->nrun++] = r;
        m->status[r] = RUNNING;
        if (isnan(m->scheduled[r])) m->scheduled[r] = m->clock;
        m->prefill_blocks += need;
        m->query_tokens += total;
        reg(m, r, hit + new);
        plan_add(m, r, new, hit);
        budget -= new;
    }
}

/* _Loop._finish */
static void finish_all(Sim *m, i64 nfin, double end) {
    for (i64 j = 0; j < nfin; j++) {
        i64 r = m->p_id[j]; /* finishers were compacted to the plan's front */
        sched_free(m, r, 0);
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

/* _Loop._general_step; returns 1 if a step ran, 0 if only preemptions happened */
static int general_step(Sim *m) {
    int preempted = 0;
    m->np = 0;
    i64 budget = schedule_running(m, m->budget, &preempted);
    if (!preempted) schedule_waiting(m, budget);
    if (m->np == 0) return 0;
    i64 tok = 0, ctx = 0, pairs = 0;
    int pre = 0;
    for (i64 j = 0; j < m->np; j++) {
        i64 nw = m->p_new[j], cx = m->p_ctx[j];
        tok += nw;
        ctx += cx;
        pairs += nw * cx + nw * (nw + 1) / 2;
        pre |= nw > 1 || cx == 0;
        m->computed[m->p_id[j]] = cx + nw;
    }
    double start = m->clock;
    double end = start + step_time(&m->f, tok, m->np, ctx, pairs, pre);
    i64 held = 0;
    for (i64 j = 0; j < m->nrun; j++) held += m->computed[m->run[j]];
    if (PUSH(m->st, double, start) || PUSH(m->en, double, end)
        || PUSH(m->used, i64, m->usable - m->free) || PUSH(m->logical, i64, m->bpt * held)
        || PUSH(m->nrun_col, i64, m->nrun) || PUSH(m->nwait_col, i64, m->wn)
        || PUSH(m->newtok, i64, tok))
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
    i64 *holders = calloc((size_t)(m->nkeys + 1), sizeof(i64));
    if (!holders) return 0;
    for (i64 r = 0; r < m->n; r++) {
        held += m->held[r];
        for (i64 i = 0; i < m->hk_n[r]; i++) holders[m->hk[m->koff[r] + i]]++;
    }
    int ok = 1;
    for (i64 k = 0; k < m->nkeys; k++) {
        if (holders[k] && holders[k] != m->ref[k]) ok = 0;
        if (holders[k]) extra += holders[k] - 1;
    }
    free(holders);
    return ok && queued == m->free && held - extra + m->free == m->usable && m->free >= 0;
}

/* _Loop.run; returns 0, -1 (Python error set) */
static int loop(Sim *m, PyObject *progress) {
    i64 shown = 0;
    while (1) {
        release(m);
        if (m->nrun == 0 && m->wn == 0) {
            if (m->next_s == INFINITY) break;
            if (m->next_s > m->clock) m->clock = m->next_s;
            continue;
        }
        general_step(m);
        if (m->oom) {
            PyErr_NoMemory();
            return -1;
        }
        if (m->validate && !books_ok(m)) {
            PyErr_SetString(PyExc_AssertionError, "kvplan core: block books do not balance");
            return -1;
        }
        if (progress != Py_None && m->step - shown >= 4096) {
            shown = m->step;
            PyObject *got = PyObject_CallFunction(progress, "LL", (long long)m->done,
                                                  (long long)m->n);
            if (!got) return -1;
            Py_DECREF(got);
        }
    }
    for (i64 r = 0; r < m->n; r++)
        if (m->last_emit[r] >= 0) close_segment(m, r);
    if (m->oom) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ Python glue */

#define NARR 16
static const char ARR_KIND[NARR] = {'f', 'i', 'i', 'b', 'i', 'i', 'i', 'c', 'f', 'f', 'f',
                                    'f', 'i', 'i', 'i', 'i'};

static size_t kind_size(char k) { return k == 'f' || k == 'i' ? 8 : 1; }

static int get_buf(PyObject *o, Py_buffer *v, i64 n, size_t item, int writable) {
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if ((size_t)v->itemsize != item || v->len != (Py_ssize_t)(n * (i64)item)) {
        PyBuffer_Release(v);
        v->obj = NULL;
        PyErr_SetString(PyExc_ValueError, "kvplan core: an array has the wrong size or type");
        return -1;
    }
    return 0;
}

static PyObject *to_bytes(Buf *b, size_t item) {
    return PyByteArray_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)(b->n * (i64)item));
}

static void sim_free(Sim *m) {
    Buf *bufs[] = {&m->seg_kind, &m->seg_count, &m->seg_rid, &m->q, &m->st, &m->en, &m->used,
                   &m->logical, &m->nrun_col, &m->nwait_col, &m->newtok, &m->sreq, &m->sfirst,
                   &m->slast, &m->psteps};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]->p);
    free(m->run);
    free(m->wq);
    free(m->heap);
    free(m->own);
    free(m->ref);
    free(m->key_seg);
    free(m->hk);
    free(m->hk_n);
    free(m->reg_next);
    free(m->p_id);
    free(m->p_new);
    free(m->p_ctx);
}

static int sim_alloc(Sim *m, i64 slots) {
    i64 n = m->n ? m->n : 1;
    m->run = malloc(sizeof(i64) * (size_t)n);
    m->wq = malloc(sizeof(i64) * (size_t)n);
    m->heap = malloc(sizeof(double) * (size_t)(slots + n + 1));
    m->own = malloc(sizeof(i64) * (size_t)n);
    m->p_id = malloc(sizeof(i64) * (size_t)n);
    m->p_new = malloc(sizeof(i64) * (size_t)n);
    m->p_ctx = malloc(sizeof(i64) * (size_t)n);
    i64 nk = m->nkeys ? m->nkeys : 1, tk = m->koff[m->n] ? m->koff[m->n] : 1;
    m->ref = malloc(sizeof(i64) * (size_t)nk);
    m->key_seg = malloc(sizeof(i64) * (size_t)nk);
    m->hk = malloc(sizeof(i64) * (size_t)tk);
    m->hk_n = calloc((size_t)n, sizeof(i64));
    m->reg_next = calloc((size_t)n, sizeof(i64));
    if (!m->run || !m->wq || !m->heap || !m->own || !m->p_id || !m->p_new || !m->p_ctx
        || !m->ref || !m->key_seg || !m->hk || !m->hk_n || !m->reg_next)
        return -1;
    for (i64 r = 0; r < n; r++) m->own[r] = -1;
    for (i64 k = 0; k < nk; k++) m->ref[k] = m->key_seg[k] = -1;
    for (i64 i = 0; i < slots; i++) m->heap[i] = 0.0;
    m->nheap = slots;
    m->free = m->usable;
    if (new_seg(m, ANON, m->usable, -1) < 0) return -1;
    return 0;
}

static int parse_form(PyObject *form, Form *f, Py_buffer *tabs, i64 budget) {
    const double **dst[6] = {&f->g, &f->w, &f->s, &f->k, &f->ar, &f->p2p};
    double *sc[9] = {&f->lm_r, &f->attn_p, &f->kv_c, &f->state_r, &f->layer_s, &f->pm1,
                     &f->req_r, &f->ov[0], &f->ov[1]};
    if (!PyTuple_Check(form) || PyTuple_GET_SIZE(form) != 16) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: the form is a 16-tuple");
        return -1;
    }
    f->tmax = PyLong_AsLongLong(PyTuple_GET_ITEM(form, 0));
    if (f->tmax < budget) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "kvplan core: the form's tables are too short");
        return -1;
    }
    for (int i = 0; i < 6; i++) {
        PyObject *o = PyTuple_GET_ITEM(form, 1 + i);
        *dst[i] = NULL;
        if (o == Py_None) continue;
        if (get_buf(o, &tabs[i], f->tmax + 1, 8, 0) < 0) return -1;
        *dst[i] = tabs[i].buf;
    }
    if (!f->g || !f->w || !f->s || !f->k) {
        PyErr_SetString(PyExc_ValueError, "kvplan core: the form lacks a table");
        return -1;
    }
    for (int i = 0; i < 9; i++) {
        *sc[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(form, 7 + i));
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

static void release_all(Py_buffer *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
}

static int bind_arrays(Sim *m, PyObject *arrs, Py_buffer *v) {
    if (!PyTuple_Check(arrs) || PyTuple_GET_SIZE(arrs) != NARR) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: expected a tuple of 16 arrays");
        return -1;
    }
    void *p[NARR];
    for (int i = 0; i < NARR; i++) {
        if (get_buf(PyTuple_GET_ITEM(arrs, i), &v[i], m->n, kind_size(ARR_KIND[i]), i >= 4) < 0)
            return -1;
        p[i] = v[i].buf;
    }
    m->arrival = p[0], m->prompt = p[1], m->output = p[2], m->reject = p[3];
    m->computed = p[4], m->generated = p[5], m->held = p[6], m->status = p[7];
    m->sent = p[8], m->scheduled = p[9], m->first = p[10], m->finish = p[11];
    m->preempts = p[12], m->hits = p[13], m->last_emit = p[14], m->seg_start = p[15];
    return 0;
}

/* (koff: n + 1 offsets, keys: interned ids, nkeys); checked: ids in range, offsets rising */
static int bind_keys(Sim *m, PyObject *kt, Py_buffer *v) {
    long long nkeys;
    PyObject *ko, *ks;
    if (!PyArg_ParseTuple(kt, "OOL", &ko, &ks, &nkeys)) return -1;
    if (get_buf(ko, &v[0], m->n + 1, 8, 0) < 0) return -1;
    m->koff = v[0].buf;
    i64 total = m->koff[m->n];
    if (get_buf(ks, &v[1], total, 8, 0) < 0) return -1;
    m->keys = v[1].buf;
    m->nkeys = nkeys;
    int ok = m->koff[0] == 0 && nkeys >= 0;
    for (i64 r = 0; r < m->n && ok; r++) ok = m->koff[r] <= m->koff[r + 1];
    for (i64 i = 0; i < total && ok; i++) ok = m->keys[i] >= 0 && m->keys[i] < nkeys;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "kvplan core: bad prefix keys");
        return -1;
    }
    return 0;
}

static PyObject *results(Sim *m) {
    return Py_BuildValue("(NNNNNNNNNNNLLLd)", to_bytes(&m->st, 8), to_bytes(&m->en, 8),
                         to_bytes(&m->used, 8), to_bytes(&m->logical, 8),
                         to_bytes(&m->nrun_col, 8), to_bytes(&m->nwait_col, 8),
                         to_bytes(&m->newtok, 8), to_bytes(&m->sreq, 8),
                         to_bytes(&m->sfirst, 8), to_bytes(&m->slast, 8),
                         to_bytes(&m->psteps, 8), (long long)m->query_tokens,
                         (long long)m->prefill_blocks, (long long)m->decode_blocks, m->clock);
}

static PyObject *core_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arrs, *kt, *form, *progress;
    long long n, slots, budget, seqs, bs, bpt, usable;
    int chunked, caching, validate;
    if (!PyArg_ParseTuple(args, "OOLLLLLLLpppOO", &arrs, &kt, &n, &slots, &budget, &seqs, &bs,
                          &bpt, &usable, &chunked, &caching, &validate, &form, &progress))
        return NULL;
    if (n < 0 || slots < 0 || budget < 1 || seqs < 1 || bs < 1 || usable < 1) {
        PyErr_SetString(PyExc_ValueError, "kvplan core: bad limits");
        return NULL;
    }
    Sim m;
    memset(&m, 0, sizeof m);
    m.n = n, m.budget = budget, m.max_seqs = seqs, m.bs = bs, m.bpt = bpt, m.usable = usable;
    m.chunked = chunked, m.caching = caching, m.validate = validate, m.closed = slots > 0;
    Py_buffer v[NARR], tabs[6], kv[2];
    memset(v, 0, sizeof v);
    memset(tabs, 0, sizeof tabs);
    memset(kv, 0, sizeof kv);
    PyObject *out = NULL;
    if (bind_arrays(&m, arrs, v) == 0 && bind_keys(&m, kt, kv) == 0
        && parse_form(form, &m.f, tabs, budget) == 0) {
        if (sim_alloc(&m, slots) < 0) {
            PyErr_NoMemory();
        } else {
            update_next(&m);
            if (loop(&m, progress) == 0) out = results(&m);
        }
    }
    sim_free(&m);
    release_all(v, NARR);
    release_all(tabs, 6);
    release_all(kv, 2);
    return out;
}

/* eval_form(form, tokens, requests, context, pairs, prefill, out): the form at many points
 * (tests and the run-time spot check compare it with the timer's step_time_agg) */
static PyObject *core_eval(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *form, *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &form, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]))
        return NULL;
    Form f;
    Py_buffer tabs[6], v[6];
    memset(tabs, 0, sizeof tabs);
    memset(v, 0, sizeof v);
    PyObject *ret = NULL;
    if (parse_form(form, &f, tabs, 0) < 0) goto done;
    Py_ssize_t n = PyObject_Length(o[0]);
    if (n < 0) goto done;
    for (int i = 0; i < 6; i++)
        if (get_buf(o[i], &v[i], n, 8, i == 5) < 0) goto done;
    const i64 *t = v[0].buf, *r = v[1].buf, *c = v[2].buf, *p = v[3].buf, *pre = v[4].buf;
    double *out = v[5].buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] < 0 || t[i] > f.tmax) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: tokens outside the tables");
            goto done;
        }
        out[i] = step_time(&f, t[i], r[i], c[i], p[i], pre[i] != 0);
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    release_all(tabs, 6);
    release_all(v, 6);
    return ret;
}

static PyMethodDef METHODS[] = {
    {"run", core_run, METH_VARARGS, "Run one simulation (kvplan.sim.core)."},
    {"eval_form", core_eval, METH_VARARGS, "Evaluate a step-time form at many points."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_core",
                                    "kvplan's optional compiled simulator core.", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&MODULE); }
