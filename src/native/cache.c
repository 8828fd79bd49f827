/* cache.c: the native core's process-wide caches (see cache.h). The pure-Python core keeps
 * its own in Python (treekit.core._registry.ORDERS, _SEQ_KEYS, _FIELD_KEYS; treekit.core._treedef's
 * builders): these mirror none of its functions, only speed the walkers that mirror them. */
#include "cache.h"

/* -- big dicts ------------------------------------------------------------------------------------ */
#define BIG_SLOTS 4
#define BIG_KEYS (1 << 15)
static tk_big_dict big_dicts[BIG_SLOTS];
static Py_ssize_t big_keys;
static int big_next; /* the slot a big dict takes next when none is free or its own */

const tk_big_dict *tk_big_find(PyObject *first, Py_ssize_t n) {
    for (int i = 0; i < BIG_SLOTS; i++) {
        PyObject *original = big_dicts[i].original;
        if (original != NULL && PyTuple_GET_SIZE(original) == n && PyTuple_GET_ITEM(original, 0) == first)
            return &big_dicts[i];
    }
    return NULL;
}

/* The slot to remember a big dict in: its own, a free one, or the next in turn (any slot
 * may hold any dict: a few trees used in turn, as `tree_map` over 3 trees, keep theirs). */
static tk_big_dict *big_slot(PyObject *first, Py_ssize_t n) {
    const tk_big_dict *own = tk_big_find(first, n);
    if (own != NULL) return &big_dicts[own - big_dicts];
    for (int i = 0; i < BIG_SLOTS; i++)
        if (big_dicts[i].original == NULL) return &big_dicts[i];
    tk_big_dict *b = &big_dicts[big_next];
    big_next = (big_next + 1) % BIG_SLOTS;
    return b;
}

int tk_big_holds(PyObject *data) {
    for (int i = 0; i < BIG_SLOTS; i++)
        if (big_dicts[i].data == data) return 1;
    return 0;
}

/* Empty a slot; its references go to old[0..1], for the caller to drop last. */
static void big_empty(tk_big_dict *b, PyObject **old) {
    old[0] = b->data;
    old[1] = b->original;
    if (b->original != NULL) big_keys -= PyTuple_GET_SIZE(b->original);
    PyMem_Free(b->at);
    b->data = b->original = NULL;
    b->at = NULL;
}

void tk_big_remember(PyObject *data, PyObject *original, PyObject *positions) {
    Py_ssize_t n = PyTuple_GET_SIZE(original);
    tk_big_dict *b = big_slot(PyTuple_GET_ITEM(original, 0), n);
    PyObject *old[2];
    big_empty(b, old);
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
    Py_XDECREF(old[0]); /* last: destructors may call in here */
    Py_XDECREF(old[1]);
}

/* -- what is kept for big key orders -------------------------------------------------------------- */
#define ORDER_SLOTS 8
#define ORDER_KEYS (1 << 15) /* keys of all the orders kept */
typedef struct {
    PyObject *order;               /* owned or NULL */
    PyObject *items[TK_KEPT_WHAT]; /* owned or NULL: TK_KEPT_ENTRIES, TK_KEPT_TEMPLATE, TK_KEPT_PATHS */
} KeptOrder;
static KeptOrder kept_orders[ORDER_SLOTS];
static Py_ssize_t order_keys;
static int order_next; /* the slot an order takes next when none is free */

/* The slot keeping `order`; or, with `take`, the slot to keep it in: a free one, or the next
 * in turn (any slot may hold any order, so a few trees used in turn keep theirs). */
static KeptOrder *order_slot(PyObject *order, int take) {
    for (int i = 0; i < ORDER_SLOTS; i++)
        if (kept_orders[i].order == order) return &kept_orders[i];
    if (!take) return NULL;
    for (int i = 0; i < ORDER_SLOTS; i++)
        if (kept_orders[i].order == NULL) return &kept_orders[i];
    KeptOrder *k = &kept_orders[order_next];
    order_next = (order_next + 1) % ORDER_SLOTS;
    return k;
}

PyObject *tk_kept(PyObject *order, int what) {
    KeptOrder *k = order_slot(order, 0);
    if (k == NULL || k->items[what] == NULL) return NULL;
    Py_INCREF(k->items[what]);
    return k->items[what];
}

/* Empty a slot; its references go to old[0..TK_KEPT_WHAT], for the caller to drop last. */
static void order_empty(KeptOrder *k, PyObject **old) {
    old[0] = k->order;
    for (int j = 0; j < TK_KEPT_WHAT; j++) {
        old[j + 1] = k->items[j];
        k->items[j] = NULL;
    }
    if (k->order != NULL) order_keys -= PyTuple_GET_SIZE(k->order);
    k->order = NULL;
}

