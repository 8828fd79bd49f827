/* build.c mirrors treekit.core._build.interpret (what TreeDef._build runs): the tree of a
 * structure from its post-order records and its leaves. Lists, tuples, dicts, None and
 * namedtuples are made here. A node registered with register_pytree_node (or _with_keys)
 * gets its user's unflatten function called here, as the entry's unflatten function calls
 * it (`unflatten_func(node_data, children as a tuple)`); should that raise, its exception is
 * noted as treekit.core._build.unflatten_node notes it (errors.h), so a user's exception comes out
 * exactly as in the pure core. Every other node goes through unflatten_node, the Python function
 * that calls the entry's unflatten function and words its errors. */
#include "build.h"
#include "known.h"

/* The `SortedKeys` met in this build, read once each (direct-mapped by address): a parameter
 * tree's layers share a few. */
#define KEY_ORDERS 8
typedef struct {
    PyObject *keys;      /* owned or NULL: the `SortedKeys` */
    PyObject *original;  /* owned: its `original` (insertion order), a tuple */
    Py_ssize_t at[8];    /* its `positions`, when it has at most 8 keys */
} LastKeys;

static void last_keys_clear(LastKeys *last) {
    Py_CLEAR(last->keys);
    Py_CLEAR(last->original);
}

/* Read a `SortedKeys` of n keys into `last` (references taken): 0, or -1 (no exception) if it is
 * not of that shape. */
static int read_keys(LastKeys *last, PyObject *keys, Py_ssize_t n) {
    last_keys_clear(last);
    if (n > 8 || !PyTuple_Check(keys)) return -1;
    PyObject *attrs = PyObject_GenericGetDict(keys, NULL);
    PyObject *original = attrs ? PyDict_GetItemWithError(attrs, tk_state.s_original) : NULL; /* borrowed */
    PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, tk_state.s_positions) : NULL;
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
    PyObject *size = PyObject_CallMethodNoArgs(d, tk_state.s_sizeof);
    Py_ssize_t out = size == NULL ? -1 : PyLong_AsSsize_t(size);
    Py_XDECREF(size);
    if (out < 0) PyErr_Clear();
    return out;
}

/* A dict of `original`'s n keys in that order, values None, for the dicts of that order to
 * be copied from (PyDict_Copy keeps its table). Return value: New reference; NULL with an
 * exception, or NULL without one if the keys do not make n entries. Its table is one size larger than n
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
 * order's second build, kept: see tk_keep) and its values put in. 1 (*out: a new
 * reference), 0 (no such dict yet, or the copy did not keep exactly n keys (a key whose hash
 * changed): build it key by key), -1 with an exception. `keys`: node data of n > 8 keys;
 * `original` its keys in insertion order, `positions` (NULL: leaf order is insertion order)
 * where each goes. */
static int from_template(PyObject *keys, PyObject *original, PyObject *positions, PyObject **kids, Py_ssize_t n,
                         PyObject **out) {
    PyObject *template = tk_kept(keys, TK_KEPT_TEMPLATE);
    if (template == NULL || template == Py_None) {
        if (template == NULL) { /* its first build: noted only */
            tk_keep(keys, TK_KEPT_TEMPLATE, Py_None);
            return 0;
        }
        Py_DECREF(template);
        template = make_template(original, n);
        if (template == NULL) return PyErr_Occurred() ? -1 : 0;
        tk_keep(keys, TK_KEPT_TEMPLATE, template);
    }
    PyObject *d = PyDict_Copy(template);
    Py_DECREF(template);
    for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
        Py_ssize_t at = positions == NULL ? i : PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
        if (at < 0 || at >= n || PyDict_SetItem(d, PyTuple_GET_ITEM(original, i), kids[at]) < 0) Py_CLEAR(d);
    }
    if (d == NULL) return PyErr_Occurred() ? -1 : 0;
    if (PyDict_GET_SIZE(d) != n) { /* (no exception: key by key) */
        Py_DECREF(d);
        return 0;
    }
    *out = d;
    return 1;
}

/* A dict of n keys from `original` (insertion order) and the children (leaf order),
 * `positions` (NULL: the same order) saying where each key's child is. Return value: New
 * reference; NULL with an exception. */
