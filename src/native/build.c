/* build.c mirrors treekit._treedef._interpret (what TreeDef._build runs): the tree of a
 * structure from its post-order records and its leaves. Lists, tuples, dicts, None and
 * namedtuples are made here. A node registered with register_pytree_node (or _with_keys)
 * gets its user's unflatten function called here, as the entry's unflatten function calls
 * it (`unflatten_func(node_data, children as a tuple)`); should that raise, the node is
 * made again through treekit._treedef._unflatten, the Python function that calls the
 * entry's unflatten function and words its errors, so a user's exception comes out exactly
 * as in the pure core. Every other node goes through _unflatten. */
#include "native.h"

/* The `_Keys` met in this build, read once each (direct-mapped by address): a parameter
 * tree's layers share a few. */
#define KEY_ORDERS 8
typedef struct {
    PyObject *keys;      /* owned or NULL: the `_Keys` */
    PyObject *original;  /* owned: its `original` (insertion order), a tuple */
    Py_ssize_t at[8];    /* its `positions`, when it has at most 8 keys */
} LastKeys;

static void last_keys_clear(LastKeys *last) {
    Py_CLEAR(last->keys);
    Py_CLEAR(last->original);
}

/* Read a `_Keys` of n keys into `last`: 0, or -1 (no exception) if it is not of that shape. */
static int read_keys(LastKeys *last, PyObject *keys, Py_ssize_t n) {
    last_keys_clear(last);
    if (n > 8 || !PyTuple_Check(keys)) return -1;
    PyObject *attrs = PyObject_GenericGetDict(keys, NULL);
    PyObject *original = attrs ? PyDict_GetItemWithError(attrs, S.s_original) : NULL; /* borrowed */
    PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, S.s_positions) : NULL;
    int ok = original != NULL && positions != NULL && PyTuple_CheckExact(original) && PyTuple_CheckExact(positions) &&
             PyTuple_GET_SIZE(original) == n && PyTuple_GET_SIZE(positions) == n;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        last->at[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
        ok = last->at[i] >= 0 && last->at[i] < n;
    }
    if (ok) {
        Py_INCREF(keys);
        last->keys = keys;
        Py_INCREF(original);
        last->original = original;
    }
    Py_XDECREF(attrs);
    PyErr_Clear();
    return ok ? 0 : -1;
}

/* The size of d's table, as dict.__sizeof__ gives it: -1 (no exception) if unknown. */
static Py_ssize_t table_size(PyObject *d) {
    PyObject *size = PyObject_CallMethod(d, "__sizeof__", NULL);
    Py_ssize_t out = size == NULL ? -1 : PyLong_AsSsize_t(size);
    Py_XDECREF(size);
    if (out < 0) PyErr_Clear();
    return out;
}

/* A dict of `original`'s n keys in that order, values None, for the dicts of that order to
 * be copied from (PyDict_Copy keeps its table): new reference, NULL with an exception, or
 * NULL without one if the keys do not make n entries. Its table is one size larger than n
 * keys inserted one by one leave it (the keys are put in, then str keys not among them until
 * the table grows, then those are deleted): with half as many keys to a slot, putting each
 * value into a copy finds its key in fewer probes, and a 10,000-key dict is built in about
 * 0.7x the time. Where that takes more than n / 2 extra keys (PyDict_Copy would then pack
 * the table again), the plain dict serves. */
