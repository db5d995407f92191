/* kvplan.sim._core: one instance of a disaggregated fleet (sim/disagg/instances.py, run
 * pool by pool by sim/disagg/compiled.py); included by _core.c only.
 *
 *   mode 1, prefill: every request has output 1; when it samples that token it finishes and
 *           keeps its blocks until its release time (given, in (time, request) order:
 *           PrefillLoop._release); nothing running and the head's blocks held by finished
 *           requests: the instance waits for its next event (_Instance._no_step)
 *   mode 2, decode:  arrivals join a pending FCFS queue; the head gets blocks for its
 *           whole prompt when they fit (none waiting, a sequence slot free), its transfer
 *           is scheduled on the link (one decode instance: LinkQueues.schedule), and when it
 *           ends the request joins the running list with prompt - 1 tokens computed
 *           (DecodeLoop._release, _start_ready, _admit_pending)
 */

static int get_buf(PyObject *o, Py_buffer *v, i64 n, size_t item, int writable); /* _core.c */

/* ------------------------------------------------------------ transfers: (end, r) heap */

static int tr_less(double a, i64 ra, double b, i64 rb) { return a < b || (a == b && ra < rb); }

static void tr_push(Sim *m, double t, i64 r) {
    i64 i = m->ntr++;
    while (i > 0) {
        i64 p = (i - 1) / 2;
        if (!tr_less(t, r, m->tr_t[p], m->tr_r[p])) break;
        m->tr_t[i] = m->tr_t[p];
        m->tr_r[i] = m->tr_r[p];
        i = p;
    }
    m->tr_t[i] = t;
    m->tr_r[i] = r;
}

static void tr_pop(Sim *m) {
    i64 n = --m->ntr, i = 0;
    double t = m->tr_t[n];
    i64 r = m->tr_r[n];
    while (1) {
        i64 c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && tr_less(m->tr_t[c + 1], m->tr_r[c + 1], m->tr_t[c], m->tr_r[c])) c++;
        if (!tr_less(m->tr_t[c], m->tr_r[c], t, r)) break;
        m->tr_t[i] = m->tr_t[c];
        m->tr_r[i] = m->tr_r[c];
        i = c;
    }
    if (n) {
        m->tr_t[i] = t;
        m->tr_r[i] = r;
    }
}

/* ------------------------------------------------------------ prefill */

/* PrefillLoop._release, releases: -1 if one falls due before its request finished (the
 * release times were a guess that does not hold for this run) */
static int prefill_release(Sim *m) {
    while (m->relp < m->nrel && m->rel_t[m->relp] <= m->clock) {
        i64 r = m->rel_r[m->relp++];
        if (m->status[r] != FINISHED) return -1;
        sched_free(m, r, 0);
    }
    return 0;
}

/* ------------------------------------------------------------ decode */

/* DecodeLoop._start_ready: transferred requests join the running list */
static void start_ready(Sim *m) {
    while (m->rn && m->nrun < m->max_seqs) {
        i64 r = m->rdy[m->rh];
        m->rh = (m->rh + 1) % m->n;
        m->rn--;
        m->computed[r] = m->prompt[r] - 1;
        m->status[r] = RUNNING;
        m->scheduled[r] = m->clock;
        m->run[m->nrun++] = r;
    }
}

/* LinkQueues.schedule for one decode instance: r's transfer admitted at the clock */
static void link_schedule(Sim *m, i64 r) {
    i64 p = m->p_of[r];
    double start = m->clock;
    if (m->egress[p] > start) start = m->egress[p];
    if (m->ingress > start) start = m->ingress;
    double free = start + m->wire[r];
    m->egress[p] = free;
    m->ingress = free;
    m->t_start[r] = start;
    m->t_end[r] = free + m->lat;
    tr_push(m, m->t_end[r], r);
}

/* DecodeLoop._admit_pending: FCFS, the head's whole prompt or everyone behind it waits */
static void admit_pending(Sim *m) {
    while (m->pn && m->wn == 0 && m->nrun < m->max_seqs) {
        i64 r = m->pend[m->ph];
        i64 need = blocks_of(m, m->prompt[r], 0);
        if (need > m->free) {
            for (i64 i = 0; i < m->pn; i++) m->starved[m->pend[(m->ph + i) % m->n]] = 1;
            return;
        }
        m->ph = (m->ph + 1) % m->n;
        m->pn--;
        take(m, need);
        if (m->usable - m->free > m->admit_peak) m->admit_peak = m->usable - m->free;
        m->held[r] = need;
        m->prefill_blocks += need;
        m->admit_s[r] = m->clock;
        link_schedule(m, r);
    }
}

