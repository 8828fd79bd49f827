/* dict.c: dicts, for both walkers. It mirrors treekit.core._registry._flatten_dict (children in
 * sorted-key order; node data the sorted key tuple, or the shared `SortedKeys` of ORDERS that
 * remembers the insertion order) and _dict_entries (the DictKey entries of node data). */
#include "node.h"

/* The slot of the small dicts whose first key is `first` and that have n keys. */
static LastDict *last_of(Ctx *c, PyObject *first, Py_ssize_t n) {
    return &c->last[(((uintptr_t)first >> 4) ^ (uintptr_t)n) % LAST_DICTS];
}

void tk_dicts_close(Ctx *c) {
    for (int i = 0; i < LAST_DICTS; i++) {
        Py_CLEAR(c->last[i].data);
        Py_CLEAR(c->last[i].original);
        Py_CLEAR(c->last[i].entries);
    }
}

/* Remember `data`, the node data of a small dict (`original` its keys in insertion order,
 * `positions` a tuple of ints or NULL for leaf order). (The context is the walk's own: no
 * other code reaches it. What it drops is dropped last.) Does not steal its arguments. */
static void remember(Ctx *c, PyObject *data, PyObject *original, PyObject *positions) {
    Py_ssize_t n = PyTuple_GET_SIZE(original);
    if (n == 0) return;
    LastDict *last = last_of(c, PyTuple_GET_ITEM(original, 0), n);
    PyObject *old[3] = {last->data, last->original, last->entries}; /* entries: made for that node data */
    last->data = last->original = last->entries = NULL;
    last->entries_for = NULL;
    last->n = -1;
    int ok = n <= TK_SMALL_DICT;
    for (Py_ssize_t j = 0; ok && j < n; j++) {
        last->keys[j] = PyTuple_GET_ITEM(original, j);
        last->at[j] = positions == NULL ? j : PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, j));
        ok = last->at[j] >= 0 && last->at[j] < n;
    }
    PyErr_Clear();
    if (ok) {
        Py_INCREF(data);
        last->data = data;
        Py_INCREF(original);
        last->original = original;
        last->n = n;
    }
    for (int k = 0; k < 3; k++) Py_XDECREF(old[k]);
}

/* remember() or, for a big dict, tk_big_remember(). Does not steal its arguments. */
static void remember_any(Ctx *c, PyObject *data, PyObject *original, PyObject *positions) {
    if (PyTuple_GET_SIZE(original) > TK_SMALL_DICT) tk_big_remember(data, original, positions);
    else remember(c, data, original, positions);
}

/* A small dict with the same key objects in the same order as the last such dict remembered
 * gets that dict's node data (a parameter tree's layers share their key objects), without the
 * key tuple, the sort check and the ORDERS lookup. The children's tuple is made first, then
 * the dict is read (a collection while it is made may change the dict). 1 (new references in
 * *kids, *data), 0 (not that dict), -1 with an exception. */
static int as_last(Ctx *c, PyObject *d, Py_ssize_t n, PyObject **kids, PyObject **data) {
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    if (!(n > 0 && n <= TK_SMALL_DICT && PyDict_Next(d, &pos, &key, &value))) return 0;
    LastDict *last = c->recent; /* (a parameter tree's layers: the same slot again and again) */
    if (last->n != n || last->keys[0] != key) last = last_of(c, key, n);
    if (n != last->n || last->data == NULL || last->keys[0] != key) return 0;
    PyObject *children = PyTuple_New(n);
    if (children == NULL) return -1;
    int same = PyDict_GET_SIZE(d) == n;
    for (pos = 0; same && PyDict_Next(d, &pos, &key, &value); k++) {
        same = k < n && key == last->keys[k];
        if (same) {
            Py_INCREF(value);
            PyTuple_SET_ITEM(children, last->at[k], value);
        }
    }
    if (same && k == n) {
        Py_INCREF(last->data);
        *kids = children;
        *data = last->data;
        c->recent = last;
        return 1;
    }
    Py_DECREF(children); /* (its unset items are NULL) */
    return 0;
}