void tk_keep(PyObject *order, int what, PyObject *item) {
    KeptOrder *k = order_slot(order, 1);
    PyObject *old[TK_KEPT_WHAT + 2] = {NULL}; /* dropped last: destructors may call in here */
    if (k->order != order) { /* the slot's order goes; this one comes if the bound allows */
        order_empty(k, old);
        if (order_keys + PyTuple_GET_SIZE(order) <= ORDER_KEYS) {
            Py_INCREF(order);
            k->order = order;
            order_keys += PyTuple_GET_SIZE(order);
        }
    }
    if (k->order == order) {
        Py_INCREF(item);
        old[TK_KEPT_WHAT + 1] = k->items[what];
        k->items[what] = item;
        if (what == TK_KEPT_ENTRIES && old[TK_KEPT_PATHS + 1] == NULL) { /* made of the entries replaced */
            old[TK_KEPT_PATHS + 1] = k->items[TK_KEPT_PATHS];
            k->items[TK_KEPT_PATHS] = NULL;
        }
    }
    for (int j = 0; j < TK_KEPT_WHAT + 2; j++) Py_XDECREF(old[j]);
}

PyObject *tk_root_paths(PyObject *order, PyObject *entries) {
    KeptOrder *k = order_slot(order, 0);
    if (k == NULL || k->items[TK_KEPT_ENTRIES] != entries) return NULL;
    if (k->items[TK_KEPT_PATHS] != NULL) {
        Py_INCREF(k->items[TK_KEPT_PATHS]);
        return k->items[TK_KEPT_PATHS];
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
    k = order_slot(order, 0); /* again: code run by a collection above may have changed the slots */
    if (k != NULL && k->items[TK_KEPT_ENTRIES] == entries && k->items[TK_KEPT_PATHS] == NULL) {
        Py_INCREF(paths);
        k->items[TK_KEPT_PATHS] = paths;
    }
    return paths;
}

/* -- records and counts --------------------------------------------------------------------------- */
#define SHARED_RECORDS 512
static tk_made shared_records[SHARED_RECORDS];

tk_made *tk_shared_record(uintptr_t h) {
    return &shared_records[(h ^ (h >> 9)) % SHARED_RECORDS];
}

#define NODE_SLOTS 16384
static tk_node_data node_data[NODE_SLOTS];
static tk_made node_records[NODE_SLOTS];

tk_node_data *tk_node_data_slot(uintptr_t h) {
    return &node_data[(h ^ (h >> 13)) % NODE_SLOTS];
}

tk_made *tk_node_record(uintptr_t h) {
    return &node_records[(h ^ (h >> 13)) % NODE_SLOTS];
}

#define COUNTS 1024
static PyObject *counts[COUNTS];

PyObject *tk_count(Py_ssize_t v) {
    if (v < 0 || v >= COUNTS) return PyLong_FromSsize_t(v);
    if (counts[v] == NULL && (counts[v] = PyLong_FromSsize_t(v)) == NULL) return NULL;
    Py_INCREF(counts[v]);
    return counts[v];
}

/* -- spread sequence keys -------------------------------------------------------------------------
 * Set r (1 <= r < SPREAD) serves key paths at positions r, r + SPREAD, ...; positions 0,
 * SPREAD, ... keep the shared entry. A deep path of lists repeats one entry ([1][1][1]...):
 * with one object, each reference a path's tuple takes (and drops, when it is freed) waits
 * for the one before it on the same count; with SPREAD objects they go side by side. */
#define SPREAD 8
#define SPREAD_INDEXES 64
static PyObject *spread[SPREAD - 1][SPREAD_INDEXES];

PyObject *tk_spread_key(PyObject *key, Py_ssize_t position, Py_ssize_t index) {
    Py_ssize_t r = position % SPREAD;
    if (r == 0 || index >= SPREAD_INDEXES || Py_TYPE(key) != (PyTypeObject *)tk_state.SequenceKey) {
        Py_INCREF(key);
        return key;
    }
    PyObject **slot = &spread[r - 1][index];
    if (*slot == NULL) { /* SequenceKey(idx) without the dataclass's __init__, as tk_dict_entries's */
        PyObject *idx = PyObject_GetAttr(key, tk_state.s_idx);
        PyObject *copy = idx == NULL ? NULL : tk_entry_new(TK_SEQUENCE_KEY, idx);
        Py_XDECREF(idx);
        if (copy == NULL) {
            PyErr_Clear();
            Py_INCREF(key);
            return key;
        }
        if (*slot == NULL) {
            *slot = copy; /* kept */
        } else {
            Py_DECREF(copy); /* made meanwhile, by a walk in code run above */
        }
    }
    Py_INCREF(*slot);
    return *slot;
}

/* -- entry texts ---------------------------------------------------------------------------------- */
#define SEQ_TEXTS 256
#define TEXTS_LIMIT (1 << 15) /* keys: a flat dict of as many keys as the big-dict caches keep */
static PyObject *seq_texts[SEQ_TEXTS];
static PyObject *dict_texts, *attr_texts; /* owned or NULL: dicts, value -> text */

PyObject *tk_text_find(int k, PyObject *value) {
    PyObject *out = NULL;
    if (k == TK_SEQUENCE_KEY && PyLong_CheckExact(value)) {
        Py_ssize_t i = PyLong_AsSsize_t(value);
        if (i >= 0 && i < SEQ_TEXTS) out = seq_texts[i];
    } else if ((k == TK_DICT_KEY || k == TK_GETATTR_KEY) && PyUnicode_CheckExact(value)) {
        PyObject *texts = k == TK_DICT_KEY ? dict_texts : attr_texts;
        out = texts == NULL ? NULL : PyDict_GetItemWithError(texts, value); /* borrowed (str keys: no code runs) */
    }
    PyErr_Clear();
    Py_XINCREF(out);
    return out;
}

void tk_text_remember(int k, PyObject *value, PyObject *text) {
    if (k == TK_SEQUENCE_KEY && PyLong_CheckExact(value)) {
        Py_ssize_t i = PyLong_AsSsize_t(value);
        if (i >= 0 && i < SEQ_TEXTS && seq_texts[i] == NULL) {
            Py_INCREF(text);
            seq_texts[i] = text;
        }
    } else if ((k == TK_DICT_KEY || k == TK_GETATTR_KEY) && PyUnicode_CheckExact(value)) {
        PyObject **texts = k == TK_DICT_KEY ? &dict_texts : &attr_texts;
        if (*texts == NULL) *texts = PyDict_New();
        if (*texts != NULL && PyDict_GET_SIZE(*texts) >= TEXTS_LIMIT) PyDict_Clear(*texts);
        if (*texts != NULL) PyDict_SetItem(*texts, value, text);
    }
    PyErr_Clear();
}

/* -- spare arrays --------------------------------------------------------------------------------- */
#define SPARE_STACK_LIMIT 4096       /* frames: a deeper walk's arrays are freed, not kept */
#define SPARE_BUFFER_LIMIT (1 << 16) /* records */
static struct {
    void *frames, *path;
    Py_ssize_t cap;
} spare_stack;
static struct {
    PyObject **items;
    Py_ssize_t cap;
} spare_buffer;

int tk_spare_stack_take(void **frames, void **path, Py_ssize_t *cap) {
    if (spare_stack.frames == NULL) return 0;
    *frames = spare_stack.frames;
    *path = spare_stack.path;
    *cap = spare_stack.cap;
    spare_stack.frames = spare_stack.path = NULL;
    spare_stack.cap = 0;
    return 1;
}

int tk_spare_stack_give(void *frames, void *path, Py_ssize_t cap) {
    if (spare_stack.frames != NULL || cap > SPARE_STACK_LIMIT) return 0;
    spare_stack.frames = frames;
    spare_stack.path = path;
    spare_stack.cap = cap;
    return 1;
}

PyObject **tk_spare_buffer_take(Py_ssize_t *cap) {
    PyObject **items = spare_buffer.items;
    if (items == NULL) return NULL;
    *cap = spare_buffer.cap;
    spare_buffer.items = NULL;
    spare_buffer.cap = 0;
    return items;
}

int tk_spare_buffer_give(PyObject **items, Py_ssize_t cap) {
    if (spare_buffer.items != NULL || cap > SPARE_BUFFER_LIMIT) return 0;
    spare_buffer.items = items;
    spare_buffer.cap = cap;
    return 1;
}

/* -- clear and inspect ---------------------------------------------------------------------------- */
static Py_ssize_t filled(PyObject **slots, Py_ssize_t n) {
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; i < n; i++) used += slots[i] != NULL;
    return used;
}

