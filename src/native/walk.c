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

/* The last dict flattened in this walk, if its keys were few: the very key objects and
 * the node data made for them. A dict with the same key objects in the same order gets
 * the same node data (a parameter tree's layers share their key objects), without the
 * key tuple, the sort check and the ORDERS lookup. */
#define LAST_KEYS 8
typedef struct {
    Py_ssize_t n;
    PyObject *keys[LAST_KEYS];  /* borrowed from `data` */
    Py_ssize_t at[LAST_KEYS];   /* where each key's value goes in leaf order */
    PyObject *data;             /* owned: the key tuple or a shared `_Keys` */
} LastDict;

static void remember(LastDict *last, PyObject *data, PyObject *original, PyObject *positions) {
    Py_ssize_t n = PyTuple_GET_SIZE(original);
    Py_CLEAR(last->data);
    last->n = -1;
    if (n > LAST_KEYS) return;
    for (Py_ssize_t j = 0; j < n; j++) {
        last->keys[j] = PyTuple_GET_ITEM(original, j);
        last->at[j] = positions == NULL ? j : PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, j));
        if (last->at[j] < 0 || last->at[j] >= n) {
            PyErr_Clear();
            return;
        }
    }
    Py_INCREF(data);
    last->data = data;
    last->n = n;
}

/* A dict's children and node data as treekit._registry._flatten_dict gives them, for a
 * dict whose keys are inserted sorted (node data: the key tuple) or whose insertion order
 * has a shared `_Keys` in ORDERS made from these very key objects. 0 done (*kids, *data
 * new references), DEFER (let the dict entry's flatten function do it), -1 error. */
static int flatten_dict(PyObject *d, PyObject *orders, LastDict *last, PyObject **kids, PyObject **data,
                        int *ran_python) {
    Py_ssize_t n = PyDict_GET_SIZE(d), pos = 0, k = 0;
    PyObject *key, *value;
    if (n == last->n && last->data != NULL) { /* the same key objects as the last dict? */
        PyObject *values[LAST_KEYS];
        int same = 1;
        while (PyDict_Next(d, &pos, &key, &value)) {
            if (k >= n || key != last->keys[k]) {
                same = 0;
                break;
            }
            values[last->at[k++]] = value;
        }
        if (same && k == n) {
            PyObject *children = PyTuple_New(n);
            if (children == NULL) return -1;
            for (Py_ssize_t j = 0; j < n; j++) {
                Py_INCREF(values[j]);
                PyTuple_SET_ITEM(children, j, values[j]);
            }
            Py_INCREF(last->data);
            *kids = children;
            *data = last->data;
            return 0;
        }
        pos = k = 0;
    }
    PyObject *keys = PyTuple_New(n);
    if (keys == NULL) return -1;
    PyObject *values = PyTuple_New(n);
    if (values == NULL) {
        Py_DECREF(keys);
        return -1;
    }
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (k >= n) break; /* cannot happen: no Python code runs in this loop */
        Py_INCREF(key);
        PyTuple_SET_ITEM(keys, k, key);
        Py_INCREF(value);
        PyTuple_SET_ITEM(values, k, value);
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
            *ran_python = 1; /* a key's __lt__ (and later __hash__, __eq__) may be Python code */
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
        if (!*ran_python) remember(last, keys, keys, NULL);
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
    /* a `_Keys`: `original` must be these very key objects; `positions` says where each goes */
    PyObject *attrs = PyTuple_Check(order) && PyTuple_GET_SIZE(order) == n ? PyObject_GenericGetDict(order, NULL) : NULL;
    PyObject *original = attrs ? PyDict_GetItemWithError(attrs, S.s_original) : NULL;   /* borrowed */
    PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, S.s_positions) : NULL; /* borrowed */
    int usable = original != NULL && positions != NULL && PyTuple_CheckExact(original) &&
                 PyTuple_CheckExact(positions) && PyTuple_GET_SIZE(original) == n && PyTuple_GET_SIZE(positions) == n;
    for (Py_ssize_t j = 0; usable && j < n; j++) usable = PyTuple_GET_ITEM(original, j) == PyTuple_GET_ITEM(keys, j);
    PyObject *ordered = usable ? PyTuple_New(n) : NULL;
    for (Py_ssize_t j = 0; ordered != NULL && j < n; j++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, j));
        if (at < 0 || at >= n || PyTuple_GET_ITEM(ordered, at) != NULL) {
            Py_CLEAR(ordered);
            break;
        }
        PyObject *v = PyTuple_GET_ITEM(values, j);
        Py_INCREF(v);
        PyTuple_SET_ITEM(ordered, at, v);
    }
    if (ordered != NULL && !*ran_python) remember(last, order, original, positions);
    Py_XDECREF(attrs);
    if (ordered == NULL) {
        PyErr_Clear();
        goto defer;
    }
    Py_INCREF(order);
    Py_DECREF(keys);
    Py_DECREF(values);
    *kids = ordered;
    *data = order;
    return 0;