/* A big dict's children and node data, if its key objects are those of a big dict
 * remembered (cache.h). The children's tuple is made first: from the slot's look-up on,
 * nothing runs Python code (a collection there could change `d`, or clear the slot). 1 (new
 * references in *kids, *data), 0 (not remembered), -1 with an exception. */
static int as_big(PyObject *d, Py_ssize_t n, PyObject **kids, PyObject **data) {
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    PyObject *children = PyTuple_New(n);
    if (children == NULL) return -1;
    const tk_big_dict *b = PyDict_GET_SIZE(d) == n && PyDict_Next(d, &pos, &key, &value) ? tk_big_find(key, n) : NULL;
    if (b == NULL) {
        Py_DECREF(children);
        return 0;
    }
    PyObject **keys = &PyTuple_GET_ITEM(b->original, 0);
    Py_ssize_t *at = b->at;
    pos = 0;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (k >= n || key != keys[k]) {
            Py_DECREF(children); /* (its unset items are NULL) */
            return 0;
        }
        Py_INCREF(value);
        PyTuple_SET_ITEM(children, at == NULL ? k : at[k], value);
        k++;
    }
    if (k != n) {
        Py_DECREF(children);
        return 0;
    }
    Py_INCREF(b->data);
    *kids = children;
    *data = b->data;
    return 1;
}

/* d's n keys and values in insertion order, into two tuples kept from the collector until
 * they are filled; then the dict is read (its size as it is then). TK_OK (new references in
 * *keys, tracked as its items say, and *values, left untracked: the walk's own, no cycle
 * passes through it alone), TK_DEFER (the dict changed), TK_ERROR. */
static tk_status read_items(PyObject *d, Py_ssize_t n, PyObject **keys, PyObject **values) {
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    *keys = PyTuple_New(n);
    if (*keys == NULL) return TK_ERROR;
    PyObject_GC_UnTrack(*keys);
    *values = PyTuple_New(n);
    if (*values == NULL) {
        Py_CLEAR(*keys);
        return TK_ERROR;
    }
    PyObject_GC_UnTrack(*values);
    int same = PyDict_GET_SIZE(d) == n;
    while (same && PyDict_Next(d, &pos, &key, &value)) {
        if (k >= n) {
            same = 0;
            break;
        }
        Py_INCREF(key);
        PyTuple_SET_ITEM(*keys, k, key);
        Py_INCREF(value);
        PyTuple_SET_ITEM(*values, k, value);
        k++;
    }
    if (same && k == n) {
        tk_filled(*keys);
        return TK_OK;
    }
    Py_CLEAR(*keys);
    Py_CLEAR(*values);
    return TK_DEFER;
}

/* Are the n keys sorted? 1 or 0; -1 (no exception) for keys that do not compare (the pure
 * core's sort_keys's order: let it do it). *ran_python: a key's __lt__ was called. */
static int keys_sorted(PyObject *keys, Py_ssize_t n, int *ran_python) {
    for (Py_ssize_t j = 1; j < n; j++) {
        PyObject *a = PyTuple_GET_ITEM(keys, j - 1), *b = PyTuple_GET_ITEM(keys, j);
        int less;
        if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) {
            less = PyUnicode_Compare(b, a) < 0;
        } else {
            *ran_python = 1; /* a key's __lt__ (and later __hash__, __eq__) may be Python code */
            less = PyObject_RichCompareBool(b, a, Py_LT);
            if (less < 0) {
                PyErr_Clear();
                return -1;
            }
        }
        if (less) return 0;
    }
    return 1;
}

/* The children of a dict of insertion order `keys` (values `values`) put in sorted-key
 * order by the shared `SortedKeys` of ORDERS for that order, which must have been made from these
 * very key objects. TK_OK (new references in *kids, *data: the `SortedKeys`), TK_DEFER. */
