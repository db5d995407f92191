/* kvplan.sim._core: buffers, the step-time form, the simulation state, a run's result (included
 * by _core.c only: a single translation unit, every function static). */

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
    i64 tmax, win;                           /* win: the priced sliding window, 0 = none */
    double lm_r, attn_p, kv_c, state_r, layer_s, pm1, req_r, ov[2];
    double sl_p, sl_c;                       /* per sliding pair / sliding context token */
    int mla;
    int asy;                                 /* async scheduling: host work overlaps the stage */
    double mla_p, mla_c;                     /* MLA prefill path: per pair / context token */
    const double *gq;   /* GDN: the state layers' time for one sequence of L new tokens, or NULL */
} Form;

/* One step's sums (kvplan.costs.step.batch.AggregateForm): tokens T, requests R, context C,
 * pairs P; under the window: context SC and pairs SP; MLA: pairs PP and context PC of the
 * requests computing > 1 token; pre: the step holds prefill work; lmax: the most new tokens
 * of one request computing > 1 (0 if none) */
typedef struct { i64 tok, req, ctx, pairs, sctx, spairs, pp, pc; int pre; i64 lmax; } Sums;

/* sum_{j=c+1}^{c+n} min(j, w): keys attended under a window of w (step_sums._clipped_pairs) */
static i64 clipped_pairs(i64 n, i64 c, i64 w) {
    i64 lo = c + 1, below = c + n < w ? c + n : w;
    i64 ramp_n = below - lo + 1 > 0 ? below - lo + 1 : 0;
    return ramp_n * (lo + below) / 2 + (n - ramp_n) * w;
}

/* one request's share of the sums (new tokens nw over cx cached) */
static void sums_add(Sums *s, const Form *f, i64 nw, i64 cx) {
    i64 pairs = nw * cx + nw * (nw + 1) / 2;
    s->tok += nw;
    s->req += 1;
    s->ctx += cx;
    s->pairs += pairs;
    s->pre |= nw > 1 || cx == 0;
    if (nw > 1 && nw > s->lmax) s->lmax = nw;
    if (f->win) {
        s->sctx += cx < f->win ? cx : f->win;
        s->spairs += clipped_pairs(nw, cx, f->win);
    }
    if (f->mla && nw > 1) {
        s->pp += pairs;
        s->pc += cx;
    }
}

/* kvplan.costs.step.batch.AggregateForm's formula (StepCostModel._stage then _finish); idle:
 * the step starts on an idle engine, its host work hidden under no step (batch.idle_timer) */
static double step_time(const Form *f, const Sums *q, int idle) {
    i64 tok = q->tok;
    double r = (double)q->req;
    double x1 = f->g[tok] + f->lm_r * r;
    double x2 = f->w[tok];
    double dense = x2 > x1 ? x2 : x1;
    double st = f->s[tok];
    if (f->gq) {
        double gl = f->gq[q->lmax];
        st = gl > st ? gl : st;
    }
    double mc = f->attn_p * (double)q->pairs + st;
    if (f->mla) mc = mc + (f->mla_p * (double)q->pp + f->mla_c * (double)q->pc);
    double mm = f->kv_c * (double)q->ctx + (f->k[tok] + f->state_r * r);
    if (f->win) {
        mc = mc + f->sl_p * (double)q->spairs;
        mm = mm + f->sl_c * (double)q->sctx;
    }
    double stage = dense + (mm > mc ? mm : mc);
    if (f->ar) stage = stage + f->ar[tok];
    stage = stage + f->layer_s;
    if (f->p2p) stage = stage + f->pm1 * (stage + f->p2p[tok]);
    if (f->asy && !idle) {
        double host = f->ov[0] + f->req_r * r;
        return (host > stage ? host : stage) + (f->ov[q->pre] - f->ov[0]);
    }
    return stage + (f->ov[q->pre] + f->req_r * r);
}

/* ------------------------------------------------------------ the simulation state */

enum { PENDING, WAITING, RUNNING, FINISHED, REJECTED };
enum { ANON = 0, OWN = 1, SHARED = 2 };
enum { G_FULL = 0, G_SLIDING = 1, G_STATE = 2 };