/* info[name] = (size, limit): 0, or -1 with an exception. */
static int put_info(PyObject *info, const char *name, Py_ssize_t size, Py_ssize_t limit) {
    PyObject *pair = Py_BuildValue("(nn)", size, limit);
    int rc = pair == NULL ? -1 : PyDict_SetItemString(info, name, pair);
    Py_XDECREF(pair);
    return rc;
}

PyObject *tk_cache_info(void) {
    Py_ssize_t bigs = 0, orders = 0, records = 0, datas = 0, node_recs = 0;
    for (int i = 0; i < NODE_SLOTS; i++) {
        datas += node_data[i].data != NULL;
        node_recs += node_records[i].record != NULL;
    }
    for (int i = 0; i < BIG_SLOTS; i++) bigs += big_dicts[i].original != NULL;
    for (int i = 0; i < ORDER_SLOTS; i++) orders += kept_orders[i].order != NULL;
    for (int i = 0; i < SHARED_RECORDS; i++) records += shared_records[i].record != NULL;
    PyObject *info = PyDict_New();
    if (info == NULL) return NULL;
    if (put_info(info, "big_dicts", bigs, BIG_SLOTS) < 0 || put_info(info, "big_dict_keys", big_keys, BIG_KEYS) < 0 ||
        put_info(info, "orders", orders, ORDER_SLOTS) < 0 || put_info(info, "order_keys", order_keys, ORDER_KEYS) < 0 ||
        put_info(info, "records", records, SHARED_RECORDS) < 0 ||
        put_info(info, "node_data", datas, NODE_SLOTS) < 0 || put_info(info, "node_records", node_recs, NODE_SLOTS) < 0 ||
        put_info(info, "counts", filled(counts, COUNTS), COUNTS) < 0 ||
        put_info(info, "spread_keys", filled(&spread[0][0], (SPREAD - 1) * SPREAD_INDEXES),
                 (SPREAD - 1) * SPREAD_INDEXES) < 0 ||
        put_info(info, "sequence_texts", filled(seq_texts, SEQ_TEXTS), SEQ_TEXTS) < 0 ||
        put_info(info, "dict_texts", dict_texts == NULL ? 0 : PyDict_GET_SIZE(dict_texts), TEXTS_LIMIT) < 0 ||
        put_info(info, "attr_texts", attr_texts == NULL ? 0 : PyDict_GET_SIZE(attr_texts), TEXTS_LIMIT) < 0 ||
        put_info(info, "spare_stack", spare_stack.cap, SPARE_STACK_LIMIT) < 0 ||
        put_info(info, "spare_buffer", spare_buffer.cap, SPARE_BUFFER_LIMIT) < 0) {
        Py_DECREF(info);
        return NULL;
    }
    return info;
}