static PyObject *make_template(PyObject *original, Py_ssize_t n) {
    PyObject *template = PyDict_New();
    for (Py_ssize_t i = 0; template != NULL && i < n; i++) {
        if (PyDict_SetItem(template, PyTuple_GET_ITEM(original, i), Py_None) < 0) Py_CLEAR(template);
    }
    if (template == NULL) return NULL;
    if (PyDict_GET_SIZE(template) != n) {
        Py_DECREF(template);
        return NULL;
    }
    PyObject *spread = PyDict_Copy(template), *extra = PyList_New(0);
    Py_ssize_t before = spread == NULL ? -1 : table_size(spread), size = before;
    while (before > 0 && extra != NULL && size == before && PyList_GET_SIZE(extra) <= n / 2) {
        PyObject *key = PyUnicode_FromFormat("\x01treekit-spread-%zd", PyList_GET_SIZE(extra));
        int fresh = key == NULL ? -1 : !PyDict_Contains(spread, key);
        if (fresh < 0 || PyList_Append(extra, key) < 0 || (fresh && PyDict_SetItem(spread, key, Py_None) < 0)) {
            Py_XDECREF(key);
            break;
        }
        Py_DECREF(key);
        size = table_size(spread);
    }
    int ok = before > 0 && extra != NULL && size > before && !PyErr_Occurred();
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(extra); i++) {
        PyObject *key = PyList_GET_ITEM(extra, i);
        int there = PyDict_Contains(spread, key);
        ok = there >= 0 && (!there || PyDict_DelItem(spread, key) == 0);
    }
    ok = ok && PyDict_GET_SIZE(spread) == n;
    PyErr_Clear();
    Py_XDECREF(extra);
    if (!ok) {
        Py_XDECREF(spread);
        return template;
    }
    Py_DECREF(template);
    return spread;
}

/* A big key order's dict, copied from a dict of its keys with None values (made at the
 * order's second build, kept: see tk_keep) and its values put in: new reference; NULL with
 * an exception, or NULL without one where there is no such dict yet or the copy did not
 * keep exactly n keys (a key whose hash changed): build it key by key then. `keys`: node
 * data of n > 8 keys; `original` its keys in insertion order, `positions` (NULL: leaf order
 * is insertion order) where each goes (borrowed). */
static PyObject *from_template(PyObject *keys, PyObject *original, PyObject *positions, PyObject **kids,
                               Py_ssize_t n) {
    PyObject *template = tk_kept(keys, KEPT_TEMPLATE);
    if (template == NULL || template == Py_None) {
        if (template == NULL) { /* its first build: noted only */
            tk_keep(keys, KEPT_TEMPLATE, Py_None);
            return NULL;
        }
        Py_DECREF(template);
        template = make_template(original, n);
        if (template == NULL) return NULL;
        tk_keep(keys, KEPT_TEMPLATE, template);
    }
    PyObject *d = PyDict_Copy(template);
    Py_DECREF(template);
    for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
        Py_ssize_t at = positions == NULL ? i : PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
        if (at < 0 || at >= n || PyDict_SetItem(d, PyTuple_GET_ITEM(original, i), kids[at]) < 0) Py_CLEAR(d);
    }
    if (d != NULL && PyDict_GET_SIZE(d) != n) Py_CLEAR(d); /* (no exception: key by key) */
    return d;
}

/* A dict from its keys in leaf order (a tuple, or a `_Keys`, which puts the children back
 * in insertion order) and its n children in leaf order (borrowed). NULL with *defer set:
 * node data of another shape, for the Python builder. */
static PyObject *make_dict(PyObject *keys, PyObject **kids, Py_ssize_t n, LastKeys *last, int *defer) {
    PyObject *d = NULL;
    if (PyTuple_CheckExact(keys)) {
        if (PyTuple_GET_SIZE(keys) != n) goto defer;
        d = n > 8 ? from_template(keys, keys, NULL, kids, n) : NULL;
        if (d != NULL) return d;
        if (PyErr_Occurred()) goto defer;
        d = PyDict_New();
        for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(keys, i), kids[i]) < 0) Py_CLEAR(d);
        }
        if (d == NULL) goto defer;
        return d;
    }
    /* a `_Keys`: its `original` keys (insertion order) and the `positions` of each in leaf order */
    last += ((uintptr_t)keys >> 4) % KEY_ORDERS; /* its slot */
    if (keys != last->keys && read_keys(last, keys, n) < 0) {
        PyObject *attrs = PyTuple_Check(keys) ? PyObject_GenericGetDict(keys, NULL) : NULL;
        PyObject *original = attrs ? PyDict_GetItemWithError(attrs, S.s_original) : NULL;
        PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, S.s_positions) : NULL;
        Py_XINCREF(original); /* held: the keys' __hash__ below may change `attrs` */
        Py_XINCREF(positions);
        Py_XDECREF(attrs);
        if (original != NULL && positions != NULL && PyTuple_CheckExact(original) && PyTuple_CheckExact(positions) &&
            PyTuple_GET_SIZE(original) == n && PyTuple_GET_SIZE(positions) == n) {
            d = from_template(keys, original, positions, kids, n);
            if (d == NULL && !PyErr_Occurred()) { /* key by key */
                d = PyDict_New();
                for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
                    Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
                    if (at < 0 || at >= n || PyDict_SetItem(d, PyTuple_GET_ITEM(original, i), kids[at]) < 0)
                        Py_CLEAR(d);
                }
            }
        }
        Py_XDECREF(original);
        Py_XDECREF(positions);
        if (d == NULL) goto defer;
        return d;
    }
    d = PyDict_New();
    for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(last->original, i), kids[last->at[i]]) < 0) Py_CLEAR(d);
    }
    if (d == NULL) goto defer;
    return d;
