/* node.c: one node at a time, for both walkers (walk.c, guide.c). It mirrors
 * treekit._registry.lookup (a type's NodeType) and the built-in entries' flatten functions
 * (list, tuple, dict, namedtuple, None: read here; every other entry's flatten function is
 * called, as the pure core does). */
#include "native.h"

/* -- the walk's context ------------------------------------------------------------------- */
/* A module global, or NULL (no exception) where it is missing or not of `type`: new reference. */
static PyObject *global(PyObject *module, PyObject *name, PyTypeObject *type) {
    PyObject *value = PyDict_GetItemWithError(PyModule_GetDict(module), name); /* borrowed */
    if (value == NULL || Py_TYPE(value) != type) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

int tk_ctx_open(Ctx *c, int with_path) {
    memset(c, 0, sizeof(*c));
    c->types = global(S.registry, S.s_TYPES, &PyDict_Type);
    if (c->types == NULL) {
        PyErr_SetString(PyExc_TypeError, "treekit._registry.TYPES is not a dict");
        return -1;
    }
    /* the ones below are optional: without them the entries' flatten functions are called */
    c->orders = global(S.registry, S.s_ORDERS, &PyDict_Type);
    c->field_keys = global(S.registry, S.s_FIELD_KEYS, &PyDict_Type);
    if (with_path) c->seq_keys = global(S.registry, S.s_SEQ_KEYS, &PyList_Type);
    for (int i = 0; i < LAST_DICTS; i++) c->last[i].n = -1;
    c->recent = &c->last[0];
    return 0;
}

Py_ssize_t tk_max_depth(void) {
    PyObject *limit = global(S.traverse, S.s_MAX_DEPTH, &PyLong_Type);
    if (limit == NULL) return PY_SSIZE_T_MAX / 4; /* no depth limit in this version of the pure core */
    Py_ssize_t max_depth = PyLong_AsSsize_t(limit);
    Py_DECREF(limit);
    if (max_depth < 0) PyErr_Clear();
    return max_depth;
}

void tk_ctx_close(Ctx *c) {
    tk_forget(c);
    Py_CLEAR(c->types);
    Py_CLEAR(c->orders);
    Py_CLEAR(c->field_keys);
    Py_CLEAR(c->seq_keys);
    for (int i = 0; i < LAST_DICTS; i++) {
        Py_CLEAR(c->last[i].data);
        Py_CLEAR(c->last[i].original);
        Py_CLEAR(c->last[i].entries);
    }
    Py_CLEAR(c->plain);
    Py_CLEAR(c->keyed);
    Py_CLEAR(c->finish);
    Py_CLEAR(c->plain_of);
}

void tk_forget(Ctx *c) {
    if (c->memo_used == 0) return;
    PyTypeObject *types[MEMO_SIZE];
    int n = 0;
    for (int k = 0; k < MEMO_SIZE; k++) {
        if (c->memo_used >> k & 1) {
            types[n++] = c->memo[k].type;
            c->memo[k].type = NULL;
        }
    }
    c->memo_used = 0;
    for (int k = 0; k < n; k++) Py_DECREF(types[k]); /* last: a type's last reference may go */
}

/* Remember TYPES' answer for tp (a reference taken). */
static void memo_set(Ctx *c, Memo *m, PyTypeObject *tp, PyObject *ntype) {
    PyTypeObject *old = m->type;
    Py_INCREF(tp);
    m->type = tp;
    m->ntype = ntype;
    c->memo_used |= 1u << (m - c->memo);
    Py_XDECREF(old);
}

int tk_defer_error(void) {
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 1;
    }
    return 0; /* KeyboardInterrupt, SystemExit, ...: they go on as they are */
}

