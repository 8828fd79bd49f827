/* walk.c mirrors treekit._traverse.flatten (the one building walker): a tree to its leaves,
 * its post-order node records and, with paths, each leaf's key path. Iterative: the
 * ancestors of the current node live in a growable array of frames, never on the C stack.
 * Lists, tuples, dicts and None are read here; every other node type through its NodeType's
 * flatten function, as the pure core does. Anything unusual returns DEFER (see native.h). */
#include "native.h"

typedef struct {
    PyObject *node;     /* owned */
    PyObject *ntype;    /* owned */
    PyObject *data;     /* owned */
    PyObject *children; /* owned: a list or a tuple */
    PyObject *keys;     /* owned or NULL: a list or a tuple of key entries (with paths) */
    Py_ssize_t n, i, leaf_start, node_start;
} Frame;

static void frame_clear(Frame *f) {
    Py_CLEAR(f->node);
    Py_CLEAR(f->ntype);
    Py_CLEAR(f->data);
    Py_CLEAR(f->children);
    Py_CLEAR(f->keys);
}

/* Whether a node on the path (frames 1..depth-1, then child) is its own ancestor: the
 * pointers are sorted and neighbours compared. -1 on memory failure. */
static int has_cycle(Frame *frames, Py_ssize_t depth, PyObject *child);

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(PyObject *const *)a, y = (uintptr_t)*(PyObject *const *)b;
    return x < y ? -1 : x > y;
}

static int has_cycle(Frame *frames, Py_ssize_t depth, PyObject *child) {
    PyObject **ids = PyMem_Malloc(sizeof(PyObject *) * (size_t)(depth + 1));
    if (ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 1; k < depth; k++) ids[m++] = frames[k].node;
    ids[m++] = child;
    qsort(ids, (size_t)m, sizeof(PyObject *), cmp_ptr);
    int found = 0;
    for (Py_ssize_t k = 1; k < m; k++) {
        if (ids[k] == ids[k - 1]) {
            found = 1;
            break;
        }
    }
    PyMem_Free(ids);
    return found;
}

/* A dict's children and node data as treekit._registry._flatten_dict gives them, for a
 * dict whose keys are inserted sorted (node data: the key tuple) or whose insertion order
 * has a shared `_Keys` in ORDERS made from these very key objects. 0 done (*kids, *data
 * new references), DEFER (let the dict entry's flatten function do it), -1 error. */
static int flatten_dict(PyObject *d, PyObject *orders, PyObject **kids, PyObject **data) {
    Py_ssize_t n = PyDict_GET_SIZE(d), pos = 0, k = 0;
    PyObject *key, *value;
    PyObject *keys = PyTuple_New(n);
    if (keys == NULL) return -1;
    PyObject *values = PyList_New(n);
    if (values == NULL) {
        Py_DECREF(keys);
        return -1;
    }
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (k >= n) break; /* cannot happen: no Python code runs in this loop */
        Py_INCREF(key);
        PyTuple_SET_ITEM(keys, k, key);
        Py_INCREF(value);
        PyList_SET_ITEM(values, k, value);
        k++;
    }
    if (k != n) goto defer;
    int sorted = 1;
    for (Py_ssize_t j = 1; j < n; j++) {
        PyObject *a = PyTuple_GET_ITEM(keys, j - 1), *b = PyTuple_GET_ITEM(keys, j);
        int less;
        if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) {
            less = PyUnicode_Compare(b, a) < 0;
        } else {
            less = PyObject_RichCompareBool(b, a, Py_LT);
            if (less < 0) { /* keys that do not compare: sort_keys's order */
                PyErr_Clear();
                goto defer;
            }
        }
        if (less) {
            sorted = 0;
            break;
        }
    }
    if (sorted) {
        *kids = values;
        *data = keys;
        return 0;
    }
    if (orders == NULL || !PyDict_CheckExact(orders)) goto defer;
    PyObject *order = PyDict_GetItemWithError(orders, keys); /* borrowed */
    if (order == NULL) {
        PyErr_Clear();
        goto defer;
    }
    Py_INCREF(order);
    PyObject *original = PyObject_GetAttr(order, S.s_original);
    if (original == NULL || !PyTuple_CheckExact(original) || PyTuple_GET_SIZE(original) != n ||
        !PyTuple_Check(order) || PyTuple_GET_SIZE(order) != n) {
        PyErr_Clear();
        Py_XDECREF(original);
        Py_DECREF(order);
        goto defer;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (PyTuple_GET_ITEM(original, j) != PyTuple_GET_ITEM(keys, j)) {
            Py_DECREF(original);
            Py_DECREF(order);
            goto defer;
        }
    }
    Py_DECREF(original);
    PyObject *ordered = PyTuple_New(n);
    if (ordered == NULL) {
        Py_DECREF(order);
        goto fail;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(order, j));
        if (v == NULL) {
            PyErr_Clear();
            Py_DECREF(ordered);
            Py_DECREF(order);
            goto defer;
        }
        Py_INCREF(v);
        PyTuple_SET_ITEM(ordered, j, v);
    }
    Py_DECREF(keys);
    Py_DECREF(values);
    *kids = ordered;
    *data = order;
    return 0;
