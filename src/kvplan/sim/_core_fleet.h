/* kvplan.sim._core: a disaggregated fleet's decode instances run together (sim/disagg/
 * compiled.py); included by _core.c only, after core_run.
 *
 * With the prefill pool's finish times fixed, each decode instance's arrivals are known;
 * the instances meet only on the link: a transfer holds its prefill instance's egress NICs,
 * which every decode instance shares (LinkQueues.schedule). An instance admits only at the
 * clock of one of its loop's passes (_Instance.turn's _release), and the Python fleet
 * (fleet._Fleet.run) runs turns in time order, ties to the lowest decode instance. So the
 * instances here take passes in that order - the earliest clock first, ties to the lowest
 * index - over one shared egress array: every transfer queues behind every admission
 * before it, as in the fleet. A pass never waits on another instance (a decode run ends
 * at the instance's own next event), so each pass is exactly the one it takes alone.
 */

/* the instances' loops, pass by pass in the fleet's order */
static int loop_decodes(Run *rs, i64 y) {
    char *done = calloc((size_t)(y ? y : 1), 1);
    if (!done) return LOOP_NOMEM;
    int code = LOOP_OK;
    while (code == LOOP_OK) {
        i64 d = -1;
        for (i64 i = 0; i < y; i++)
            if (!done[i] && (d < 0 || rs[i].m.clock < rs[d].m.clock)) d = i;
        if (d < 0) break;
        code = loop_once(&rs[d].m, RUN_MAX);
        if (code == LOOP_MORE) {
            code = LOOP_OK;
        } else if (code == LOOP_OK) {
            done[d] = 1;
            code = loop_end(&rs[d].m);
        }
    }
    free(done);
    return code;
}

/* run_decodes([args, ...]): each item core_run's arguments for one decode instance (their
 * egress arrays one array); a list of core_run's results */
static PyObject *core_run_decodes(PyObject *self, PyObject *items) {
    (void)self;
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "kvplan core: run_decodes takes a list");
        return NULL;
    }
    i64 y = PyList_GET_SIZE(items), opened = 0;
    Run *rs = calloc((size_t)(y ? y : 1), sizeof(Run));
    if (!rs) return PyErr_NoMemory();
    PyObject *out = NULL;
    int ok = 1;
    for (; opened < y && ok; opened++) {
        ok = run_bind(&rs[opened], PyList_GET_ITEM(items, opened)) == 0;
        if (ok && rs[opened].m.mode != 2) {
            PyErr_SetString(PyExc_ValueError, "kvplan core: run_decodes runs decode instances");
            ok = 0;
        }
    }
    if (ok) {
        PyThreadState *ts = PyEval_SaveThread();
        int code = loop_decodes(rs, y);
        PyEval_RestoreThread(ts);
        if (!loop_error(code)) out = PyList_New(y);
        for (i64 i = 0; out && i < y; i++) {
            PyObject *got = results(&rs[i].m);
            if (!got) Py_CLEAR(out);
            else PyList_SET_ITEM(out, i, got);
        }
    }
    for (i64 i = 0; i < opened; i++) run_unbind(&rs[i]);
    free(rs);
    return out;
}
