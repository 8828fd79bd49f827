/* records.c mirrors the node records treekit.core._traverse.flatten adds (`add_node`, in
 * post-order) and TreeDef.__init__, which keeps them; and the node data a dataclass entry's
 * flatten makes (treekit.core._register.dataclass_entry: the tuple of the meta fields). */
#include "records.h"

#define FIRST_CAP 256

int tk_buf_push(Buf *b, PyObject *x) {
    if (b->n == b->cap) {
        Py_ssize_t cap = 0;
        PyObject **spare = b->items == NULL ? tk_spare_buffer_take(&cap) : NULL; /* the last array freed */
        if (spare != NULL) {
            b->items = spare;
            b->cap = cap;
        } else {
            cap = b->cap ? 2 * b->cap : FIRST_CAP;
            PyObject **more = PyMem_Realloc(b->items, sizeof(PyObject *) * (size_t)cap);
            if (more == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            b->items = more;
            b->cap = cap;
        }
    }
    Py_INCREF(x);
    b->items[b->n++] = x;
    return 0;
}

void tk_buf_clear(Buf *b) {
    for (Py_ssize_t k = 0; k < b->n; k++) Py_DECREF(b->items[k]);
    if (b->items != NULL && !tk_spare_buffer_give(b->items, b->cap)) PyMem_Free(b->items);
    b->items = NULL;
    b->n = b->cap = 0;
}

PyObject *tk_buf_tuple(Buf *b) {
    PyObject *out = PyTuple_New(b->n);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < b->n; k++) PyTuple_SET_ITEM(out, k, b->items[k]); /* the buffer's references */
    b->n = 0;
    tk_buf_clear(b);
    return out;
}

void tk_records_clear(Records *r) {
    for (int k = 0; k < RECORDS; k++)
        if (r->used >> k & 1) Py_DECREF(r->slot[k].record);
    r->used = 0;
}

/* (ntype, data, arity, num_leaves, num_nodes), the counts shared (cache.h).
 * Return value: New reference; NULL with an exception. */
static PyObject *new_record(PyObject *ntype, PyObject *data, Py_ssize_t arity, Py_ssize_t num_leaves,
                            Py_ssize_t num_nodes) {
    PyObject *record = PyTuple_New(5);
    if (record == NULL) return NULL;
    Py_INCREF(ntype);
    PyTuple_SET_ITEM(record, 0, ntype);
    Py_INCREF(data);
    PyTuple_SET_ITEM(record, 1, data);
    PyObject *a = tk_count(arity), *l = a ? tk_count(num_leaves) : NULL, *n = l ? tk_count(num_nodes) : NULL;
    if (n == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(l);
        Py_DECREF(record);
        return NULL;
    }
    PyTuple_SET_ITEM(record, 2, a);
    PyTuple_SET_ITEM(record, 3, l);
    PyTuple_SET_ITEM(record, 4, n);
    return record;
}

/* Whether v is a small immutable value that refers to nothing: an exact str, int, float,
 * bool, complex or None (what a dataclass's static fields hold: names, sizes, flags). */