int tk_raise_noted(PyObject *label, PyObject *path, PyObject *cls) {
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc == NULL) { /* (an exception is always set here) */
        Py_XDECREF(type);
        Py_XDECREF(tb);
        PyErr_SetString(PyExc_SystemError, "treekit._native: no exception to note");
        return -1;
    }
    if (tb != NULL) PyException_SetTraceback(exc, tb);
    PyObject *noted = PyObject_CallMethod(S.errors, "flatten_noted", "OOOO", label, path, cls, exc);
    if (noted != NULL) { /* the user's exception goes on, its note added */
        Py_DECREF(noted);
        PyErr_Restore(type, exc, tb); /* (steals the references fetched) */
        return -1;
    }
    PyObject *t2, *e2, *tb2; /* the noting failed: that error, in the context of the user's */
    PyErr_Fetch(&t2, &e2, &tb2);
    PyErr_NormalizeException(&t2, &e2, &tb2);
    if (e2 != NULL) {
        Py_INCREF(exc);
        PyException_SetContext(e2, exc); /* (steals) */
    }
    PyErr_Restore(t2, e2, tb2);
    Py_XDECREF(type);
    Py_DECREF(exc);
    Py_XDECREF(tb);
    return -1;
}

PyObject *tk_frame_path(PyObject *frames) {
    PyObject *keys = PyObject_CallMethod(S.traverse, "_frame_keys", "O", frames);
    if (keys == NULL) return NULL;
    PyObject *path = PySequence_Tuple(keys);
    Py_DECREF(keys);
    return path;
}

/* The answers of TYPES for the types met since Python code last ran: leaf types and the
 * built-in entries only (kept alive by the module), forgotten (tk_forget) whenever a call
 * out (is_leaf, a flatten function, resolve, a key's comparison) may have changed the
 * registry. */
static Memo *memo_of(Ctx *c, PyTypeObject *tp) {
    return &c->memo[((uintptr_t)tp >> 4) % MEMO_SIZE];
}

static int remembered(PyObject *ntype) {
    return ntype == Py_None || ntype == S.LIST || ntype == S.TUPLE || ntype == S.DICT || ntype == S.NONE ||
           ntype == S.NAMEDTUPLE;
}

PyObject *tk_ctx_lookup(Ctx *c, PyObject *x, PyObject **owned) {
    Memo *m = memo_of(c, Py_TYPE(x));
    *owned = NULL;
    if (m->type == Py_TYPE(x)) return m->ntype;
    int resolved = 0;
    PyObject *ntype = tk_lookup(c->types, x, owned, &resolved);
    if (resolved) tk_forget(c);
    if (ntype != NULL && remembered(ntype)) memo_set(c, m, Py_TYPE(x), ntype);
    return ntype;
}

int tk_ctx_leaf_type(Ctx *c, PyTypeObject *tp) {
    Memo *m = memo_of(c, tp);
    if (m->type == tp) return m->ntype == Py_None;
    PyObject *t = PyDict_GetItemWithError(c->types, (PyObject *)tp); /* borrowed */
    if (t == NULL) {
        PyErr_Clear();
        return 0; /* not seen yet: the walk resolves it */
    }
    if (remembered(t)) memo_set(c, m, tp, t);
    return t == Py_None;
}

/* -- sequences the walkers may index as the pure core does ----------------------------------- */
int tk_plain_seq(PyObject *o) {
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) return 1;
    if (!PyTuple_Check(o)) return 0;
    /* a tuple subclass (a namedtuple) that reads (x[i]: mp_subscript), counts, iterates and
     * tests true as a tuple does (sq_item differs in every subclass: it is not read) */
    PyTypeObject *tp = Py_TYPE(o);
    return PyType_GetSlot(tp, Py_mp_length) == PyType_GetSlot(&PyTuple_Type, Py_mp_length) &&
           PyType_GetSlot(tp, Py_sq_length) == PyType_GetSlot(&PyTuple_Type, Py_sq_length) &&
           PyType_GetSlot(tp, Py_mp_subscript) == PyType_GetSlot(&PyTuple_Type, Py_mp_subscript) &&
           PyType_GetSlot(tp, Py_tp_iter) == PyType_GetSlot(&PyTuple_Type, Py_tp_iter) &&
           PyType_GetSlot(tp, Py_nb_bool) == NULL;
}