static PyObject *dict_of(PyObject *original, PyObject *positions, PyObject **kids, Py_ssize_t n) {
    PyObject *d = PyDict_New();
    for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
        Py_ssize_t at = positions == NULL ? i : PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
        if (at < 0 || at >= n || PyDict_SetItem(d, PyTuple_GET_ITEM(original, i), kids[at]) < 0) Py_CLEAR(d);
    }
    return d;
}

/* A dict for a `SortedKeys` not read into its slot (more than 8 keys, or another shape).
 * Return value: New reference; NULL, an exception set or not (the caller defers either way). */
static PyObject *dict_of_order(PyObject *keys, PyObject **kids, Py_ssize_t n) {
    PyObject *attrs = PyTuple_Check(keys) ? PyObject_GenericGetDict(keys, NULL) : NULL, *d = NULL;
    PyObject *original = attrs ? PyDict_GetItemWithError(attrs, tk_state.s_original) : NULL;
    PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, tk_state.s_positions) : NULL;
    Py_XINCREF(original); /* held: the keys' __hash__ below may change `attrs` */
    Py_XINCREF(positions);
    Py_XDECREF(attrs);
    if (original != NULL && positions != NULL && PyTuple_CheckExact(original) && PyTuple_CheckExact(positions) &&
        PyTuple_GET_SIZE(original) == n && PyTuple_GET_SIZE(positions) == n &&
        from_template(keys, original, positions, kids, n, &d) == 0)
        d = dict_of(original, positions, kids, n); /* key by key */
    Py_XDECREF(original);
    Py_XDECREF(positions);
    return d;
}

/* A dict from its keys in leaf order (a tuple, or a `SortedKeys`, which puts the children back
 * in insertion order) and its n children in leaf order. TK_OK (*out: a new reference), or
 * TK_DEFER (no exception): node data of another shape, or an error on the way, for the
 * Python builder. */
static tk_status make_dict(PyObject *keys, PyObject **kids, Py_ssize_t n, LastKeys *last, PyObject **out) {
    PyObject *d = NULL;
    if (PyTuple_CheckExact(keys)) {
        if (PyTuple_GET_SIZE(keys) == n && (n <= 8 || from_template(keys, keys, NULL, kids, n, &d) == 0))
            d = dict_of(keys, NULL, kids, n);
    } else {
        /* a `SortedKeys`: its `original` keys (insertion order) and the `positions` of each in leaf order */
        last += ((uintptr_t)keys >> 4) % KEY_ORDERS; /* its slot */
        if (keys == last->keys || read_keys(last, keys, n) == 0) {
            d = PyDict_New();
            for (Py_ssize_t i = 0; d != NULL && i < n; i++) {
                if (PyDict_SetItem(d, PyTuple_GET_ITEM(last->original, i), kids[last->at[i]]) < 0) Py_CLEAR(d);
            }
        } else {
            d = dict_of_order(keys, kids, n);
        }
    }
    if (d == NULL) {
        PyErr_Clear();
        return TK_DEFER;
    }
    *out = d;
    return TK_OK;
}

/* The user's unflatten function behind the last custom entry met in this build (the entry
 * and that function owned; `func` NULL: the entry has none, see _register.tuple_children),
 * or a dataclass entry's `dataclass_init` (owned or NULL, checked: (class, the keyword names,
 * exact str, meta names first, the number of meta names[, positions, frozen, __init__]); see
 * _register.dataclass_entry and _register._stores), and whether its fields may be stored
 * without calling the class (`direct`: the class's __init__ is still the one checked there,
 * its __new__ object's and its metaclass's call type's). */
typedef struct {
    PyObject *ntype, *func, *init;
    PyObject *known; /* owned or NULL: the unflatten function's `known`, checked (known.h) */
    int direct;
} UserUnflatten;