static int small_value(PyObject *v) {
    return v == Py_None || PyUnicode_CheckExact(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
           PyBool_Check(v) || PyComplex_CheckExact(v);
}

/* Whether data is node data a walk may keep (tk_kept_data makes it): an untracked exact tuple
 * of at most TK_KEPT_META small values. Holding it holds nothing else of the user's. */
static int keepable(PyObject *data) {
    if (!PyTuple_CheckExact(data) || PyTuple_GET_SIZE(data) > TK_KEPT_META || PyObject_GC_IsTracked(data)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(data); i++)
        if (!small_value(PyTuple_GET_ITEM(data, i))) return 0;
    return 1;
}

/* Whether slot m's record (not NULL) is (ntype, data, arity, num_leaves, num_nodes). */
static int holds(const tk_made *m, PyObject *ntype, PyObject *data, Py_ssize_t arity, Py_ssize_t num_leaves,
                 Py_ssize_t num_nodes) {
    return PyTuple_GET_ITEM(m->record, 0) == ntype && PyTuple_GET_ITEM(m->record, 1) == data && m->arity == arity &&
           m->num_leaves == num_leaves && m->num_nodes == num_nodes;
}

/* Put `record` in slot m (stealing a reference to it), dropping `old`, what the slot held (or
 * NULL) as it is now: a walk, or a clear, in code run while the record was made may have
 * changed it. */
static void put(tk_made *m, PyObject *old, PyObject *record, Py_ssize_t arity, Py_ssize_t num_leaves,
                Py_ssize_t num_nodes) {
    m->record = record;
    m->arity = arity;
    m->num_leaves = num_leaves;
    m->num_nodes = num_nodes;
    Py_XDECREF(old);
}

int tk_add_record(Buf *nodes, Records *made, PyObject *ntype, PyObject *data, Py_ssize_t arity,
                  Py_ssize_t num_leaves, Py_ssize_t num_nodes) {
    uintptr_t h = ((uintptr_t)ntype >> 4) * 31u + ((uintptr_t)data >> 4) * 17u + (uintptr_t)arity * 7u +
                  (uintptr_t)num_leaves * 3u + (uintptr_t)num_nodes;
    unsigned at = 0;
    tk_made *m;
    int held, shared = data == Py_None && (ntype == tk_state.LIST || ntype == tk_state.TUPLE || ntype == tk_state.NONE);
    if (shared) {
        m = tk_shared_record(h);
        held = m->record != NULL;
    } else {
        at = (unsigned)((h ^ (h >> 7)) % RECORDS);
        m = &made->slot[at];
        held = (int)(made->used >> at & 1);
    }
    if (held && holds(m, ntype, data, arity, num_leaves, num_nodes)) return tk_buf_push(nodes, m->record);
    /* a dataclass node's node data kept from walk to walk (tk_kept_data): its record is kept too */
    int kept = !shared && keepable(data);
    tk_made *k = kept ? tk_node_record(h) : NULL;
    if (kept && k->record != NULL && holds(k, ntype, data, arity, num_leaves, num_nodes))
        return tk_buf_push(nodes, k->record);
    PyObject *record = new_record(ntype, data, arity, num_leaves, num_nodes);
    if (record == NULL) return -1;
    int rc = tk_buf_push(nodes, record);
    if (kept) {
        Py_INCREF(record);
        put(k, k->record, record, arity, num_leaves, num_nodes);
    }
    PyObject *old = shared || made->used >> at & 1 ? m->record : NULL;
    if (!shared) made->used |= (uint64_t)1 << at;
    put(m, old, record, arity, num_leaves, num_nodes); /* the reference made above; the walk's own
                                                         are in `nodes` too; a shared one holds no user object */
    return rc;
}

/* A dataclass node's node data: the tuple of its meta fields' values (fields: the entry's
 * dataclass_fields, at most TK_KEPT_META meta names), the very tuple of the walk before where
 * those values are the same objects, each a small value that refers to nothing (cache.h). */
tk_status tk_kept_data(PyObject *node, PyObject *fields, int keep, PyObject **data) {
    PyObject *names = PyTuple_GET_ITEM(fields, 1), *v[TK_KEPT_META];
    Py_ssize_t n = PyTuple_GET_SIZE(names), got = 0;
    int atomic = 1;
    uintptr_t h = (uintptr_t)fields >> 4;
    for (; got < n; got++) {
        if ((v[got] = PyObject_GetAttr(node, PyTuple_GET_ITEM(names, got))) == NULL) break;
        atomic = atomic && small_value(v[got]);
        h = h * 1000003u ^ ((uintptr_t)v[got] >> 4);
    }
    if (got < n) {
        for (Py_ssize_t i = 0; i < got; i++) Py_DECREF(v[i]);
        return PyErr_ExceptionMatches(PyExc_Exception) ? TK_RAISED : TK_ERROR;
    }
    tk_node_data *slot = tk_node_data_slot(h);
    int same = atomic && slot->fields == fields && slot->data != NULL && PyTuple_GET_SIZE(slot->data) == n;
    for (Py_ssize_t i = 0; same && i < n; i++) same = PyTuple_GET_ITEM(slot->data, i) == v[i];
    if (same) {
        *data = slot->data;
        Py_INCREF(*data);
        for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(v[i]);
        return TK_OK;
    }
    PyObject *made = PyTuple_New(n);
    if (made == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(v[i]);
        return TK_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(made, i, v[i]); /* the references above */
    if (atomic) PyObject_GC_UnTrack(made); /* (in no cycle: its items refer to nothing) */
    if (atomic && keep) { /* the slot as it is now (the collection a tuple's making may run empties it) */
        PyObject *old_fields = slot->fields, *old_data = slot->data;
        Py_INCREF(fields);
        Py_INCREF(made);
        slot->fields = fields;
        slot->data = made;
        Py_XDECREF(old_fields);
        Py_XDECREF(old_data);
    }
    *data = made;
    return TK_OK;
}

PyObject *tk_treedef(PyObject *records) {
    if (!tk_state.plain_treedef) return PyObject_CallOneArg(tk_state.TreeDef, records);
    /* TreeDef(records) without running __init__: its three slots, as __init__ sets them */
    PyTypeObject *tp = (PyTypeObject *)tk_state.TreeDef;
    PyObject *treedef = tp->tp_alloc(tp, 0);
    if (treedef == NULL) return NULL;
    if (PyObject_GenericSetAttr(treedef, tk_state.s_nodes, records) < 0 ||
        PyObject_GenericSetAttr(treedef, tk_state.s_hash, Py_None) < 0 ||
        PyObject_GenericSetAttr(treedef, tk_state.s_builder, Py_None) < 0) {
        Py_DECREF(treedef);
        return NULL;
    }
    return treedef;
}