PyObject *tk_extend(PyObject *path, PyObject *key) {
    Py_ssize_t n = PyTuple_GET_SIZE(path);
    PyObject *out = PyTuple_New(n + 1);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyTuple_GET_ITEM(path, k);
        Py_INCREF(item);
        PyTuple_SET_ITEM(out, k, item);
    }
    Py_INCREF(key);
    PyTuple_SET_ITEM(out, n, key);
    return out;
}

/* -- dicts --------------------------------------------------------------------------------------- */
/* The slot of the dicts whose first key is `first` and that have n keys. */
static LastDict *last_of(Ctx *c, PyObject *first, Py_ssize_t n) {
    return &c->last[(((uintptr_t)first >> 4) ^ (uintptr_t)n) % LAST_DICTS];
}

/* (The context is the walk's own: no other code reaches it. What it drops is dropped last.) */
static void remember(Ctx *c, PyObject *data, PyObject *original, PyObject *positions) {
    Py_ssize_t n = PyTuple_GET_SIZE(original);
    if (n == 0) return;
    LastDict *last = last_of(c, PyTuple_GET_ITEM(original, 0), n);
    PyObject *old[3] = {last->data, last->original, last->entries}; /* entries: made for that node data */
    last->data = last->original = last->entries = NULL;
    last->entries_for = NULL;
    last->n = -1;
    int ok = n <= LAST_KEYS;
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

/* The big dicts (more than LAST_KEYS keys) met last, a few: their key objects in insertion
 * order and the node data made for them, bounded by keys in all. A dict with the very same
 * key objects in the same order gets that node data again (as the last small dict does). */
#define BIG_SLOTS 4
#define BIG_KEYS (1 << 15)
typedef struct {
    PyObject *data;     /* owned or NULL: a key tuple or a `_Keys` */
    PyObject *original; /* owned or NULL: the keys in insertion order, a tuple */
    Py_ssize_t *at;     /* PyMem or NULL (insertion order is leaf order): where each key's value goes */
} BigDict;
static BigDict big[BIG_SLOTS];
static Py_ssize_t big_keys;
static int big_next; /* the slot a big dict takes next when none is free or its own */

/* The slot remembering a big dict of n keys whose first key is `first`; or, with `take`,
 * the slot to remember such a dict in: its own, a free one, or the next in turn (any slot
 * may hold any dict: a few trees used in turn, as `tree_map` over 3 trees, keep theirs). */
static BigDict *big_slot(PyObject *first, Py_ssize_t n, int take) {
    for (int i = 0; i < BIG_SLOTS; i++)
        if (big[i].original != NULL && PyTuple_GET_SIZE(big[i].original) == n && PyTuple_GET_ITEM(big[i].original, 0) == first)
            return &big[i];
    if (!take) return NULL;
    for (int i = 0; i < BIG_SLOTS; i++)
        if (big[i].original == NULL) return &big[i];
    BigDict *b = &big[big_next];
    big_next = (big_next + 1) % BIG_SLOTS;
    return b;
}

/* Is `data` the node data of a big dict remembered? */
static int big_data(PyObject *data) {
    for (int i = 0; i < BIG_SLOTS; i++)
        if (big[i].data == data) return 1;
    return 0;
}

/* Remember the node data of a big dict: `original` its keys in insertion order, `positions`
 * (a tuple of ints, or NULL for leaf order) where each goes. */
static void remember_big(PyObject *data, PyObject *original, PyObject *positions) {
    Py_ssize_t n = PyTuple_GET_SIZE(original);
    BigDict *b = big_slot(PyTuple_GET_ITEM(original, 0), n, 1);
    PyObject *old_data = b->data, *old_original = b->original;
    if (old_original != NULL) big_keys -= PyTuple_GET_SIZE(old_original);
    PyMem_Free(b->at);
    b->data = b->original = NULL;
    b->at = NULL;
    if (big_keys + n <= BIG_KEYS) {
        Py_ssize_t *at = positions == NULL ? NULL : PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
        int ok = positions == NULL || at != NULL;
        for (Py_ssize_t j = 0; ok && positions != NULL && j < n; j++) {
            at[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, j));
            ok = at[j] >= 0 && at[j] < n;
        }
        PyErr_Clear();
        if (ok) {
            Py_INCREF(data);
            Py_INCREF(original);
            b->data = data;
            b->original = original;
            b->at = at;
            big_keys += n;
        } else {
            PyMem_Free(at);
        }
    }
    Py_XDECREF(old_data); /* last: destructors may call in here */
    Py_XDECREF(old_original);
}