/* `init` if it is a dataclass entry's `dataclass_init` as _register.dataclass_entry makes it. */
static int dataclass_init(PyObject *init) {
    if (init == NULL || !PyTuple_CheckExact(init) || (PyTuple_GET_SIZE(init) != 3 && PyTuple_GET_SIZE(init) != 6))
        return 0;
    PyObject *names = PyTuple_GET_ITEM(init, 1), *n_meta = PyTuple_GET_ITEM(init, 2);
    if (!PyCallable_Check(PyTuple_GET_ITEM(init, 0)) || !PyTuple_CheckExact(names) || !PyLong_CheckExact(n_meta))
        return 0;
    Py_ssize_t m = PyLong_AsSsize_t(n_meta), all = PyTuple_GET_SIZE(names);
    if (m < 0 || m > all) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 0; i < all; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) return 0;
    if (PyTuple_GET_SIZE(init) == 3) return 1;
    PyObject *at = PyTuple_GET_ITEM(init, 3);
    if (!PyTuple_CheckExact(at) || PyTuple_GET_SIZE(at) != all || !PyBool_Check(PyTuple_GET_ITEM(init, 4))) return 0;
    for (Py_ssize_t i = 0; i < all; i++) {
        PyObject *k = PyTuple_GET_ITEM(at, i);
        Py_ssize_t j = PyLong_CheckExact(k) ? PyLong_AsSsize_t(k) : -1;
        if (j < 0 || j >= all) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Whether a checked 6-item `init` may still store its class's fields directly: the class's
 * __init__ is the function _register._stores compared, its __new__ object's, its metaclass's
 * call type's (each may have changed since it was registered). */
static int direct_stores(PyObject *init) {
    PyObject *cls = PyTuple_GET_ITEM(init, 0);
    if (PyTuple_GET_SIZE(init) != 6 || !PyType_Check(cls)) return 0;
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (tp->tp_new != PyBaseObject_Type.tp_new || Py_TYPE(cls)->tp_call != PyType_Type.tp_call) return 0;
    PyObject *now = PyObject_GetAttr(cls, tk_state.s_init);
    int same = now == PyTuple_GET_ITEM(init, 5);
    Py_XDECREF(now);
    PyErr_Clear();
    return same;
}

/* The user's function of entry `ntype`, or NULL (no exception) if it has none.
 * Return value: Borrowed reference (u holds it). */
static PyObject *user_unflatten(UserUnflatten *u, PyObject *ntype) {
    if (u->ntype == ntype) return u->func;
    Py_CLEAR(u->func);
    Py_CLEAR(u->init);
    Py_CLEAR(u->known);
    u->direct = 0;
    Py_INCREF(ntype);
    Py_XSETREF_COMPAT(u->ntype, ntype);
    PyObject *fn = PyObject_GetAttr(ntype, tk_state.s_unflatten);
    if (fn != NULL && PyFunction_Check(fn)) {
        PyObject *attrs = PyObject_GenericGetDict(fn, NULL);
        PyObject *func = attrs == NULL ? NULL : PyDict_GetItemWithError(attrs, tk_state.s_func); /* borrowed */
        if (func != NULL && func != Py_None) {
            Py_INCREF(func);
            u->func = func;
            PyObject *gen = PyDict_GetItemWithError(attrs, tk_state.s_known); /* borrowed */
            if (tk_known_check(gen)) u->known = Py_NewRef(gen);
        }
        PyObject *init = attrs == NULL || func != NULL ? NULL : PyDict_GetItemWithError(attrs, tk_state.s_dataclass_init);
        if (dataclass_init(init)) {
            Py_INCREF(init);
            u->init = init;
            u->direct = direct_stores(init);
        }
        Py_XDECREF(attrs);
    }
    Py_XDECREF(fn);
    PyErr_Clear();
    return u->func;
}

/* A new instance of init's class with its fields stored as its __init__ stores them: in
 * init's positions' order, with object.__setattr__ (frozen) or setattr. Return value: New
 * reference; NULL with an exception. */
static PyObject *store_fields(PyObject *init, PyObject **args) {
    PyTypeObject *tp = (PyTypeObject *)PyTuple_GET_ITEM(init, 0);
    PyObject *names = PyTuple_GET_ITEM(init, 1), *at = PyTuple_GET_ITEM(init, 3);
    int frozen = PyTuple_GET_ITEM(init, 4) == Py_True;
    PyObject *made = tp->tp_new(tp, tk_state.empty_tuple, NULL);
    for (Py_ssize_t i = 0; made != NULL && i < PyTuple_GET_SIZE(at); i++) {
        Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(at, i));
        PyObject *name = PyTuple_GET_ITEM(names, j);
        if ((frozen ? PyObject_GenericSetAttr(made, name, args[j]) : PyObject_SetAttr(made, name, args[j])) < 0)
            Py_CLEAR(made);
    }
    return made;
}

/* A dataclass node: cls(**{meta name: node data item, ..., data name: child, ...}) as one call
 * with keywords, or its fields stored directly where that is what the call does (`direct`),
 * where node data is a tuple of one item per meta name and there is one child per data name
 * (else NULL, no exception: unflatten_node calls the entry's function, whose zip() keeps the
 * shorter). Takes a reference to init. Return value: New reference; NULL. */