/* DecodeLoop._release after the inbox: ended transfers, ready requests, admissions */
static void decode_release(Sim *m) {
    while (m->ntr && m->tr_t[0] <= m->clock) {
        m->rdy[(m->rh + m->rn) % m->n] = m->tr_r[0];
        m->rn++;
        tr_pop(m);
    }
    if (m->rn && m->nrun < m->max_seqs) start_ready(m);
    admit_pending(m);
}

/* _Instance.next_event: the next arrival, release (prefill) or transfer end (decode) */
static double next_event(const Sim *m) {
    double t = m->next_s;
    if (m->mode == 1 && m->relp < m->nrel && m->rel_t[m->relp] < t) t = m->rel_t[m->relp];
    if (m->mode == 2 && m->ntr && m->tr_t[0] < t) t = m->tr_t[0];
    return t;
}

/* ------------------------------------------------------------ Python glue */

static int bind_prefill(Sim *m, PyObject *dis, Py_buffer *v) {
    PyObject *t, *r;
    const char *kind;
    if (!PyArg_ParseTuple(dis, "sOO", &kind, &t, &r)) return -1;
    m->nrel = PyObject_Length(t);
    if (m->nrel < 0 || get_buf(t, &v[0], m->nrel, 8, 0) < 0
        || get_buf(r, &v[1], m->nrel, 8, 0) < 0)
        return -1;
    m->rel_t = v[0].buf;
    m->rel_r = v[1].buf;
    for (i64 i = 0; i < m->nrel; i++) {
        if (m->rel_r[i] < 0 || m->rel_r[i] >= m->n) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: bad release request");
            return -1;
        }
    }
    m->mode = 1;
    return 0;
}

/* ("decode", wire, prefill_of, latency, egress, admitted, start, end, starved) */
static int bind_decode(Sim *m, PyObject *dis, Py_buffer *v) {
    PyObject *o[7];
    const char *kind;
    if (!PyArg_ParseTuple(dis, "sOOdOOOOO", &kind, &o[0], &o[1], &m->lat,
                          &o[2], &o[3], &o[4], &o[5], &o[6]))
        return -1;
    i64 np = PyObject_Length(o[2]);
    if (np < 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "kvplan core: no egress");
        return -1;
    }
    const i64 len[7] = {m->n, m->n, np, m->n, m->n, m->n, m->n};
    const size_t item[7] = {8, 8, 8, 8, 8, 8, 1};
    void *p[7];
    for (int i = 0; i < 7; i++) {
        if (get_buf(o[i], &v[i], len[i], item[i], i >= 2) < 0) return -1;
        p[i] = v[i].buf;
    }
    m->wire = p[0], m->p_of = p[1], m->egress = p[2], m->admit_s = p[3];
    m->t_start = p[4], m->t_end = p[5], m->starved = p[6];
    for (i64 r = 0; r < m->n; r++) {
        if (m->p_of[r] < 0 || m->p_of[r] >= np) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: bad prefill instance");
            return -1;
        }
    }
    m->mode = 2;
    return 0;
}

/* None (aggregated), ("prefill", ...) or ("decode", ...); v holds 7 buffers */
static int bind_disagg(Sim *m, PyObject *dis, Py_buffer *v) {
    if (dis == Py_None) return 0;
    if (m->closed || !PyTuple_Check(dis) || PyTuple_GET_SIZE(dis) < 1
        || !PyUnicode_Check(PyTuple_GET_ITEM(dis, 0))) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: bad disaggregated instance");
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(dis, 0), "prefill") == 0)
        return bind_prefill(m, dis, v);
    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(dis, 0), "decode") == 0)
        return bind_decode(m, dis, v);
    PyErr_SetString(PyExc_ValueError, "kvplan core: an instance is prefill or decode");
    return -1;
}

static int alloc_disagg(Sim *m) {
    if (m->mode != 2) return 0;
    size_t n = (size_t)(m->n ? m->n : 1);
    m->pend = malloc(sizeof(i64) * n);
    m->rdy = malloc(sizeof(i64) * n);
    m->tr_t = malloc(sizeof(double) * n);
    m->tr_r = malloc(sizeof(i64) * n);
    m->ingress = 0.0;
    return m->pend && m->rdy && m->tr_t && m->tr_r ? 0 : -1;
}