defer:
    Py_DECREF(keys);
    Py_DECREF(values);
    return DEFER;
fail:
    Py_DECREF(keys);
    Py_DECREF(values);
    return -1;
}

/* The key path of the current frame's child i - 1 (frames 1..depth-1 give the prefix). */
static PyObject *path_of(Frame *frames, Py_ssize_t depth) {
    PyObject *path = PyTuple_New(depth - 1);
    if (path == NULL) return NULL;
    for (Py_ssize_t k = 1; k < depth; k++) {
        PyObject *key = PySequence_Fast_GET_ITEM(frames[k].keys, frames[k].i - 1);
        Py_INCREF(key);
        PyTuple_SET_ITEM(path, k - 1, key);
    }
    return path;
}

static int add_record(PyObject *nodes, PyObject *ntype, PyObject *data, Py_ssize_t arity, Py_ssize_t num_leaves,
                      Py_ssize_t num_nodes) {
    PyObject *a = tk_int(arity), *l = tk_int(num_leaves), *m = tk_int(num_nodes);
    PyObject *record = (a && l && m) ? PyTuple_Pack(5, ntype, data, a, l, m) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(l);
    Py_XDECREF(m);
    if (record == NULL) return -1;
    int rc = PyList_Append(nodes, record);
    Py_DECREF(record);
    return rc;
}

int tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, PyObject *leaves, PyObject *nodes, PyObject *paths) {
    PyObject *types = PyObject_GetAttr(S.registry, S.s_TYPES);
    if (types == NULL) return -1;
    if (!PyDict_CheckExact(types)) {
        Py_DECREF(types);
        return DEFER;
    }
    PyObject *orders = PyObject_GetAttr(S.registry, S.s_ORDERS);
    if (orders == NULL) PyErr_Clear();
    Py_ssize_t cap = 64, depth = 1;
    Frame *frames = PyMem_Calloc((size_t)cap, sizeof(Frame));
    int rc = -1;
    if (frames == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The root is the one child of a virtual node, so it goes through the same code. */
    frames[0].children = PyTuple_Pack(1, tree);
    if (frames[0].children == NULL) goto done;
    frames[0].n = 1;
    if (with_path) {
        frames[0].keys = PyTuple_Pack(1, Py_None);
        if (frames[0].keys == NULL) goto done;
    }
    /* As the pure walker: look for a cycle when the work (children of stacked nodes plus
     * nodes done) has doubled since the last scan, and hand a tree deeper than
     * treekit._traverse.MAX_DEPTH to Python, which raises (see _traverse._look). */
    Py_ssize_t max_depth = -1;
    PyObject *limit = PyObject_GetAttrString(S.traverse, "MAX_DEPTH");
    if (limit != NULL) {
        max_depth = PyLong_AsSsize_t(limit);
        Py_DECREF(limit);
    }
    if (max_depth < 0) {
        PyErr_Clear();
        goto defer;
    }
    Py_ssize_t work = 0, scan_at = 1000, look_at = max_depth < 1000 ? max_depth : 1000;
    for (;;) {
        Frame *f = &frames[depth - 1];
        if (f->i >= f->n) {
            if (depth == 1) break;
            if (add_record(nodes, f->ntype, f->data, f->n, PyList_GET_SIZE(leaves) - f->leaf_start,
                           PyList_GET_SIZE(nodes) - f->node_start + 1) < 0)
                goto done;
            frame_clear(f);
            depth--;
            continue;
        }
        /* A list that user code called since has shortened: the pure walker's children[i]
         * raises IndexError there, and so does this one (a longer list: both stop at n). */
        if (f->i >= PySequence_Fast_GET_SIZE(f->children)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            goto done;
        }
        PyObject *child = PySequence_Fast_GET_ITEM(f->children, f->i);
        f->i++;
        Py_INCREF(child);
        PyObject *owned = NULL, *ntype;
        if (is_leaf != NULL) {
            PyObject *r = PyObject_CallOneArg(is_leaf, child);
            int stop = r == NULL ? -1 : PyObject_IsTrue(r);
            Py_XDECREF(r);
            if (stop < 0) {
                Py_DECREF(child);
                PyErr_Clear();
                goto defer;
            }
            ntype = stop ? Py_None : tk_lookup(types, child, &owned);
        } else {
            ntype = tk_lookup(types, child, &owned);
        }
        if (ntype == NULL) {
            Py_DECREF(child);
            PyErr_Clear();
            goto defer;
        }
        if (ntype == Py_None) {
            Py_XDECREF(owned);
            int bad = PyList_Append(leaves, child) < 0 || PyList_Append(nodes, S.LEAF) < 0;
            if (!bad && with_path) {
                PyObject *path = path_of(frames, depth);
                bad = path == NULL || PyList_Append(paths, path) < 0;
                Py_XDECREF(path);
            }
            Py_DECREF(child);
            if (bad) goto done;
            continue;
        }
        PyObject *kids = NULL, *data = NULL, *keys = NULL;
        int how = DEFER;
        if (ntype == S.LIST || ntype == S.TUPLE) {
            if (!with_path) {
                Py_INCREF(child);
                kids = child;
                Py_INCREF(Py_None);
                data = Py_None;
                how = 0;
            }
        } else if (ntype == S.NONE) {
            Py_INCREF(Py_None);
            data = Py_None;
            kids = S.empty_tuple;
            Py_INCREF(kids);
            how = 0;
        } else if (ntype == S.DICT && !with_path) {
            how = flatten_dict(child, orders, &kids, &data);
            if (how < 0) {
                Py_XDECREF(owned);
                Py_DECREF(child);
                goto done;
            }
        }
        if (how == DEFER) { /* the entry's flatten function: (children, node data, keys) */
            PyObject *fn = PyObject_GetAttr(ntype, S.s_flatten);
            PyObject *r = fn == NULL ? NULL : PyObject_CallFunctionObjArgs(fn, child, with_path ? Py_True : Py_False, NULL);
            Py_XDECREF(fn);
            if (r == NULL || !PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 3) {
                Py_XDECREF(r);
                Py_XDECREF(owned);
                Py_DECREF(child);
                PyErr_Clear();
                goto defer;
            }
            kids = PyTuple_GET_ITEM(r, 0);
            data = PyTuple_GET_ITEM(r, 1);
            keys = PyTuple_GET_ITEM(r, 2);
            if (!PyList_CheckExact(kids) && !PyTuple_CheckExact(kids)) {
                Py_DECREF(r);
                Py_XDECREF(owned);
                Py_DECREF(child);
                goto defer;
            }
            Py_INCREF(kids);
            Py_INCREF(data);
            if (with_path) {
                if ((!PyList_CheckExact(keys) && !PyTuple_CheckExact(keys)) ||
                    PySequence_Fast_GET_SIZE(keys) != PySequence_Fast_GET_SIZE(kids)) {
                    Py_DECREF(r);
                    Py_DECREF(kids);
                    Py_DECREF(data);
                    Py_XDECREF(owned);
                    Py_DECREF(child);
                    goto defer;
                }
                Py_INCREF(keys);
            } else {
                keys = NULL;
            }
            Py_DECREF(r);
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
        if (n == 0) {
            int bad = add_record(nodes, ntype, data, 0, 0, 1) < 0;
            Py_DECREF(kids);
            Py_DECREF(data);
            Py_XDECREF(keys);
            Py_XDECREF(owned);
            Py_DECREF(child);
            if (bad) goto done;
            continue;
        }
        work += n;
        Py_ssize_t done_so_far = work + PyList_GET_SIZE(nodes);
        if (done_so_far >= look_at) {
            /* depth - 1: the pure walker's len(stack) (frames[0] is the virtual root) */
            int cycle = depth - 1 >= max_depth;
            if (!cycle && done_so_far >= scan_at) {
                scan_at = 2 * done_so_far + 1000;
                cycle = has_cycle(frames, depth, child);
            }
            look_at = done_so_far + max_depth - (depth - 1);
            if (look_at > scan_at) look_at = scan_at;
            if (cycle != 0) { /* a cycle, or too deep: Python walks again and raises */
                Py_DECREF(kids);
                Py_DECREF(data);
                Py_XDECREF(keys);
                Py_XDECREF(owned);
                Py_DECREF(child);
                if (cycle < 0) goto done;
                goto defer; /* Python finds it again and names it */
            }
        }
        if (depth == cap) {
            Frame *more = PyMem_Realloc(frames, sizeof(Frame) * (size_t)(cap * 2));
            if (more == NULL) {
                PyErr_NoMemory();
                Py_DECREF(kids);
                Py_DECREF(data);
                Py_XDECREF(keys);
                Py_XDECREF(owned);
                Py_DECREF(child);
                goto done;
            }
            memset(more + cap, 0, sizeof(Frame) * (size_t)cap);
            frames = more;
            cap *= 2;
        }
        Frame *g = &frames[depth++];
        g->node = child; /* the reference taken above */
        Py_INCREF(ntype);
        g->ntype = ntype;
        Py_XDECREF(owned);
        g->data = data;
        g->children = kids;
        g->keys = keys;
        g->n = n;
        g->i = 0;
        g->leaf_start = PyList_GET_SIZE(leaves);
        g->node_start = PyList_GET_SIZE(nodes);
    }
    rc = 0;
    goto done;
defer:
    rc = DEFER;
done:
    if (frames != NULL) {
        for (Py_ssize_t k = 0; k < depth; k++) frame_clear(&frames[k]);
        PyMem_Free(frames);
    }
    Py_DECREF(types);
    Py_XDECREF(orders);
    return rc;
}