/* A big dict's children and node data, if its key objects are those of a big dict
 * remembered: 0 done (new references), 1 not remembered, -1 error. The children's tuple is
 * made first: from the slot's look-up on, nothing runs Python code (a collection there could
 * change `d`, or a walk within it the slot). */
static int flatten_big(PyObject *d, Py_ssize_t n, PyObject **kids, PyObject **data) {
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    PyObject *children = PyTuple_New(n);
    if (children == NULL) return -1;
    BigDict *b = PyDict_GET_SIZE(d) == n && PyDict_Next(d, &pos, &key, &value) ? big_slot(key, n, 0) : NULL;
    if (b == NULL) {
        Py_DECREF(children);
        return 1;
    }
    PyObject **keys = &PyTuple_GET_ITEM(b->original, 0);
    Py_ssize_t *at = b->at;
    pos = 0;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (k >= n || key != keys[k]) {
            Py_DECREF(children); /* (its unset items are NULL) */
            return 1;
        }
        Py_INCREF(value);
        PyTuple_SET_ITEM(children, at == NULL ? k : at[k], value);
        k++;
    }
    if (k != n) {
        Py_DECREF(children);
        return 1;
    }
    Py_INCREF(b->data);
    *kids = children;
    *data = b->data;
    return 0;
}

/* A dict's children and node data as treekit._registry._flatten_dict gives them, for a
 * dict whose keys are inserted sorted (node data: the key tuple) or whose insertion order
 * has a shared `_Keys` in ORDERS made from these very key objects. A dict with the same key
 * objects in the same order as the last dict remembered gets that dict's node data (a
 * parameter tree's layers share their key objects), without the key tuple, the sort check
 * and the ORDERS lookup. 0 done (*kids, *data new references), DEFER (let the dict entry's
 * flatten function do it), -1 error. *ran_python: a key's comparison was called. */
static int flatten_dict(Ctx *c, PyObject *d, PyObject **kids, PyObject **data, int *ran_python) {
    Py_ssize_t n = PyDict_GET_SIZE(d), pos = 0, k = 0;
    PyObject *key, *value;
    LastDict *last = NULL;
    if (n > 0 && n <= LAST_KEYS && PyDict_Next(d, &pos, &key, &value)) {
        last = c->recent; /* (a parameter tree's layers: the same slot again and again) */
        if (last->n != n || last->keys[0] != key) last = last_of(c, key, n);
    }
    if (last != NULL && n == last->n && last->data != NULL && last->keys[0] == key) {
        /* the same key objects as the last such dict? The children's tuple is made first, then
         * the dict is read (a collection while it is made may change the dict) */
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
            return 0;
        }
        Py_DECREF(children); /* (its unset items are NULL) */
        n = PyDict_GET_SIZE(d);
    }
    pos = k = 0;
    if (n > LAST_KEYS) {
        int how = flatten_big(d, n, kids, data);
        if (how <= 0) return how;
    }
    /* two tuples, kept from the collector until they are filled; then the dict is read (its
     * size as it is then) */
    PyObject *keys = PyTuple_New(n);
    if (keys == NULL) return -1;
    PyObject_GC_UnTrack(keys);
    PyObject *values = PyTuple_New(n);
    if (values == NULL) {
        Py_DECREF(keys);
        return -1;
    }
    PyObject_GC_UnTrack(values);
    if (PyDict_GET_SIZE(d) != n) goto defer;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (k >= n) goto defer;
        Py_INCREF(key);
        PyTuple_SET_ITEM(keys, k, key);
        Py_INCREF(value);
        PyTuple_SET_ITEM(values, k, value);
        k++;
    }
    if (k != n) goto defer;
    tk_filled(keys); /* (values stays the walk's own, untracked: no cycle passes through it alone) */
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
        if (!*ran_python) {
            if (n > LAST_KEYS) remember_big(keys, keys, NULL);
            else remember(c, keys, keys, NULL);
        }
        *kids = values;
        *data = keys;
        return 0;
    }
    /* a `_Keys` (owned from here: the look-up hashes the keys, and what follows allocates:
     * either can run code that drops ORDERS' reference) */
    PyObject *order = c->orders == NULL ? NULL : PyDict_GetItemWithError(c->orders, keys);
    if (order == NULL) {
        PyErr_Clear();
        goto defer;
    }
    Py_INCREF(order);
    /* `original` must be these very key objects; `positions` says where each goes */
    PyObject *attrs = PyTuple_Check(order) && PyTuple_GET_SIZE(order) == n ? PyObject_GenericGetDict(order, NULL) : NULL;
    PyObject *original = attrs ? PyDict_GetItemWithError(attrs, S.s_original) : NULL;
    PyObject *positions = attrs ? PyDict_GetItemWithError(attrs, S.s_positions) : NULL;
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
    if (ordered != NULL && !*ran_python) {
        if (n > LAST_KEYS) remember_big(order, original, positions);
        else remember(c, order, original, positions);
    }
    Py_XDECREF(original);
    Py_XDECREF(positions);
    if (ordered == NULL) {
        Py_DECREF(order);
        PyErr_Clear();
        goto defer;
    }
    Py_DECREF(keys);
    Py_DECREF(values);
    *kids = ordered;
    *data = order; /* the reference taken above */
    return 0;
