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

/* the instances' step series joined, instance after instance (the client's view,
 * sim/disagg/result.py): each column one bytearray; NULL after an error */
static PyObject *join_columns(Run *rs, i64 y, i64 total) {
    PyObject *joined = PyTuple_New(NCOL);
    for (int c = 0; joined && c < NCOL; c++) {
        PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(total * 8));
        if (!b) {
            Py_CLEAR(joined);
            break;
        }
        char *dst = PyByteArray_AS_STRING(b);
        for (i64 i = 0; i < y; i++) {
            Buf *src = column(&rs[i].m, c);
            if (src->n) memcpy(dst, src->p, (size_t)(src->n * 8));
            dst += src->n * 8;
        }
        PyTuple_SET_ITEM(joined, c, b);
    }
    return joined;
}

/* instance i's result, its columns slices (memoryviews) of the joined ones from step off */
static PyObject *joined_result(Run *rs, i64 i, PyObject *joined, i64 off) {
    PyObject *col[NCOL];
    PyObject *a = PyLong_FromLongLong(off * 8);
    PyObject *b = PyLong_FromLongLong((off + rs[i].m.st.n) * 8);
    PyObject *cut = a && b ? PySlice_New(a, b, NULL) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    for (int c = 0; c < NCOL; c++) {
        PyObject *view = cut ? PyMemoryView_FromObject(PyTuple_GET_ITEM(joined, c)) : NULL;
        col[c] = view ? PyObject_GetItem(view, cut) : NULL;
        Py_XDECREF(view);
    }
    Py_XDECREF(cut);
    return results_with(&rs[i].m, col);
}

/* ([each instance's result], the joined columns) */
static PyObject *fleet_results(Run *rs, i64 y) {
    i64 total = 0;
    for (i64 i = 0; i < y; i++) total += rs[i].m.st.n;
    PyObject *joined = join_columns(rs, y, total), *list = joined ? PyList_New(y) : NULL;
    for (i64 i = 0, off = 0; list && i < y; off += rs[i++].m.st.n) {
        PyObject *got = joined_result(rs, i, joined, off);
        if (!got) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, got);
    }
    if (!list) {
        Py_XDECREF(joined);
        return NULL;
    }
    return Py_BuildValue("(NN)", list, joined);
}

/* run_decodes([args, ...]): each item core_run's arguments for one decode instance (their
 * egress arrays one array); ([core_run's result per instance], the seven step columns of
 * them all joined, instance after instance: fleet_results) */
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
        if (!loop_error(code)) out = fleet_results(rs, y);
    }
    for (i64 i = 0; i < opened; i++) run_unbind(&rs[i]);
    free(rs);
    return out;
}
