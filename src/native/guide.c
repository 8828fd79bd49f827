/* guide.c mirrors treekit._treedef.TreeDef._walk (the one guided walker) without keys: the
 * subtrees of a tree at a structure's leaves, the structure given as its post-order
 * records. As the Python walker, it takes the records in reverse (root first, last child
 * first) with an explicit stack of subtrees, so any depth works. A mismatch, or anything
 * unusual, returns DEFER: the Python walker walks again with keys and raises the one
 * message. */
#include "native.h"

/* The subtree found at a leaf of the structure: they come last leaf first, so the list (as
 * long as the root record's num_leaves) fills from its end. 0, or DEFER where the records
 * hold more leaves than their root says. Takes the reference to sub. */
static inline int put(PyObject *out, Py_ssize_t *at, PyObject *sub) {
    if (*at == 0) {
        Py_DECREF(sub);
        return DEFER;
    }
    PyList_SET_ITEM(out, --*at, sub);
    return 0;
}

/* 0 done (*out: a new list of the subtrees, in leaf order), DEFER, -1 error, or RAISED: the
 * flatten function of the subtree at record j raised exc, and *out is (j, exc) (a new tuple;
 * no exception set), for the Python walker to word without calling that function again.
 * `records`: a tuple of node records (the caller holds it; a tuple does not change, so its
 * items may be borrowed across user code); `strict`: a leaf of the structure needs a leaf
 * there too. */
