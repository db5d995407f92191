/* The simulator's optional compiled core: vLLM v1 scheduling rules, step by step, for every
 * KV layout kvplan models (full, sliding-window and state groups, MLA) and a timer priced
 * from a step's sums. See src/kvplan/sim/core.py and docs/simulator.md.
 *
 * It holds scheduling rules only: the step time is a fixed expression over tables and
 * scalars the timer computed in Python (kvplan.costs.step.batch.AggregateForm), evaluated with
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
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "_core_state.h"
#include "_core_pool.h"
#include "_core_disagg.h"
#include "_core_run.h"
#include "_core_sched.h"

/* ------------------------------------------------------------ Python glue */

#define NARR 20
static const char ARR_KIND[NARR] = {'f', 'i', 'i', 'b', 'i', 'i', 'i', 'c', 'f', 'f', 'f',
                                    'f', 'i', 'i', 'i', 'i', 'i', 'f', 'f', 'f'};

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

static void sim_free(Sim *m) {
    Buf *bufs[] = {&m->seg_kind, &m->seg_count, &m->seg_rid, &m->q, &m->st, &m->en, &m->used,
                   &m->logical, &m->nrun_col, &m->nwait_col, &m->newtok, &m->sreq, &m->sfirst,
                   &m->slast, &m->psteps, &m->c_key, &m->c_ref, &m->c_seg, &m->c_prev,
                   &m->c_next};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]->p);
    void *ps[] = {m->run, m->wq, m->heap, m->own, m->khead, m->ktail, m->hk, m->hk_n,
                  m->reg_next, m->p_id, m->p_new, m->p_ctx, m->pend, m->rdy, m->tr_t, m->tr_r};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
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
    m->khead = malloc(sizeof(i64) * (size_t)nk);
    m->ktail = malloc(sizeof(i64) * (size_t)nk);
    m->hk = malloc(sizeof(i64) * (size_t)tk);
    m->hk_n = calloc((size_t)n, sizeof(i64));
    m->reg_next = calloc((size_t)n, sizeof(i64));
    if (!m->run || !m->wq || !m->heap || !m->own || !m->p_id || !m->p_new || !m->p_ctx
        || !m->khead || !m->ktail || !m->hk || !m->hk_n || !m->reg_next)
        return -1;
    for (i64 r = 0; r < n; r++) m->own[r] = -1;
    for (i64 k = 0; k < nk; k++) m->khead[k] = m->ktail[k] = -1;
    m->cfree = -1;
    for (i64 i = 0; i < slots; i++) m->heap[i] = 0.0;
    m->nheap = slots;
    m->free = m->usable;
    if (new_seg(m, ANON, m->usable, -1) < 0) return -1;
    return 0;
}

#define FORM_LEN 24
static int parse_form(PyObject *form, Form *f, Py_buffer *tabs, i64 budget) {
    const double **dst[6] = {&f->g, &f->w, &f->s, &f->k, &f->ar, &f->p2p};
    double *sc[13] = {&f->lm_r, &f->attn_p, &f->kv_c, &f->state_r, &f->layer_s, &f->pm1,
                      &f->req_r, &f->ov[0], &f->ov[1], &f->sl_p, &f->sl_c, &f->mla_p,
                      &f->mla_c};
    if (!PyTuple_Check(form) || PyTuple_GET_SIZE(form) != FORM_LEN) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: the form is a 24-tuple");
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
    f->win = PyLong_AsLongLong(PyTuple_GET_ITEM(form, 16));
    for (int i = 9; i < 11; i++) *sc[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(form, 8 + i));
    f->mla = PyObject_IsTrue(PyTuple_GET_ITEM(form, 19));
    for (int i = 11; i < 13; i++) *sc[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(form, 9 + i));
    f->asy = PyObject_IsTrue(PyTuple_GET_ITEM(form, 22));
    if (PyErr_Occurred() || f->mla < 0 || f->asy < 0) return -1;
    PyObject *gq = PyTuple_GET_ITEM(form, 23); /* GDN: one sequence's time by its tokens */
    f->gq = NULL;
    if (gq != Py_None && get_buf(gq, &tabs[6], f->tmax + 1, 8, 0) < 0) return -1;
    if (gq != Py_None) f->gq = tabs[6].buf;
    if (f->win < 0) {
        PyErr_SetString(PyExc_ValueError, "kvplan core: a negative window");
        return -1;
    }
    return 0;
}