static PyObject *make_dataclass(PyObject *init, int direct, PyObject *ntype, PyObject *data, PyObject **kids,
                                Py_ssize_t n, int *called) {
    PyObject *cls = PyTuple_GET_ITEM(init, 0), *names = PyTuple_GET_ITEM(init, 1), *made = NULL;
    Py_ssize_t m = PyLong_AsSsize_t(PyTuple_GET_ITEM(init, 2)), all = PyTuple_GET_SIZE(names);
    *called = PyTuple_CheckExact(data) && PyTuple_GET_SIZE(data) == m && n == all - m;
    if (*called) {
        PyObject *small[16], **args = all <= 16 ? small : PyMem_New(PyObject *, all);
        if (args == NULL) {
            PyErr_NoMemory();
        } else {
            Py_INCREF(data); /* (the record's reference: a records list user code changes) */
            for (Py_ssize_t i = 0; i < m; i++) args[i] = PyTuple_GET_ITEM(data, i);
            for (Py_ssize_t i = 0; i < n; i++) args[m + i] = kids[i];
            made = direct ? store_fields(init, args) : PyObject_Vectorcall(cls, args, 0, names);
            if (made == NULL && PyErr_ExceptionMatches(PyExc_Exception)) tk_unflatten_failed(ntype, data, n);
            Py_DECREF(data);
            if (args != small) PyMem_Free(args);
        }
    }
    Py_DECREF(init);
    return made;
}

/* A custom node from its n children: a dataclass entry's class called (make_dataclass), the
 * user's function called directly (its exception noted as the pure core notes it), or
 * treekit.core._build.unflatten_node, which calls the entry's unflatten function and words its
 * errors. Return value: New reference; NULL with an exception. */
static PyObject *make_custom(UserUnflatten *u, PyObject *ntype, PyObject *data, PyObject **kids, Py_ssize_t n) {
    PyObject *func = user_unflatten(u, ntype), *made = NULL;
    if (func == NULL && u->init != NULL) {
        int called;
        Py_INCREF(u->init); /* the call may end this build's hold on it */
        made = make_dataclass(u->init, u->direct, ntype, data, kids, n, &called);
        if (called) return made;
    }
    if (func != NULL && u->known != NULL) { /* (a known function, done here) */
        int called;
        Py_INCREF(data); /* (the record's: a descriptor's __set__ may change a records list) */
        made = tk_known_make(u->known, data, kids, n, &called);
        if (made == NULL && called && PyErr_ExceptionMatches(PyExc_Exception)) tk_unflatten_failed(ntype, data, n);
        Py_DECREF(data);
        if (called) return made;
    }
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
        if (made == NULL && PyErr_ExceptionMatches(PyExc_Exception)) tk_unflatten_failed(ntype, data, n);
        Py_DECREF(data);
        return made; /* (KeyboardInterrupt, ...: as it is) */
    }
    PyObject *children = PyList_New(n);
    if (children == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(kids[i]);
        PyList_SET_ITEM(children, i, kids[i]);
    }
    made = PyObject_CallFunctionObjArgs(tk_state.unflatten, ntype, data, children, NULL);
    Py_DECREF(children);
    return made;
}

/* One build: the records, the leaves, the stack of subtrees made (owned references). */
typedef struct {
    PyObject *nodes, *leaves; /* borrowed */
    PyObject **stack;
    Py_ssize_t top, next_leaf;
    int changed; /* the leaves list ran out: an unflatten function changed it */
    UserUnflatten user;
    LastKeys last[KEY_ORDERS];
} Build;

/* The node of record (ntype, data, arity) from the top `arity` subtrees, which it takes:
 * TK_OK (*made: a new reference), TK_DEFER (node data the C builder does not read),
 * TK_ERROR (the stack as it was). */