typedef struct {
    i64 n;
    /* in release order (requests reach the engine in it): engine arrival (closed loop: the
     * earliest send), request id, API delay (closed loop), send time (open loop), the API
     * server's serial admission time (closed loop) */
    const double *arrival, *delay, *send, *admit;
    const i64 *order;
    const i64 *prompt, *output;
    const uint8_t *reject;
    i64 *computed, *generated, *held, *preempts, *hits, *last_emit, *seg_start;
    int8_t *status;
    double *sent, *scheduled, *first, *finish;
    i64 budget, max_seqs, bs, bshift, usable, thr; /* bshift: log2(bs), or -1 */
    int chunked, caching, validate;
    /* KV cache groups, equal ones merged (core.py): kind (G_FULL, G_SLIDING, G_STATE),
     * window, pool blocks per block of tokens, bytes per token, state bytes */
    i64 ng, *gkind, *gwin, *gweight, *gbpt, *gstate;
    i64 full_bpt; /* every group full: their bytes per token summed; else -1 */
    int simple; /* one full group of weight 1: blocks = cdiv(tokens, bs) */
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
    /* cached copies of a key's block (BlockPool.copies; vLLM 0.11 keeps every copy): per
     * copy its key, holders, queued shared segment (or -1) and its key's list, in the order
     * cached; a key's first and last copy, -1 if none; evicted copies' ids are reused
     * (cfree: a list through c_next), so at most the pool's blocks are ever allocated */
    Buf c_key, c_ref, c_seg, c_prev, c_next;
    i64 *khead, *ktail, cfree;
    i64 *hk, *hk_n; /* r's held copies: hk[koff[r] ..], hk_n[r] of them */
    i64 *reg_next; /* r's next key index to register */
    /* plan scratch */
    i64 *p_id, *p_new, *p_ctx, np, p_query, p_hits; /* p_query, p_hits: its lookups */
    /* outputs */
    Buf st, en, used, logical, nrun_col, nwait_col, newtok, sreq, sfirst, slast, psteps;
    i64 query_tokens, lookup_hits, prefill_blocks, decode_blocks, ptr, done, step;
    i64 run_steps; /* steps taken in decode runs (_core_run.h) */
    i64 admit_peak; /* decode instance: most blocks in use right after an admission */
    double clock, next_s, next_send, api_free; /* api_free: the API server's next idle time */
    int oom;
    int idle; /* the engine is idle: its next step's host work is not hidden (_Loop.idle) */
    /* a disaggregated fleet's instance (_core_disagg.h; sim/disagg/compiled.py): mode 0
     * aggregated, 1 prefill (blocks kept after the one token until released), 2 decode */
    int mode;
    const double *rel_t; /* prefill: release times, in (time, request) order */
    const i64 *rel_r;
    i64 nrel, relp;
    i64 *pend, ph, pn;   /* decode: pending (FCFS ring of n) and ready (ring of n) */
    i64 *rdy, rh, rn;
    double *tr_t;        /* decode: transfers in flight, a min-heap on (end, request) */
    i64 *tr_r, ntr;
    const double *wire;  /* decode: each request's wire seconds, its prefill instance */
    const i64 *p_of;
    double lat, ingress, *egress;
    double *admit_s, *t_start, *t_end;
    uint8_t *starved;
} Sim;

/* ------------------------------------------------------------ a run's result (with the GIL) */

static PyObject *to_bytes(Buf *b, size_t item) {
    return PyByteArray_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)(b->n * (i64)item));
}

#define NCOL 7
/* the step series' seven columns (KvSeries) */
static Buf *column(Sim *m, int c) {
    Buf *b[NCOL] = {&m->st, &m->en, &m->used, &m->logical, &m->nrun_col, &m->nwait_col,
                    &m->newtok};
    return b[c];
}

/* core_run's result, its seven columns given (new references, NULL after an error) */
static PyObject *results_with(Sim *m, PyObject *col[NCOL]) {
    return Py_BuildValue("(NNNNNNNNNNNLLLdLLL)", col[0], col[1], col[2], col[3], col[4], col[5],
                         col[6], to_bytes(&m->sreq, 8), to_bytes(&m->sfirst, 8),
                         to_bytes(&m->slast, 8), to_bytes(&m->psteps, 8),
                         (long long)m->query_tokens, (long long)m->prefill_blocks,
                         (long long)m->decode_blocks, m->clock, (long long)m->run_steps,
                         (long long)m->admit_peak, (long long)m->lookup_hits);
}

static PyObject *results(Sim *m) {
    PyObject *col[NCOL];
    for (int c = 0; c < NCOL; c++) col[c] = to_bytes(column(m, c), 8);
    return results_with(m, col);
}