static tk_status by_order(Ctx *c, PyObject *keys, PyObject *values, PyObject **kids, PyObject **data,
                          int *ran_python) {
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    PyObject *order = c->orders == NULL ? NULL : PyDict_GetItemWithError(c->orders, keys);
    if (order == NULL) {
        PyErr_Clear();
        return TK_DEFER;
    }
    /* owned from here: the look-up hashes the keys, and what follows allocates: either can run
     * code that drops ORDERS' reference */
    Py_INCREF(order);
    /* `original` must be these very key objects; `positions` says where each goes */
    PyObject *attrs = PyTuple_Check(order) && PyTuple_GET_SIZE(order) == n ? PyObject_GenericGetDict(order, NULL) : NULL;
    PyObject *original = attrs ? PyDict_GetItemWithError(attrs, tk_state.s_original) : NULL;
    PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, tk_state.s_positions) : NULL;
    Py_XINCREF(original);
    Py_XINCREF(positions);
    Py_XDECREF(attrs);
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
    if (ordered != NULL && !*ran_python) remember_any(c, order, original, positions);
    Py_XDECREF(original);
    Py_XDECREF(positions);
    if (ordered == NULL) {
        Py_DECREF(order);
        PyErr_Clear();
        return TK_DEFER;
    }
    *kids = ordered;
    *data = order; /* the reference taken above */
    return TK_OK;
}

/* For a dict whose keys are inserted sorted (node data: the key tuple) or whose insertion
 * order has a shared `SortedKeys` in ORDERS made from these very key objects. */
tk_status tk_flatten_dict(Ctx *c, PyObject *d, PyObject **kids, PyObject **data, int *ran_python) {
    Py_ssize_t n = PyDict_GET_SIZE(d);
    int served = as_last(c, d, n, kids, data);
    if (served != 0) return served > 0 ? TK_OK : TK_ERROR;
    n = PyDict_GET_SIZE(d); /* (as it is now) */
    if (n > TK_SMALL_DICT) {
        served = as_big(d, n, kids, data);
        if (served != 0) return served > 0 ? TK_OK : TK_ERROR;
    }
    PyObject *keys, *values;
    tk_status how = read_items(d, n, &keys, &values);
    if (how != TK_OK) return how;
    int sorted = keys_sorted(keys, n, ran_python);
    if (sorted > 0) {
        if (!*ran_python) remember_any(c, keys, keys, NULL);
        *kids = values;
        *data = keys;
        return TK_OK;
    }
    how = sorted < 0 ? TK_DEFER : by_order(c, keys, values, kids, data, ran_python);
    Py_DECREF(keys);
    Py_DECREF(values);
    return how;
}

/* Entries are immutable: those of the last node data asked about, and those of big key
 * orders, are kept and given again. */
PyObject *tk_dict_entries(Ctx *c, PyObject *keys) {
    LastDict *last = NULL; /* the slot whose node data `keys` is, if any */
    for (int i = 0; i < LAST_DICTS; i++)
        if (c->last[i].data == keys) last = &c->last[i];
    if (last != NULL && last->entries != NULL && last->entries_for == keys) {
        Py_INCREF(last->entries);
        return last->entries;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    /* node data shared from call to call: a `SortedKeys`, or that of a big dict remembered */
    int shared = n > TK_SMALL_DICT && (!PyTuple_CheckExact(keys) || tk_big_holds(keys));
    PyObject *out = shared ? tk_kept(keys, TK_KEPT_ENTRIES) : NULL;
    if (out != NULL) return out;
    out = PyTuple_New(n);
    if (out == NULL) return NULL;
    PyObject_GC_UnTrack(out); /* until it is whole: each entry made below can run a collection */
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *entry = tk_entry_new(TK_DICT_KEY, PyTuple_GET_ITEM(keys, j));
        if (entry == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, j, entry);
    }
    tk_filled(out);
    if (shared) tk_keep(keys, TK_KEPT_ENTRIES, out);
    if (last != NULL) { /* keep them while `keys` is kept alive by the context */
        Py_XDECREF(last->entries);
        Py_INCREF(out);
        last->entries = out;
        last->entries_for = keys;
    }
    return out;
}