defer:
    Py_DECREF(keys);
    Py_DECREF(values);
    return DEFER;
}

/* -- what is kept for big key orders (see native.h) ---------------------------------------------- */
#define KEPT_SLOTS 8
#define KEPT_KEYS (1 << 15) /* keys of all the orders kept */
typedef struct {
    PyObject *order;           /* owned or NULL */
    PyObject *items[KEPT_WHAT]; /* owned or NULL: KEPT_ENTRIES, KEPT_TEMPLATE, KEPT_PATHS */
} Kept;
static Kept kept[KEPT_SLOTS];
static Py_ssize_t kept_keys;
static int kept_next; /* the slot an order takes next when none is free */

/* The slot keeping `order`; or, with `take`, the slot to keep it in: a free one, or the next
 * in turn (any slot may hold any order, so a few trees used in turn keep theirs). */
static Kept *kept_slot(PyObject *order, int take) {
    for (int i = 0; i < KEPT_SLOTS; i++)
        if (kept[i].order == order) return &kept[i];
    if (!take) return NULL;
    for (int i = 0; i < KEPT_SLOTS; i++)
        if (kept[i].order == NULL) return &kept[i];
    Kept *k = &kept[kept_next];
    kept_next = (kept_next + 1) % KEPT_SLOTS;
    return k;
}

PyObject *tk_kept(PyObject *order, int what) {
    Kept *k = kept_slot(order, 0);
    if (k == NULL || k->items[what] == NULL) return NULL;
    Py_INCREF(k->items[what]);
    return k->items[what];
}

void tk_keep(PyObject *order, int what, PyObject *item) {
    Kept *k = kept_slot(order, 1);
    PyObject *old[KEPT_WHAT + 2] = {NULL}; /* dropped last: destructors may call in here */
    if (k->order != order) { /* the slot's order goes; this one comes if the bound allows */
        old[0] = k->order;
        for (int j = 0; j < KEPT_WHAT; j++) {
            old[j + 1] = k->items[j];
            k->items[j] = NULL;
        }
        if (old[0] != NULL) kept_keys -= PyTuple_GET_SIZE(old[0]);
        k->order = NULL;
        if (kept_keys + PyTuple_GET_SIZE(order) <= KEPT_KEYS) {
            Py_INCREF(order);
            k->order = order;
            kept_keys += PyTuple_GET_SIZE(order);
        }
    }
    if (k->order == order) {
        Py_INCREF(item);
        old[KEPT_WHAT + 1] = k->items[what];
        k->items[what] = item;
        if (what == KEPT_ENTRIES && old[KEPT_PATHS + 1] == NULL) { /* made of the entries replaced */
            old[KEPT_PATHS + 1] = k->items[KEPT_PATHS];
            k->items[KEPT_PATHS] = NULL;
        }
    }
    for (int j = 0; j < KEPT_WHAT + 2; j++) Py_XDECREF(old[j]);
}

