/* cache.h: every process-wide cache of the native core, each bounded, with one clear
 * (tk_cache_clear, _native.clear_caches()) and one inspect entry (tk_cache_info,
 * _native.cache_info()). What a walk remembers only while it runs (the context's memo and
 * last dicts: node.h; its shared records: records.h) is not here.
 *
 * What they hold: the keys of big dicts met (and tuples, `SortedKeys`, DictKey entries and dicts
 * of None made of them; keys as treekit.core._registry.ORDERS holds them, bounded by keys in all),
 * ints, key entries of ints, the registry's own list/tuple/None entries, texts; never a
 * leaf, nor node data of a user's node: a tree dropped is freed but for its big dicts' keys
 * (tests/test_caches.py). A lookup returns a slot or a new
 * reference and never runs Python code; a slot is valid until Python code runs (see state.h:
 * a collection there may clear the caches). */
#ifndef TREEKIT_CACHE_H
#define TREEKIT_CACHE_H

#include "state.h"

/* -- big dicts: the node data of the few dicts of more than TK_SMALL_DICT keys met last, by
 * their key objects in insertion order, bounded by keys in all (see dict.c) */
#define TK_SMALL_DICT 8
typedef struct {
    PyObject *data;     /* owned or NULL: a key tuple or a `SortedKeys` */
    PyObject *original; /* owned or NULL: the keys in insertion order, a tuple */
    Py_ssize_t *at;     /* PyMem or NULL (insertion order is leaf order): where each key's value goes */
} tk_big_dict;
/* The slot remembering a big dict of n keys whose first key is `first`, or NULL.
 * Return value: Borrowed reference (to the slot: valid until Python code runs). */
TK_API const tk_big_dict *tk_big_find(PyObject *first, Py_ssize_t n);
/* Is `data` the node data of a big dict remembered? */
TK_API int tk_big_holds(PyObject *data);
/* Remember `data` (the node data of a big dict: `original` its keys in insertion order,
 * `positions` a tuple of ints or NULL for leaf order, where each goes), if the bound allows.
 * Does not steal its arguments. */
TK_API void tk_big_remember(PyObject *data, PyObject *original, PyObject *positions);

/* -- what is kept for the few big key orders (node data of more than TK_SMALL_DICT keys)
 * met last, bounded by keys in all */
enum {
    TK_KEPT_ENTRIES,  /* their DictKey entries, a tuple (dict.c) */
    TK_KEPT_TEMPLATE, /* a dict of their keys in insertion order, values None, or None at first (build.c) */
    TK_KEPT_PATHS,    /* the key paths (entry,) of their entries: a big dict at the root (walk.c) */
    TK_KEPT_WHAT
};
/* What is kept for `order`, or NULL (no exception) if nothing.
 * Return value: New reference. */
TK_API PyObject *tk_kept(PyObject *order, int what);
/* Keep `item` for `order`, if the bound allows. Does not steal its arguments. */
TK_API void tk_keep(PyObject *order, int what, PyObject *item);
/* The key paths ((entry,) for each) of a big dict at the root whose node data is `order` and
 * whose entries (from tk_dict_entries) are `entries`, a tuple; NULL (no exception) where
 * `entries` are not those kept for `order`. Made at first ask, kept.
 * Return value: New reference. */
TK_API PyObject *tk_root_paths(PyObject *order, PyObject *entries);

/* -- node records of lists, tuples and Nones (node data None), kept from walk to walk: they
 * hold nothing of the user's, and a tree's shape repeats from call to call. Direct-mapped by
 * a hash of the record (records.c). */
typedef struct {
    PyObject *record; /* owned or NULL */
    Py_ssize_t arity, num_leaves, num_nodes;
} tk_made;
/* The slot for records of hash h. Return value: Borrowed reference (to the slot). */
TK_API tk_made *tk_shared_record(uintptr_t h);
/* v as an int, for the records' counts (those below a bound made once and kept).
 * Return value: New reference; NULL with an exception. */
TK_API PyObject *tk_count(Py_ssize_t v);

/* -- dataclass nodes' node data and records, kept from walk to walk: a dataclass entry's node
 * data (the tuple of its meta fields' values) is the same tuple while those values are the
 * same objects, each a small value that refers to nothing (an exact str, int, float, bool,
 * complex or None: what static fields hold): then its
 * records are the same too (records.c). Direct-mapped by a hash of the fields and the values
 * (node data), of the record (records). Emptied before each full collection (tk_node_caches_clear,
 * from treekit.core._registry), so that they keep no dropped class alive. */
typedef struct {
    PyObject *fields; /* owned or NULL: the entry's dataclass_fields */
    PyObject *data;   /* owned or NULL: an untracked tuple */
} tk_node_data;
/* The slots for node data and for records of hash h. Return value: Borrowed reference (to the slot). */
TK_API tk_node_data *tk_node_data_slot(uintptr_t h);
TK_API tk_made *tk_node_record(uintptr_t h);
/* Empty those two caches (the references dropped last). */
TK_API void tk_node_caches_clear(void);

/* -- equal copies of the shared SequenceKey(i) of treekit.core._registry._SEQ_KEYS (walk.c): the
 * entry to keep at `position` of a key path for `key`, the shared SequenceKey(index).
 * Return value: New reference (`key` itself where no copy serves, or none can be made). */
TK_API PyObject *tk_spread_key(PyObject *key, Py_ssize_t position, Py_ssize_t index);

/* -- the texts of entries seen before (keystr.c): "[i]" for SequenceKey(i), 0 <= i < 256,
 * "['k']" for DictKey(k) and ".n" for GetAttrKey(n) with k, n exact strs (their repr and
 * format depend on nothing else), a bounded dict each. `k`: the entry's class (state.h). */
/* Return value: New reference, or NULL (no exception) if not seen. */
TK_API PyObject *tk_text_find(int k, PyObject *value);
/* Remember `text` for the entry of class k holding `value`. Does not steal its arguments. */
TK_API void tk_text_remember(int k, PyObject *value, PyObject *text);

/* -- arrays of the walkers kept for the next walk: the last freed, if not too big (taken, so
 * a walk started by user code inside a walk gets its own) */
/* The kept stack (frames and key path arrays, *cap entries each), or 0 (none kept). */
TK_API int tk_spare_stack_take(void **frames, void **path, Py_ssize_t *cap);
/* Keep a walk's stack arrays: 1 (kept), or 0 (the caller frees them). */
TK_API int tk_spare_stack_give(void *frames, void *path, Py_ssize_t cap);
/* The kept records buffer (*cap pointers), or NULL (none kept): a PyMem block, the
 * caller's from here (no references in it). */
TK_API PyObject **tk_spare_buffer_take(Py_ssize_t *cap);
/* Keep a records buffer: 1 (kept), or 0 (the caller frees it). */
TK_API int tk_spare_buffer_give(PyObject **items, Py_ssize_t cap);

/* -- the two entries */
/* Every cache by name: (size, limit), in the unit each is bounded in (slots, keys, entries).
 * Return value: New reference, a dict; NULL with an exception. */
TK_API PyObject *tk_cache_info(void);
/* Empty every cache, the references dropped last. */
TK_API void tk_cache_clear(void);

#endif