/* (kind, window, weight, bytes per token, state bytes): ng int64 arrays each */
static int bind_groups(Sim *m, PyObject *gt, Py_buffer *v) {
    PyObject *o[5];
    if (!PyArg_ParseTuple(gt, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return -1;
    m->ng = PyObject_Length(o[0]);
    if (m->ng < 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "kvplan core: no KV group");
        return -1;
    }
    i64 **dst[5] = {&m->gkind, &m->gwin, &m->gweight, &m->gbpt, &m->gstate};
    for (int i = 0; i < 5; i++) {
        if (get_buf(o[i], &v[i], m->ng, 8, 0) < 0) return -1;
        *dst[i] = v[i].buf;
    }
    for (i64 g = 0; g < m->ng; g++) {
        if (m->gkind[g] < G_FULL || m->gkind[g] > G_STATE || m->gweight[g] < 0
            || (m->gkind[g] == G_SLIDING && m->gwin[g] < 1)) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: bad KV group");
            return -1;
        }
    }
    m->full_bpt = 0;
    for (i64 g = 0; g < m->ng; g++)
        m->full_bpt = m->gkind[g] == G_FULL && m->full_bpt >= 0 ? m->full_bpt + m->gbpt[g] : -1;
    m->simple = m->ng == 1 && m->gkind[0] == G_FULL && m->gweight[0] == 1;
    return 0;
}

static void release_all(Py_buffer *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
}

static int bind_arrays(Sim *m, PyObject *arrs, Py_buffer *v) {
    if (!PyTuple_Check(arrs) || PyTuple_GET_SIZE(arrs) != NARR) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: expected a tuple of 20 arrays");
        return -1;
    }
    void *p[NARR];
    for (int i = 0; i < NARR; i++) {
        if (get_buf(PyTuple_GET_ITEM(arrs, i), &v[i], m->n, kind_size(ARR_KIND[i]),
                    i >= 4 && i < 16) < 0)
            return -1;
        p[i] = v[i].buf;
    }
    m->arrival = p[0], m->prompt = p[1], m->output = p[2], m->reject = p[3];
    m->computed = p[4], m->generated = p[5], m->held = p[6], m->status = p[7];
    m->sent = p[8], m->scheduled = p[9], m->first = p[10], m->finish = p[11];
    m->preempts = p[12], m->hits = p[13], m->last_emit = p[14], m->seg_start = p[15];
    m->order = p[16], m->delay = p[17], m->send = p[18], m->admit = p[19];
    for (i64 j = 0; j < m->n; j++) {
        if (m->order[j] < 0 || m->order[j] >= m->n) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: bad release order");
            return -1;
        }
    }
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

/* one run's state and the buffers it borrows from its arguments */
typedef struct {
    Sim m;
    Py_buffer v[NARR], tabs[7], kv[2], gv[5], dv[7];
    PyObject *progress;
} Run;

/* binds core_run's arguments to r and allocates its state: 0, or -1 with a Python error
 * set (run_unbind releases what was bound either way) */
static int run_bind(Run *r, PyObject *args) {
    PyObject *arrs, *kt, *gt, *form, *dis = Py_None;
    long long n, slots, budget, seqs, bs, thr, usable;
    int chunked, caching, validate;
    memset(r, 0, sizeof *r);
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: a run's arguments are a tuple");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOLLLLLLLpppOO|O", &arrs, &kt, &gt, &n, &slots, &budget,
                          &seqs, &bs, &thr, &usable, &chunked, &caching, &validate, &form,
                          &r->progress, &dis))
        return -1;
    if (n < 0 || slots < 0 || budget < 1 || seqs < 1 || bs < 1 || usable < 1) {
        PyErr_SetString(PyExc_ValueError, "kvplan core: bad limits");
        return -1;
    }
    Sim *m = &r->m;
    m->n = n, m->budget = budget, m->max_seqs = seqs, m->bs = bs, m->thr = thr;
    m->usable = usable;
    m->idle = 1; /* a run starts on an idle engine */
    m->bshift = (bs & (bs - 1)) == 0 ? __builtin_ctzll((unsigned long long)bs) : -1;
    m->chunked = chunked, m->caching = caching, m->validate = validate, m->closed = slots > 0;
    if (bind_arrays(m, arrs, r->v) < 0 || bind_keys(m, kt, r->kv) < 0
        || bind_groups(m, gt, r->gv) < 0 || parse_form(form, &m->f, r->tabs, budget) < 0
        || bind_disagg(m, dis, r->dv) < 0)
        return -1;
    if (sim_alloc(m, slots) < 0 || alloc_disagg(m) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    update_next(m);
    return 0;
}

static void run_unbind(Run *r) {
    sim_free(&r->m);
    release_all(r->v, NARR);
    release_all(r->tabs, 7);
    release_all(r->kv, 2);
    release_all(r->gv, 5);
    release_all(r->dv, 7);
}

static PyObject *core_run(PyObject *self, PyObject *args) {
    (void)self;
    Run *r = malloc(sizeof(Run));
    if (!r) return PyErr_NoMemory();
    PyObject *out = NULL;
    if (run_bind(r, args) == 0) {
        PyThreadState *ts = PyEval_SaveThread(); /* other threads run meanwhile */
        int code = loop(&r->m, r->progress, &ts);
        PyEval_RestoreThread(ts);
        if (code == LOOP_EARLY) { /* a fleet's release guess failed: the caller's call */
            out = Py_None;
            Py_INCREF(out);
        } else if (!loop_error(code)) {
            out = results(&r->m);
        }
    }
    run_unbind(r);
    free(r);
    return out;
}