PyObject *tk_root_paths(PyObject *order, PyObject *entries) {
    Kept *k = kept_slot(order, 0);
    if (k == NULL || k->items[KEPT_ENTRIES] != entries) return NULL;
    if (k->items[KEPT_PATHS] != NULL) {
        Py_INCREF(k->items[KEPT_PATHS]);
        return k->items[KEPT_PATHS];
    }
    /* made here, kept from the collector until whole; `entries` is the caller's own */
    Py_ssize_t n = PyTuple_GET_SIZE(entries);
    PyObject *paths = PyTuple_New(n);
    if (paths != NULL) PyObject_GC_UnTrack(paths);
    for (Py_ssize_t j = 0; paths != NULL && j < n; j++) {
        PyObject *path = PyTuple_Pack(1, PyTuple_GET_ITEM(entries, j));
        if (path == NULL) {
            Py_CLEAR(paths);
            break;
        }
        tk_untrack_tuple(path);
        PyTuple_SET_ITEM(paths, j, path);
    }
    if (paths == NULL) {
        PyErr_Clear();
        return NULL;
    }
    tk_filled(paths);
    k = kept_slot(order, 0); /* again: code run by a collection above may have changed the slots */
    if (k != NULL && k->items[KEPT_ENTRIES] == entries && k->items[KEPT_PATHS] == NULL) {
        Py_INCREF(paths);
        k->items[KEPT_PATHS] = paths;
    }
    return paths;
}

/* [DictKey(k) for k in keys] as treekit._registry._dict_entries makes them (without the
 * dataclass's __init__): new reference, a tuple. Entries are immutable: those of the last
 * node data asked about, and those of big key orders, are kept and given again. */
static PyObject *dict_entries(Ctx *c, PyObject *keys) {
    LastDict *last = NULL; /* the slot whose node data `keys` is, if any */
    for (int i = 0; i < LAST_DICTS; i++)
        if (c->last[i].data == keys) last = &c->last[i];
    if (last != NULL && last->entries != NULL && last->entries_for == keys) {
        Py_INCREF(last->entries);
        return last->entries;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    /* node data shared from call to call: a `_Keys`, or that of a big dict remembered */
    int shared = n > LAST_KEYS && (!PyTuple_CheckExact(keys) || big_data(keys));
    PyObject *out = shared ? tk_kept(keys, KEPT_ENTRIES) : NULL;
    if (out != NULL) return out;
    PyTypeObject *tp = (PyTypeObject *)S.DictKey;
    Py_ssize_t offset = S.entry_offset[1];
    out = PyTuple_New(n);
    if (out == NULL) return NULL;
    PyObject_GC_UnTrack(out); /* until it is whole: each entry made below can run a collection */
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *entry = tp->tp_alloc(tp, 0), *key = PyTuple_GET_ITEM(keys, j);
        if (entry != NULL && offset > 0) { /* its empty slot, set as the slot's descriptor sets it */
            Py_INCREF(key);
            *(PyObject **)((char *)entry + offset) = key;
        } else if (entry == NULL || PyObject_GenericSetAttr(entry, S.s_key, key) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(out);
            return NULL;
        }
        tk_track_entry(entry, key);
        PyTuple_SET_ITEM(out, j, entry);
    }
    tk_filled(out);
    if (shared) tk_keep(keys, KEPT_ENTRIES, out);
    if (last != NULL) { /* keep them while `keys` is kept alive by the context */
        Py_XDECREF(last->entries);
        Py_INCREF(out);
        last->entries = out;
        last->entries_for = keys;
    }
    return out;
}