defer:
    Py_DECREF(keys);
    Py_DECREF(values);
    return DEFER;
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

/* The last record made in this walk: an equal record is shared (records are immutable
 * tuples; the layers of a parameter tree give equal ones, node data included). */
typedef struct {
    PyObject *record; /* owned */
    Py_ssize_t arity, num_leaves, num_nodes;
} LastRecord;

static int add_record(PyObject *nodes, LastRecord *last, PyObject *ntype, PyObject *data, Py_ssize_t arity,
                      Py_ssize_t num_leaves, Py_ssize_t num_nodes) {
    if (last->record != NULL && PyTuple_GET_ITEM(last->record, 0) == ntype &&
        PyTuple_GET_ITEM(last->record, 1) == data && last->arity == arity && last->num_leaves == num_leaves &&
        last->num_nodes == num_nodes)
        return PyList_Append(nodes, last->record);
    PyObject *record = PyTuple_New(5);
    if (record == NULL) return -1;
    Py_INCREF(ntype);
    PyTuple_SET_ITEM(record, 0, ntype);
    Py_INCREF(data);
    PyTuple_SET_ITEM(record, 1, data);
    PyObject *a = tk_int(arity), *l = a ? tk_int(num_leaves) : NULL, *m = l ? tk_int(num_nodes) : NULL;
    if (m == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(l);
        Py_DECREF(record);
        return -1;
    }
    PyTuple_SET_ITEM(record, 2, a);
    PyTuple_SET_ITEM(record, 3, l);
    PyTuple_SET_ITEM(record, 4, m);
    int rc = PyList_Append(nodes, record);
    Py_XDECREF(last->record);
    last->record = record; /* the reference made above */
    last->arity = arity;
    last->num_leaves = num_leaves;
    last->num_nodes = num_nodes;
    return rc;
}

/* The answers of TYPES for the types met since Python code last ran: leaf types and the
 * built-in entries only (kept alive by the module), forgotten whenever a call out (is_leaf,
 * a flatten function, resolve, a key's comparison) may have changed the registry. */
typedef struct {
    PyTypeObject *type;
    PyObject *ntype; /* borrowed: Py_None or a built-in entry */
} Memo;
#define MEMO_SIZE 16
#define FIRST_FRAMES 32
#define FORGET() memset(memo, 0, sizeof(memo))

int tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, PyObject *leaves, PyObject *nodes, PyObject *paths) {
    Memo memo[MEMO_SIZE];
    FORGET();
    PyObject *types = PyObject_GetAttr(S.registry, S.s_TYPES);
    if (types == NULL) return -1;
    if (!PyDict_CheckExact(types)) {
        Py_DECREF(types);
        return DEFER;
    }
    PyObject *orders = PyObject_GetAttr(S.registry, S.s_ORDERS);
    if (orders == NULL) PyErr_Clear();
    Py_ssize_t cap = FIRST_FRAMES, depth = 1;
    Frame first[FIRST_FRAMES]; /* the heap takes over past this depth */
    memset(first, 0, sizeof(first));
    Frame *frames = first;
    LastDict last = {0};
    LastRecord last_record = {0};
    int rc = -1;
    /* The root is the one child of a virtual node, so it goes through the same code. */
    frames[0].children = PyTuple_Pack(1, tree);
    if (frames[0].children == NULL) goto done;
    frames[0].n = 1;
    if (with_path) {
        frames[0].keys = PyTuple_Pack(1, Py_None);
        if (frames[0].keys == NULL) goto done;
    }
    Py_ssize_t look_at = 1000, work_at = 1000;
    for (;;) {
        Frame *f = &frames[depth - 1];
        if (f->i >= f->n) {
            if (depth == 1) break;
            if (add_record(nodes, &last_record, f->ntype, f->data, f->n, PyList_GET_SIZE(leaves) - f->leaf_start,
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
        PyObject *owned = NULL, *ntype = NULL;
        if (is_leaf != NULL) {
            PyObject *r = PyObject_CallOneArg(is_leaf, child);
            int stop = r == NULL ? -1 : PyObject_IsTrue(r);
            Py_XDECREF(r);
            FORGET();
            if (stop < 0) {
                Py_DECREF(child);
                PyErr_Clear();
                goto defer;
            }
            if (stop) ntype = Py_None;
        }
        if (ntype == NULL) {
            Memo *m = &memo[((uintptr_t)Py_TYPE(child) >> 4) % MEMO_SIZE];
            if (m->type == Py_TYPE(child)) {
                ntype = m->ntype;
            } else {
                int resolved = 0;
                ntype = tk_lookup(types, child, &owned, &resolved);
                if (resolved) FORGET();
                if (ntype == Py_None || ntype == S.LIST || ntype == S.TUPLE || ntype == S.DICT || ntype == S.NONE) {
                    m->type = Py_TYPE(child);
                    m->ntype = ntype;
                }
            }
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
            int ran_python = 0;
            how = flatten_dict(child, orders, &last, &kids, &data, &ran_python);
            if (ran_python) FORGET();
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
            FORGET();
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
            int bad = add_record(nodes, &last_record, ntype, data, 0, 0, 1) < 0;
            Py_DECREF(kids);
            Py_DECREF(data);
            Py_XDECREF(keys);
            Py_XDECREF(owned);
            Py_DECREF(child);
            if (bad) goto done;
            continue;
        }
        if (is_leaf == NULL && !with_path) {
            /* A node whose children are all leaves (most nodes of a parameter tree) is done
             * here, without a frame: its leaves are copied in one go. */
            Py_ssize_t j = 0;
            for (; j < n; j++) {
                PyTypeObject *tp = Py_TYPE(PySequence_Fast_GET_ITEM(kids, j));
                Memo *m = &memo[((uintptr_t)tp >> 4) % MEMO_SIZE];
                if (m->type == tp) {
                    if (m->ntype != Py_None) break;
                    continue;
                }
                PyObject *t = PyDict_GetItemWithError(types, (PyObject *)tp); /* borrowed */
                if (t != Py_None) {
                    PyErr_Clear();
                    break;
                }
                m->type = tp;
                m->ntype = Py_None;
            }
            if (j == n) {
                Py_ssize_t at = PyList_GET_SIZE(leaves);
                int bad = PyList_SetSlice(leaves, at, at, kids) < 0;
                for (j = 0; !bad && j < n; j++) bad = PyList_Append(nodes, S.LEAF) < 0;
                bad = bad || add_record(nodes, &last_record, ntype, data, n, n, n + 1) < 0;
                Py_DECREF(kids);
                Py_DECREF(data);
                Py_XDECREF(keys);
                Py_XDECREF(owned);
                Py_DECREF(child);
                if (bad) goto done;
                continue;
            }
        }
        if (depth >= look_at || PyList_GET_SIZE(nodes) >= work_at) {
            look_at = 2 * (depth > 500 ? depth : 500);
            work_at = 2 * PyList_GET_SIZE(nodes) + 1000;
            int cycle = has_cycle(frames, depth, child);
            if (cycle != 0) {
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
            Frame *more = frames == first ? PyMem_Malloc(sizeof(Frame) * (size_t)(cap * 2))
                                          : PyMem_Realloc(frames, sizeof(Frame) * (size_t)(cap * 2));
            if (more == NULL) {
                PyErr_NoMemory();
                Py_DECREF(kids);
                Py_DECREF(data);
                Py_XDECREF(keys);
                Py_XDECREF(owned);
                Py_DECREF(child);
                goto done;
            }
            if (frames == first) memcpy(more, first, sizeof(first));
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
    for (Py_ssize_t k = 0; k < depth; k++) frame_clear(&frames[k]);
    if (frames != first) PyMem_Free(frames);
    Py_XDECREF(last.data);
    Py_XDECREF(last_record.record);
    Py_DECREF(types);
    Py_XDECREF(orders);
    return rc;
}