#include "_core_fleet.h"

/* eval_steps(form, new, ctx, offsets, out): the step time of each batch b (requests
 * offsets[b] .. offsets[b + 1] of new/ctx), its sums taken as the core takes them (tests and
 * the run-time spot check compare it with the timer's step_time_s) */
static PyObject *core_eval(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *form, *o[4];
    if (!PyArg_ParseTuple(args, "OOOOO", &form, &o[0], &o[1], &o[2], &o[3])) return NULL;
    Form f;
    Py_buffer tabs[7], v[4];
    memset(tabs, 0, sizeof tabs);
    memset(v, 0, sizeof v);
    PyObject *ret = NULL;
    if (parse_form(form, &f, tabs, 0) < 0) goto done;
    Py_ssize_t n = PyObject_Length(o[0]), nb = PyObject_Length(o[3]);
    if (n < 0 || nb < 0) goto done;
    if (get_buf(o[0], &v[0], n, 8, 0) < 0 || get_buf(o[1], &v[1], n, 8, 0) < 0
        || get_buf(o[2], &v[2], nb + 1, 8, 0) < 0 || get_buf(o[3], &v[3], nb, 8, 1) < 0)
        goto done;
    const i64 *nw = v[0].buf, *cx = v[1].buf, *off = v[2].buf;
    double *out = v[3].buf;
    for (Py_ssize_t b = 0; b < nb; b++) {
        Sums q;
        memset(&q, 0, sizeof q);
        if (off[b] < 0 || off[b + 1] < off[b] || off[b + 1] > n) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: bad batch offsets");
            goto done;
        }
        for (i64 i = off[b]; i < off[b + 1]; i++) sums_add(&q, &f, nw[i], cx[i]);
        if (q.tok < 0 || q.tok > f.tmax) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: tokens outside the tables");
            goto done;
        }
        out[b] = step_time(&f, &q, 0);
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    release_all(tabs, 7);
    release_all(v, 4);
    return ret;
}

/* fifo_exits(sent, service, out): kvplan.sim.frontend.fifo_exits, S_k = max(sent_k, S_k-1)
 * + service_k in the loop's order of float operations */
static PyObject *core_fifo(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2])) return NULL;
    Py_buffer v[3];
    memset(v, 0, sizeof v);
    PyObject *ret = NULL;
    Py_ssize_t n = PyObject_Length(o[0]);
    if (n >= 0 && get_buf(o[0], &v[0], n, 8, 0) == 0 && get_buf(o[1], &v[1], n, 8, 0) == 0
        && get_buf(o[2], &v[2], n, 8, 1) == 0) {
        const double *t = v[0].buf, *s = v[1].buf;
        double *out = v[2].buf, free = 0.0;
        for (Py_ssize_t k = 0; k < n; k++) out[k] = free = (free > t[k] ? free : t[k]) + s[k];
        ret = Py_None;
        Py_INCREF(ret);
    }
    release_all(v, 3);
    return ret;
}

static PyMethodDef METHODS[] = {
    {"run", core_run, METH_VARARGS, "Run one simulation (kvplan.sim.core)."},
    {"run_decodes", core_run_decodes, METH_O,
     "Run a fleet's decode instances together (kvplan.sim.disagg.compiled)."},
    {"eval_steps", core_eval, METH_VARARGS, "Price batches with a step-time form."},
    {"fifo_exits", core_fifo, METH_VARARGS, "One FIFO server's exit times."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_core",
                                    "kvplan's optional compiled simulator core.", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

/* KVPLAN_CORE_ABI: bumped whenever the functions or core_run's arguments change; kvplan.sim.core ignores a
   build whose ABI differs (a stale extension falls back to the Python loop, never errs). */
#define KVPLAN_CORE_ABI 13

/* glibc gives a freed block of 128 KiB or more back to the kernel (munmap, or a trim of the
 * heap's top), so the next run's step columns (about 0.16 MB each per 20,000 steps), their
 * bytearrays and numpy's result arrays fault in zeroed pages afresh: a plan's ~500 runs
 * spent about a sixth of their CPU in the kernel doing so. Freed memory is kept for reuse
 * instead, up to HEAP_KEEP (only blocks above it are mapped on their own). */
#define HEAP_KEEP (64 << 20)
static void keep_freed_memory(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, HEAP_KEEP);
    mallopt(M_TRIM_THRESHOLD, 2 * HEAP_KEEP);
#endif
}

PyMODINIT_FUNC PyInit__core(void) {
    keep_freed_memory();
    PyObject *m = PyModule_Create(&MODULE);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", KVPLAN_CORE_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