/* -- one node ----------------------------------------------------------------------------------- */
int tk_flatten_node(Ctx *c, PyObject *node, PyObject *ntype, int with_path, PyObject **kids, PyObject **data,
                    PyObject **keys) {
    *kids = *data = *keys = NULL;
    if ((ntype == S.LIST && PyList_CheckExact(node)) || (ntype == S.TUPLE && PyTuple_CheckExact(node))) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(node);
        if (with_path) {
            if (c->seq_keys == NULL || PyList_GET_SIZE(c->seq_keys) < n) goto call;
            Py_INCREF(c->seq_keys); /* the shared keys only grow: indexes below n stay put */
            *keys = c->seq_keys;
        }
        Py_INCREF(node);
        *kids = node;
        Py_INCREF(Py_None);
        *data = Py_None;
        return 0;
    }
    if (ntype == S.NONE) {
        Py_INCREF(Py_None);
        *data = Py_None;
        Py_INCREF(S.empty_tuple);
        *kids = S.empty_tuple;
        if (with_path) {
            Py_INCREF(S.empty_tuple);
            *keys = S.empty_tuple;
        }
        return 0;
    }
    if (ntype == S.DICT && PyDict_CheckExact(node)) {
        int ran_python = 0;
        int how = flatten_dict(c, node, kids, data, &ran_python);
        if (ran_python) tk_forget(c);
        if (how != 0) {
            if (how == DEFER) goto call;
            return -1;
        }
        if (with_path) {
            *keys = dict_entries(c, *data);
            if (*keys == NULL) {
                Py_CLEAR(*kids);
                Py_CLEAR(*data);
                return -1;
            }
        }
        return 0;
    }
    if (ntype == S.NAMEDTUPLE && c->field_keys != NULL && tk_plain_seq(node) && PyTuple_Check(node)) {
        /* treekit._registry._flatten_namedtuple, once its class's entries are known (the
         * look-up hashes the class, which a metaclass may do in Python: the list is held) */
        PyObject *fields = PyDict_GetItemWithError(c->field_keys, (PyObject *)Py_TYPE(node));
        if (fields == NULL) PyErr_Clear();
        if (fields == NULL || !PyList_CheckExact(fields) || PyList_GET_SIZE(fields) != PyTuple_GET_SIZE(node))
            goto call;
        if (with_path) {
            Py_INCREF(fields);
            *keys = fields;
        }
        Py_INCREF(node);
        *kids = node;
        Py_INCREF(Py_TYPE(node));
        *data = (PyObject *)Py_TYPE(node);
        return 0;
    }