defer:
    PyErr_Clear();
    *defer = 1;
    return NULL;
}

/* The user's unflatten function behind the last custom entry met in this build (the entry
 * and that function owned; `func` NULL: the entry has none, see _registry._tuple_children). */
typedef struct {
    PyObject *ntype;
    PyObject *func;
} UserUnflatten;

/* The user's function of entry `ntype`, or NULL (no exception) if it has none: borrowed. */
static PyObject *user_unflatten(UserUnflatten *u, PyObject *ntype) {
    if (u->ntype == ntype) return u->func;
    Py_CLEAR(u->func);
    Py_INCREF(ntype);
    Py_XSETREF_COMPAT(u->ntype, ntype);
    PyObject *fn = PyObject_GetAttr(ntype, S.s_unflatten);
    if (fn != NULL && PyFunction_Check(fn)) {
        PyObject *attrs = PyObject_GenericGetDict(fn, NULL);
        PyObject *func = attrs == NULL ? NULL : PyDict_GetItemWithError(attrs, S.s_func); /* borrowed */
        if (func != NULL && func != Py_None) {
            Py_INCREF(func);
            u->func = func;
        }
        Py_XDECREF(attrs);
    }
    Py_XDECREF(fn);
    PyErr_Clear();
    return u->func;
}

/* The user's exception (set), raised by the unflatten function of entry `ntype` building a
 * node of n children with node data `data`: noted as treekit._treedef._unflatten notes it,
 * without calling that function again. Returns NULL, an exception set. */
static PyObject *unflatten_failed(PyObject *ntype, PyObject *data, Py_ssize_t n) {
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL && exc != NULL) PyException_SetTraceback(exc, tb);
    PyObject *cls = exc == NULL ? NULL : PyObject_GetAttrString(ntype, "type");
    PyObject *noted = cls == NULL ? NULL : PyObject_CallMethod(S.errors, "unflatten_noted", "OOnO", cls, data, n, exc);
    Py_XDECREF(cls);
    if (noted != NULL) { /* the user's exception goes on, its note added */
        Py_DECREF(noted);
        PyErr_Restore(type, exc, tb); /* (steals the references fetched) */
        return NULL;
    } /* (else the noting's own error, set) */
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    return NULL;
}

/* A custom node from its n children (borrowed): the user's function called directly (its
 * exception noted as the pure core notes it), or treekit._treedef._unflatten, which calls
 * the entry's unflatten function and words its errors. New reference, NULL with an exception. */
static PyObject *make_custom(UserUnflatten *u, PyObject *ntype, PyObject *data, PyObject **kids, Py_ssize_t n) {
    PyObject *func = user_unflatten(u, ntype), *made = NULL;
    if (func != NULL) {
        PyObject *children = PyTuple_New(n);
        if (children == NULL) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(kids[i]);
            PyTuple_SET_ITEM(children, i, kids[i]);
        }
        PyObject *args[2] = {data, children};
        Py_INCREF(func); /* the call may drop the entry's reference */
        Py_INCREF(data); /* and the record's (a records list user code changes) */
        made = PyObject_Vectorcall(func, args, 2, NULL);
        Py_DECREF(func);
        Py_DECREF(children);
        if (made == NULL && PyErr_ExceptionMatches(PyExc_Exception)) unflatten_failed(ntype, data, n);
        Py_DECREF(data);
        return made; /* (KeyboardInterrupt, ...: as it is) */
    }
    PyObject *children = PyList_New(n);
    if (children == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(kids[i]);
        PyList_SET_ITEM(children, i, kids[i]);
    }
    made = PyObject_CallFunctionObjArgs(S.unflatten, ntype, data, children, NULL);
    Py_DECREF(children);
    return made;
}