static tk_status make_node(Build *b, PyObject *ntype, PyObject *data, Py_ssize_t arity, PyObject **made) {
    PyObject **kids = b->stack + b->top - arity;
    if (ntype == tk_state.LIST) {
        if ((*made = PyList_New(arity)) == NULL) return TK_ERROR;
        for (Py_ssize_t i = 0; i < arity; i++) PyList_SET_ITEM(*made, i, kids[i]);
        return TK_OK;
    }
    if (ntype == tk_state.TUPLE) {
        if ((*made = PyTuple_New(arity)) == NULL) return TK_ERROR;
        for (Py_ssize_t i = 0; i < arity; i++) PyTuple_SET_ITEM(*made, i, kids[i]);
        tk_untrack_tuple(*made);
        return TK_OK;
    }
    if (ntype == tk_state.NONE && arity == 0) {
        Py_INCREF(Py_None);
        *made = Py_None;
        return TK_OK;
    }
    if (ntype == tk_state.DICT) {
        tk_status how = make_dict(data, kids, arity, b->last, made);
        if (how != TK_OK) return how;
    } else if (ntype == tk_state.NAMEDTUPLE && PyType_Check(data)) {
        *made = PyObject_Vectorcall(data, kids, (size_t)arity, NULL);
    } else {
        *made = make_custom(&b->user, ntype, data, kids, arity);
    }
    if (*made == NULL) return TK_ERROR;
    for (Py_ssize_t i = 0; i < arity; i++) Py_DECREF(kids[i]); /* (the node holds its own) */
    return TK_OK;
}

/* Every record, in order: TK_OK (the tree on the stack), TK_DEFER, TK_ERROR. */
static tk_status build_all(Build *b, Py_ssize_t count) {
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *record = PyTuple_GET_ITEM(b->nodes, j);
        if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 5) return TK_DEFER;
        PyObject *ntype = PyTuple_GET_ITEM(record, 0), *data = PyTuple_GET_ITEM(record, 1), *made;
        if (ntype == Py_None) {
            if (b->next_leaf >= PyList_GET_SIZE(b->leaves)) {
                b->changed = 1;
                return TK_ERROR;
            }
            PyObject *leaf = PyList_GET_ITEM(b->leaves, b->next_leaf++);
            Py_INCREF(leaf);
            b->stack[b->top++] = leaf;
            continue;
        }
        Py_ssize_t arity = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2));
        if (arity < 0 || arity > b->top) {
            PyErr_Clear();
            return TK_DEFER;
        }
        tk_status how = make_node(b, ntype, data, arity, &made);
        if (how != TK_OK) return how;
        b->top -= arity;
        b->stack[b->top++] = made;
    }
    return b->top == 1 ? TK_OK : TK_DEFER;
}

tk_status tk_build(PyObject *nodes, PyObject *leaves, PyObject **out) {
    *out = NULL;
    /* nodes: a tuple (the caller holds it; its records may be borrowed across user code);
     * leaves: a list, read by its size at each step (an unflatten function may change it) */
    if (!PyTuple_CheckExact(nodes) || !PyList_CheckExact(leaves)) return TK_DEFER;
    Py_ssize_t count = PyTuple_GET_SIZE(nodes);
    /* the number of leaves first, as TreeDef.unflatten checks it: no user code runs before */
    PyObject *root = count ? PyTuple_GET_ITEM(nodes, count - 1) : NULL;
    Py_ssize_t expected = root != NULL && PyTuple_CheckExact(root) && PyTuple_GET_SIZE(root) == 5
                              ? PyLong_AsSsize_t(PyTuple_GET_ITEM(root, 3))
                              : -1;
    if (expected != PyList_GET_SIZE(leaves)) {
        PyErr_Clear();
        return TK_DEFER;
    }
    Build b = {nodes, leaves, NULL, 0, 0, 0, {NULL, NULL, NULL, 0}};
    memset(b.last, 0, sizeof(b.last));
    b.stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)(count ? count : 1));
    if (b.stack == NULL) {
        PyErr_NoMemory();
        return TK_ERROR;
    }
    tk_status how = build_all(&b, count);
    /* the count was checked before any user code ran: an unflatten function changed the list */
    if (b.changed || (how == TK_OK && b.next_leaf != PyList_GET_SIZE(leaves))) {
        tk_leaves_changed(expected, PyList_GET_SIZE(leaves));
        how = TK_ERROR;
    }
    if (how == TK_OK) {
        *out = b.stack[0];
        b.top = 0;
    }
    for (Py_ssize_t i = 0; i < b.top; i++) Py_DECREF(b.stack[i]);
    PyMem_Free(b.stack);
    for (int k = 0; k < KEY_ORDERS; k++) last_keys_clear(&b.last[k]);
    Py_XDECREF(b.user.ntype);
    Py_XDECREF(b.user.func);
    Py_XDECREF(b.user.init);
    Py_XDECREF(b.user.known);
    return how;
}