call:;
    /* the entry's flatten function: (children, node data, keys) */
    PyObject *fn = PyObject_GetAttr(ntype, S.s_flatten);
    if (fn == NULL) return tk_defer_error() ? DEFER : -1;
    /* the user's own functions, where the entry names them (see _registry._make_flatten) */
    if (c->plain_of != fn && PyFunction_Check(fn)) {
        PyObject *attrs = PyObject_GenericGetDict(fn, NULL);
        PyObject *got[3] = {NULL, NULL, NULL}, *names[3] = {S.s_plain, S.s_keyed, S.s_finish};
        for (int k = 0; attrs != NULL && k < 3; k++) {
            got[k] = PyDict_GetItemWithError(attrs, names[k]); /* (str keys: no code runs) */
            if (got[k] == Py_None) got[k] = NULL;
            Py_XINCREF(got[k]);
        }
        Py_XDECREF(attrs);
        PyErr_Clear();
        if (got[2] == NULL) { /* no `finish`: the entry's function is called */
            Py_CLEAR(got[0]);
            Py_CLEAR(got[1]);
        }
        Py_XSETREF_COMPAT(c->plain, got[0]);
        Py_XSETREF_COMPAT(c->keyed, got[1]);
        Py_XSETREF_COMPAT(c->finish, got[2]);
        Py_INCREF(fn);
        Py_XSETREF_COMPAT(c->plain_of, fn);
    }
    PyObject *own = c->plain_of != fn ? NULL : with_path ? c->keyed : c->plain, *r;
    if (own != NULL) {
        PyObject *finish = c->finish;
        Py_INCREF(own);
        Py_INCREF(finish);
        Py_DECREF(fn);
        r = PyObject_CallOneArg(own, node);
        Py_DECREF(own);
        tk_forget(c);
        if (r != NULL && PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) == 2 && tk_plain_seq(PyTuple_GET_ITEM(r, 0))) {
            Py_DECREF(finish);
            PyObject *first = PyTuple_GET_ITEM(r, 0); /* r's, and r is ours */
            *data = PyTuple_GET_ITEM(r, 1);
            Py_INCREF(*data);
            if (!with_path) {
                Py_INCREF(first);
                *kids = first;
                Py_DECREF(r);
                return 0;
            }
            /* (key entry, child) pairs, unzipped as treekit._registry._unzip_keyed does, into two
             * tuples made first (nothing else holds them, and they cost less than lists); then
             * `first` (a list user code may hold, which a collection while they were made may
             * have changed) is read by its size as it is then, with nothing run meanwhile */
            Py_ssize_t n = PySequence_Fast_GET_SIZE(first), j = 0;
            *kids = PyTuple_New(n);
            if (*kids != NULL) PyObject_GC_UnTrack(*kids); /* (while *keys is made) */
            *keys = *kids == NULL ? NULL : PyTuple_New(n);
            int whole = *keys != NULL && PySequence_Fast_GET_SIZE(first) == n;
            for (; whole && j < n; j++) {
                PyObject *pair = PySequence_Fast_GET_ITEM(first, j);
                if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) break;
                Py_INCREF(PyTuple_GET_ITEM(pair, 0));
                PyTuple_SET_ITEM(*keys, j, PyTuple_GET_ITEM(pair, 0));
                Py_INCREF(PyTuple_GET_ITEM(pair, 1));
                PyTuple_SET_ITEM(*kids, j, PyTuple_GET_ITEM(pair, 1));
            }
            if (whole && j == n) {
                PyObject_GC_Track(*kids);
                Py_DECREF(r);
                return 0;
            }
            int failed = *keys == NULL;
            Py_CLEAR(*kids); /* (their unset items are NULL) */
            Py_CLEAR(*keys);
            Py_CLEAR(*data);
            if (failed) { /* a tuple could not be made */
                Py_DECREF(r);
                return -1;
            }
            /* a pair of another shape: `finish` words it (the pairs as the function gave them) */
            Py_INCREF(finish);
        }
        if (r == NULL) {
            Py_DECREF(finish);
            return PyErr_ExceptionMatches(PyExc_Exception) ? RAISED : -1;
        }
        /* not of the usual shape: `finish` checks it, makes it (children, node data, keys) or
         * raises, as the entry's function would have */
        PyObject *args[3] = {r, with_path ? Py_True : Py_False, with_path ? Py_True : Py_False};
        PyObject *made = PyObject_Vectorcall(finish, args, 3, NULL);
        Py_DECREF(finish);
        Py_DECREF(r);
        tk_forget(c);
        r = made;
    } else {
        r = PyObject_CallFunctionObjArgs(fn, node, with_path ? Py_True : Py_False, NULL);
        Py_DECREF(fn);
        tk_forget(c);
    }
    if (r == NULL) return PyErr_ExceptionMatches(PyExc_Exception) ? RAISED : -1;
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 3 || !tk_plain_seq(PyTuple_GET_ITEM(r, 0))) {
        Py_DECREF(r);
        return DEFER; /* (treekit's own entries return lists or tuples) */
    }
    PyObject *k = PyTuple_GET_ITEM(r, 2);
    if (with_path && (!tk_plain_seq(k) || PySequence_Fast_GET_SIZE(k) != PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(r, 0)))) {
        Py_DECREF(r);
        return DEFER;
    }
    *kids = PyTuple_GET_ITEM(r, 0);
    *data = PyTuple_GET_ITEM(r, 1);
    Py_INCREF(*kids);
    Py_INCREF(*data);
    if (with_path) {
        Py_INCREF(k);
        *keys = k;
    }
    Py_DECREF(r);
    return 0;
}
