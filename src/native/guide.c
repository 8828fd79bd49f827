/* guide.c mirrors treekit.core._guide.guide (the one guided walker) without keys: the
 * subtrees of a tree at a structure's leaves, the structure given as its post-order
 * records. As the Python walker, it takes the records in reverse (root first, last child
 * first) with an explicit stack of subtrees, so any depth works. A mismatch, or anything
 * unusual, returns TK_DEFER: the Python walker walks again with keys and raises the one
 * message. */
#include "guide.h"

typedef struct {
    PyObject *records; /* borrowed: an exact tuple (its items may be borrowed across user code) */
    PyObject *is_leaf; /* borrowed or NULL */
    int strict;
    Ctx ctx;
    PyObject *out;    /* owned: the subtrees found, filled from its end (NULL items until found) */
    Py_ssize_t at;    /* subtrees still to find */
    PyObject **stack; /* owned references: the subtrees still to walk */
    Py_ssize_t top, cap;
} Guide;

/* The subtree found at a leaf of the structure: they come last leaf first, so the list (as
 * long as the root record's num_leaves) fills from its end. TK_OK, or TK_DEFER where the
 * records hold more leaves than their root says. Steals a reference to sub. */
static inline tk_status put(Guide *g, PyObject *sub) {
    if (g->at == 0) {
        Py_DECREF(sub);
        return TK_DEFER;
    }
    PyList_SET_ITEM(g->out, --g->at, sub);
    return TK_OK;
}

/* Room on the stack for n more: 0, or -1 with an exception. */
static int reserve(Guide *g, Py_ssize_t n) {
    if (g->top + n <= g->cap) return 0;
    Py_ssize_t more = 2 * (g->top + n);
    PyObject **bigger = PyMem_Realloc(g->stack, sizeof(PyObject *) * (size_t)more);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    g->stack = bigger;
    g->cap = more;
    return 0;
}

/* The entry to match `sub` against record j's node type `want` (Py_None: a leaf): is_leaf
 * asked first. Return value: Borrowed reference (*owned: a new reference to release, where
 * set), Py_None for a leaf; NULL with *how TK_DEFER (is_leaf answered another thing than True,
 * False or None: the Python walker finds its key path and raises jax's error) or TK_ERROR. */
static PyObject *entry_of(Guide *g, PyObject *sub, PyObject **owned, tk_status *how) {
    *owned = NULL;
    *how = TK_ERROR;
    if (g->is_leaf != NULL) {
        PyObject *r = PyObject_CallOneArg(g->is_leaf, sub);
        int stop = r == NULL ? -1 : r == Py_True ? 1 : (r == Py_False || r == Py_None) ? 0 : -2;
        Py_XDECREF(r);
        tk_forget(&g->ctx);
        if (stop < 0) {
            if (stop == -2) *how = TK_DEFER; /* (-1: it raised, and its exception goes on as it is) */
            return NULL;
        }
        if (stop) return Py_None;
    }
    return tk_memo_lookup(&g->ctx, sub, owned); /* (an error here is the registry's, or a hash's: as it is) */
}

/* Do node data `data` and the record's agree (as treekit.core._treedef.same_node_data)? 1, 0, or
 * -1: neither True nor False (an array's ==, a numpy bool_, an __eq__ that raises: the Python
 * walker decides); an exception may be set. n: the children's count, `kids` read again after
 * the node data's __eq__ (Python code, which may change a list `kids`). */
static int same_data(Guide *g, PyObject *data, PyObject *expected, PyObject *kids, Py_ssize_t n) {
    if (data == expected) return 1;
    PyObject *eq = PyObject_RichCompare(data, expected, Py_EQ);
    int same = eq == Py_True ? 1 : eq == Py_False ? 0 : -1;
    Py_XDECREF(eq);
    tk_forget(&g->ctx);
    if (same > 0 && PySequence_Fast_GET_SIZE(kids) != n) same = 0;
    return same;
}

/* Record j's node, `sub` found there with entry `got` (== the record's): its children
 * matched against the records below, stacked or (all leaves) put. *j moves past the
 * records of the children put. Steals a reference to sub. */