/* Empty n owned slots, their references moved to `gone` (to drop later), or dropped at once
 * where there is no list. */
static void take_all(PyObject **slots, Py_ssize_t n, PyObject *gone) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = slots[i];
        slots[i] = NULL;
        if (item != NULL && (gone == NULL || PyList_Append(gone, item) < 0)) PyErr_Clear();
        Py_XDECREF(item); /* (the list's reference holds it; without the list, dropped here) */
    }
}

static void node_caches_take(PyObject *gone) {
    for (int i = 0; i < NODE_SLOTS; i++) {
        take_all(&node_data[i].fields, 1, gone);
        take_all(&node_data[i].data, 1, gone);
        take_all(&node_records[i].record, 1, gone);
    }
}

void tk_node_caches_clear(void) {
    PyObject *gone = PyList_New(0);
    if (gone == NULL) PyErr_Clear();
    node_caches_take(gone);
    Py_XDECREF(gone);
}

void tk_cache_clear(void) {
    /* every reference is moved to `gone` first, dropped once all the caches are empty */
    PyObject *gone = PyList_New(0);
    if (gone == NULL) PyErr_Clear();
    for (int i = 0; i < BIG_SLOTS; i++) {
        PyObject *old[2];
        big_empty(&big_dicts[i], old);
        take_all(old, 2, gone);
    }
    for (int i = 0; i < ORDER_SLOTS; i++) {
        PyObject *old[TK_KEPT_WHAT + 1];
        order_empty(&kept_orders[i], old);
        take_all(old, TK_KEPT_WHAT + 1, gone);
    }
    for (int i = 0; i < SHARED_RECORDS; i++) take_all(&shared_records[i].record, 1, gone);
    node_caches_take(gone);
    take_all(counts, COUNTS, gone);
    take_all(&spread[0][0], (SPREAD - 1) * SPREAD_INDEXES, gone);
    take_all(seq_texts, SEQ_TEXTS, gone);
    take_all(&dict_texts, 1, gone);
    take_all(&attr_texts, 1, gone);
    PyMem_Free(spare_stack.frames);
    PyMem_Free(spare_stack.path);
    spare_stack.frames = spare_stack.path = NULL;
    spare_stack.cap = 0;
    PyMem_Free(spare_buffer.items);
    spare_buffer.items = NULL;
    spare_buffer.cap = 0;
    big_next = order_next = 0;
    Py_XDECREF(gone);
}