int tk_up_to(PyObject *records, PyObject *tree, int strict, PyObject *is_leaf, PyObject **result) {
    *result = NULL;
    if (!PyTuple_CheckExact(records)) return DEFER;
    Py_ssize_t j = PyTuple_GET_SIZE(records);
    if (j == 0) return DEFER;
    PyObject *root = PyTuple_GET_ITEM(records, j - 1);
    if (!PyTuple_CheckExact(root) || PyTuple_GET_SIZE(root) != 5) return DEFER;
    Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(root, 3)); /* subtrees still to find */
    if (at < 0 || at > j) { /* not a count of leaves these records can hold */
        PyErr_Clear();
        return DEFER;
    }
    PyObject *out = PyList_New(at); /* its items NULL until found (a list frees those) */
    if (out == NULL) return -1;
    PyObject_GC_UnTrack(out); /* out of gc.get_objects()'s reach while it holds NULLs */
    Ctx ctx;
    if (tk_ctx_open(&ctx, 0) < 0) {
        Py_DECREF(out);
        return -1;
    }
    Py_ssize_t cap = 64, top = 0;
    PyObject **stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)cap); /* owned references */
    int rc = -1;
    if (stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_INCREF(tree);
    stack[top++] = tree;
    while (j) {
        j--;
        if (top == 0) goto defer; /* records that hold more nodes than their root says */
        PyObject *record = PyTuple_GET_ITEM(records, j);
        if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 5) goto defer;
        PyObject *want = PyTuple_GET_ITEM(record, 0);
        PyObject *sub = stack[--top]; /* owned */
        if (want == Py_None && !strict && is_leaf == NULL) { /* any subtree goes at a leaf */
            if (put(out, &at, sub) != 0) goto defer;
            continue;
        }
        PyObject *got = NULL, *owned = NULL;
        if (is_leaf != NULL) {
            PyObject *r = PyObject_CallOneArg(is_leaf, sub);
            /* -2: an answer other than True, False or None (the Python walker finds its key path
             * and raises jax's error); -1: it raised, and its exception goes on as it is */
            int stop = r == NULL ? -1 : r == Py_True ? 1 : (r == Py_False || r == Py_None) ? 0 : -2;
            Py_XDECREF(r);
            tk_forget(&ctx);
            if (stop < 0) {
                Py_DECREF(sub);
                if (stop == -2) goto defer;
                goto done;
            }
            if (stop) got = Py_None;
        }
        if (got == NULL) {
            got = tk_memo_lookup(&ctx, sub, &owned); /* (an error here is the registry's, or a hash's: as it is) */
            if (got == NULL) {
                Py_DECREF(sub);
                goto done;
            }
        }
        if (want == Py_None) {
            Py_XDECREF(owned);
            if (strict && got != Py_None) { /* a node where a leaf is wanted */
                Py_DECREF(sub);
                goto defer;
            }
            if (put(out, &at, sub) != 0) goto defer;
            continue;
        }
        if (got != want) {
            Py_XDECREF(owned);
            Py_DECREF(sub);
            goto defer;
        }
        PyObject *kids, *data, *keys;
        int how = tk_flatten_node(&ctx, sub, got, 0, &kids, &data, &keys);
        Py_XDECREF(owned);
        if (how == RAISED) {
            PyObject *type, *exc, *tb;
            PyErr_Fetch(&type, &exc, &tb);
            PyErr_NormalizeException(&type, &exc, &tb);
            if (tb != NULL && exc != NULL) PyException_SetTraceback(exc, tb);
            *result = exc == NULL ? NULL : Py_BuildValue("(nO)", j, exc);
            Py_XDECREF(type);
            Py_XDECREF(exc);
            Py_XDECREF(tb);
            Py_DECREF(sub);
            if (*result == NULL) goto done;
            rc = RAISED;
            goto done;
        }
        if (how != 0) {
            Py_DECREF(sub);
            if (how == DEFER) goto defer;
            goto done;
        }
        Py_ssize_t arity = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2));
        Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
        int same = arity == n;
        if (same && data != PyTuple_GET_ITEM(record, 1)) {
            /* True or False, or the Python walker decides (treekit._treedef.same_node_data: an
             * array's ==, a numpy bool_, an __eq__ that raises) */
            PyObject *eq = PyObject_RichCompare(data, PyTuple_GET_ITEM(record, 1), Py_EQ);
            same = eq == Py_True ? 1 : eq == Py_False ? 0 : -1;
            Py_XDECREF(eq);
            tk_forget(&ctx); /* node data's __eq__ may be Python code, which may change a list `kids` */
            if (same > 0 && PySequence_Fast_GET_SIZE(kids) != n) same = 0;
        }
        Py_DECREF(data);
        if (same <= 0) {
            Py_DECREF(kids);
            Py_DECREF(sub);
            if (PyErr_Occurred() && !tk_defer_error()) goto done; /* (KeyboardInterrupt, ...: as it is) */
            goto defer;
        }
        Py_ssize_t num_leaves = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 3));
        Py_ssize_t num_nodes = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 4));
        if (num_leaves < 0 || num_nodes < 0 || arity > j) {
            PyErr_Clear();
            Py_DECREF(kids);
            Py_DECREF(sub);
            goto defer;
        }
        if (!strict && num_leaves == arity && arity == num_nodes - 1) {
            /* Every child is a leaf (wide lists, dicts of arrays): take them as they are. */
            int bad = 0;
            for (Py_ssize_t k = n - 1; !bad && k >= 0; k--) {
                PyObject *kid = PySequence_Fast_GET_ITEM(kids, k);
                Py_INCREF(kid);
                bad = put(out, &at, kid);
            }
            j -= arity;
            Py_DECREF(kids);
            Py_DECREF(sub);
            if (bad) goto defer;
            continue;
        }
        if (top + n > cap) {
            Py_ssize_t more = 2 * (top + n);
            PyObject **bigger = PyMem_Realloc(stack, sizeof(PyObject *) * (size_t)more);
            if (bigger == NULL) {
                PyErr_NoMemory();
                Py_DECREF(kids);
                Py_DECREF(sub);
                goto done;
            }
            stack = bigger;
            cap = more;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *kid = PySequence_Fast_GET_ITEM(kids, k);
            Py_INCREF(kid);
            stack[top++] = kid;
        }
        Py_DECREF(kids);
        Py_DECREF(sub);
    }
    if (top != 0 || at != 0) goto defer; /* at != 0: fewer leaves than the root record says */
    rc = 0;
    PyObject_GC_Track(out);
    *result = out;
    out = NULL;
    goto done;
defer:
    rc = DEFER;
done:
    for (Py_ssize_t k = 0; k < top; k++) Py_DECREF(stack[k]);
    PyMem_Free(stack);
    Py_XDECREF(out);
    tk_ctx_close(&ctx);
    return rc;
}