static tk_status expand(Guide *g, PyObject *record, Py_ssize_t *j, PyObject *sub, PyObject *got) {
    PyObject *kids, *data, *keys;
    tk_status how = tk_flatten_node(&g->ctx, sub, got, 0, &kids, &data, &keys);
    if (how == TK_RAISED) {
        PyObject *raised = tk_fetch_raised(*j);
        Py_DECREF(sub);
        if (raised == NULL) return TK_ERROR;
        Py_XSETREF_COMPAT(g->out, raised); /* (the subtrees found so far are dropped) */
        return TK_RAISED;
    }
    if (how != TK_OK) {
        Py_DECREF(sub);
        return how;
    }
    Py_ssize_t arity = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2));
    Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
    int same = arity == n ? same_data(g, data, PyTuple_GET_ITEM(record, 1), kids, n) : 0;
    Py_DECREF(data);
    Py_ssize_t num_leaves = same > 0 ? PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 3)) : -1;
    Py_ssize_t num_nodes = same > 0 ? PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 4)) : -1;
    if (same <= 0 || num_leaves < 0 || num_nodes < 0 || arity > *j) {
        Py_DECREF(kids);
        Py_DECREF(sub);
        if (same <= 0 && PyErr_Occurred()) return tk_defer_error(); /* (KeyboardInterrupt, ...: as it is) */
        PyErr_Clear();
        return TK_DEFER;
    }
    how = TK_OK;
    if (!g->strict && num_leaves == arity && arity == num_nodes - 1) {
        /* Every child is a leaf (wide lists, dicts of arrays): take them as they are. */
        for (Py_ssize_t k = n - 1; how == TK_OK && k >= 0; k--) {
            PyObject *kid = PySequence_Fast_GET_ITEM(kids, k);
            Py_INCREF(kid);
            how = put(g, kid);
        }
        *j -= arity;
    } else if (reserve(g, n) < 0) {
        how = TK_ERROR;
    } else {
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *kid = PySequence_Fast_GET_ITEM(kids, k);
            Py_INCREF(kid);
            g->stack[g->top++] = kid;
        }
    }
    Py_DECREF(kids);
    Py_DECREF(sub);
    return how;
}

/* Record j against the subtree on top of the stack. */
static tk_status step(Guide *g, Py_ssize_t *j) {
    if (g->top == 0) return TK_DEFER; /* records that hold more nodes than their root says */
    PyObject *record = PyTuple_GET_ITEM(g->records, *j);
    if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 5) return TK_DEFER;
    PyObject *want = PyTuple_GET_ITEM(record, 0);
    PyObject *sub = g->stack[--g->top]; /* owned */
    if (want == Py_None && !g->strict && g->is_leaf == NULL) return put(g, sub); /* any subtree goes at a leaf */
    PyObject *owned;
    tk_status how;
    PyObject *got = entry_of(g, sub, &owned, &how);
    if (got == NULL) {
        Py_DECREF(sub);
        return how;
    }
    if (want == Py_None) {
        Py_XDECREF(owned);
        if (g->strict && got != Py_None) { /* a node where a leaf is wanted */
            Py_DECREF(sub);
            return TK_DEFER;
        }
        return put(g, sub);
    }
    if (got != want) {
        Py_XDECREF(owned);
        Py_DECREF(sub);
        return TK_DEFER;
    }
    how = expand(g, record, j, sub, got);
    Py_XDECREF(owned);
    return how;
}

tk_status tk_guide(PyObject *records, PyObject *tree, int strict, PyObject *is_leaf, PyObject **result) {
    *result = NULL;
    if (!PyTuple_CheckExact(records)) return TK_DEFER;
    Py_ssize_t j = PyTuple_GET_SIZE(records);
    if (j == 0) return TK_DEFER;
    PyObject *root = PyTuple_GET_ITEM(records, j - 1);
    if (!PyTuple_CheckExact(root) || PyTuple_GET_SIZE(root) != 5) return TK_DEFER;
    Guide g = {records, is_leaf, strict};
    g.at = PyLong_AsSsize_t(PyTuple_GET_ITEM(root, 3));
    if (g.at < 0 || g.at > j) { /* not a count of leaves these records can hold */
        PyErr_Clear();
        return TK_DEFER;
    }
    g.out = PyList_New(g.at); /* its items NULL until found (a list frees those) */
    if (g.out == NULL) return TK_ERROR;
    PyObject_GC_UnTrack(g.out); /* out of gc.get_objects()'s reach while it holds NULLs */
    tk_status how = TK_ERROR;
    if (tk_ctx_open(&g.ctx, 0) < 0) goto done;
    g.ctx.keep_data = 0;
    g.cap = 64;
    g.stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)g.cap);
    if (g.stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_INCREF(tree);
    g.stack[g.top++] = tree;
    how = TK_OK;
    while (how == TK_OK && j) {
        j--;
        how = step(&g, &j);
    }
    if (how == TK_OK && (g.top != 0 || g.at != 0)) how = TK_DEFER; /* at != 0: fewer leaves than the root says */
    if (how == TK_OK) PyObject_GC_Track(g.out);
    if (how == TK_OK || how == TK_RAISED) {
        *result = g.out;
        g.out = NULL;
    }
done:
    for (Py_ssize_t k = 0; k < g.top; k++) Py_DECREF(g.stack[k]);
    PyMem_Free(g.stack);
    Py_XDECREF(g.out);
    tk_ctx_close(&g.ctx);
    return how;
}