PyObject *tk_build(PyObject *nodes, PyObject *leaves, int *defer) {
    *defer = 0;
    /* nodes: a tuple (the caller holds it; its records may be borrowed across user code);
     * leaves: a list, read by its size at each step (an unflatten function may change it) */
    if (!PyTuple_CheckExact(nodes) || !PyList_CheckExact(leaves)) {
        *defer = 1;
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(nodes), top = 0, next_leaf = 0;
    /* the number of leaves first, as TreeDef.unflatten checks it: no user code runs before */
    PyObject *root = count ? PyTuple_GET_ITEM(nodes, count - 1) : NULL;
    if (root == NULL || !PyTuple_CheckExact(root) || PyTuple_GET_SIZE(root) != 5 ||
        PyLong_AsSsize_t(PyTuple_GET_ITEM(root, 3)) != PyList_GET_SIZE(leaves)) {
        PyErr_Clear();
        *defer = 1;
        return NULL;
    }
    PyObject **stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)(count ? count : 1));
    if (stack == NULL) return PyErr_NoMemory();
    PyObject *result = NULL;
    UserUnflatten user = {NULL, NULL};
    LastKeys last[KEY_ORDERS];
    memset(last, 0, sizeof(last));
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *record = PyTuple_GET_ITEM(nodes, j);
        if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 5) goto defer;
        PyObject *ntype = PyTuple_GET_ITEM(record, 0), *data = PyTuple_GET_ITEM(record, 1);
        if (ntype == Py_None) {
            if (next_leaf >= PyList_GET_SIZE(leaves)) goto changed;
            PyObject *leaf = PyList_GET_ITEM(leaves, next_leaf++);
            Py_INCREF(leaf);
            stack[top++] = leaf;
            continue;
        }
        Py_ssize_t arity = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2));
        if (arity < 0 || arity > top) {
            PyErr_Clear();
            goto defer;
        }
        PyObject **kids = stack + top - arity, *made;
        if (ntype == S.LIST) {
            made = PyList_New(arity);
            if (made == NULL) goto fail;
            for (Py_ssize_t i = 0; i < arity; i++) PyList_SET_ITEM(made, i, kids[i]);
        } else if (ntype == S.TUPLE) {
            made = PyTuple_New(arity);
            if (made == NULL) goto fail;
            for (Py_ssize_t i = 0; i < arity; i++) PyTuple_SET_ITEM(made, i, kids[i]);
            tk_untrack_tuple(made);
        } else if (ntype == S.NONE && arity == 0) {
            Py_INCREF(Py_None);
            made = Py_None;
        } else {
            if (ntype == S.DICT) {
                made = make_dict(data, kids, arity, last, defer);
            } else if (ntype == S.NAMEDTUPLE && PyType_Check(data)) {
                made = PyObject_Vectorcall(data, kids, (size_t)arity, NULL);
            } else {
                made = make_custom(&user, ntype, data, kids, arity);
            }
            if (made == NULL) {
                if (*defer) goto defer;
                goto fail;
            }
            for (Py_ssize_t i = 0; i < arity; i++) Py_DECREF(kids[i]);
        }
        top -= arity;
        stack[top++] = made;
    }
    if (top != 1) goto defer;
    if (next_leaf != PyList_GET_SIZE(leaves)) goto changed;
    result = stack[0];
    top = 0;
    goto done;
changed: /* the count was checked before any user code ran: an unflatten function changed the list */
    {
        PyObject *exc = PyObject_CallMethod(S.treedef_mod, "leaves_changed", "nn",
                                            PyLong_AsSsize_t(PyTuple_GET_ITEM(root, 3)), PyList_GET_SIZE(leaves));
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
    }
    goto fail;
defer:
    *defer = 1;
fail:
    result = NULL;
done:
    for (Py_ssize_t i = 0; i < top; i++) Py_DECREF(stack[i]);
    PyMem_Free(stack);
    for (int k = 0; k < KEY_ORDERS; k++) last_keys_clear(&last[k]);
    Py_XDECREF(user.ntype);
    Py_XDECREF(user.func);
    return result;
}
