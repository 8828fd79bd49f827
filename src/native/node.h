/* node.h: one node at a time, for the walkers (walk.c, guide.c): a type's NodeType
 * (treekit.core._registry.lookup), and a node's children, node data and keys as its entry's
 * flatten function gives them (node.c), dicts read here (dict.c). A walk's context holds
 * the registry's dicts and what the walk remembers between nodes. */
#ifndef TREEKIT_NODE_H
#define TREEKIT_NODE_H

#include "cache.h"
#include "known.h"

/* TYPES' answer for a type met since Python code last ran: leaf types and the built-in
 * entries only (kept alive by the module), forgotten (tk_forget) whenever a call out
 * (is_leaf, a flatten function, resolve, a key's comparison) may have changed the registry. */
typedef struct {
    PyTypeObject *type; /* owned (a type freed meanwhile and another made at its address must not match) */
    PyObject *ntype;    /* borrowed: Py_None or a built-in entry (the module holds them) */
} Memo;
#define MEMO_SIZE 16

/* The last dicts flattened of a few small key sets (a transformer's blocks hold several): the
 * very key objects and the node data made for them (and its key entries, once made). */
#define LAST_DICTS 4
typedef struct {
    Py_ssize_t n;
    PyObject *keys[TK_SMALL_DICT]; /* borrowed from `original` */
    PyObject *original;            /* owned: the key objects in insertion order, a tuple */
    Py_ssize_t at[TK_SMALL_DICT];  /* where each key's value goes in leaf order */
    PyObject *data;                /* owned: the key tuple or a shared `SortedKeys` */
    PyObject *entries;             /* owned or NULL: DictKey entries of `entries_for` */
    PyObject *entries_for;         /* borrowed: `data` when the entries were made */
} LastDict;

typedef struct {
    PyObject *types, *orders, *field_keys, *seq_keys; /* owned; all but types may be NULL */
    PyObject *plain_of, *plain, *keyed, *finish; /* owned or NULL: the last flatten function met, its
                                                    `plain`, `keyed` and `finish` */
    PyObject *convert_key, *key_kinds; /* owned or NULL: plain_of's `convert_key` and `key_kinds` (a dict;
                                          NULL: convert_key for each), which make `keyed`'s entries treekit's */
    PyObject *fields; /* owned or NULL: plain_of's `dataclass_fields`, checked (data names, meta names, keys) */
    PyObject *known; /* owned or NULL: plain_of's `known`, checked (known.h) */
    PyObject *plain_entry; /* owned or NULL: the entry whose flatten is plain_of, until Python code runs */
    PyObject *quiet_class, *quiet_fields; /* owned or NULL: a class whose getattr of these fields runs no
                                             Python code (see node.c), until Python code runs */
    Memo memo[MEMO_SIZE];
    unsigned memo_used;        /* bit k: memo[k] holds a type */
    int keep_data;             /* 1: node data kept from walk to walk is kept on a miss (records.h); a
                                  guided walk (other trees, against a first one's records) only reads it */
    LastDict last[LAST_DICTS]; /* by the first key's address and the number of keys */
    LastDict *recent;          /* the one that last served a dict */
} Ctx;

/* Open a walk's context (registry's TYPES, ORDERS, _FIELD_KEYS, with_path: _SEQ_KEYS, read
 * now): 0, or -1 with an exception. Closed by tk_ctx_close, on failure too. */
TK_API int tk_ctx_open(Ctx *c, int with_path);
TK_API void tk_ctx_close(Ctx *c);
/* Forget what the context remembers about types: Python code ran. */
TK_API void tk_forget(Ctx *c);

/* TYPES[type(x)] through the context's memo, resolved like treekit.core._registry.lookup: a
 * NodeType, Py_None for a leaf type; NULL with an exception on failure.
 * Return value: Borrowed reference; where *owned is set (not NULL), it is the one reference to
 * the NodeType the caller may rely on, a new reference to release. */
TK_API PyObject *tk_ctx_lookup(Ctx *c, PyObject *x, PyObject **owned);
/* 1 if TYPES says instances of tp are leaves, 0 if not or not known yet. */
TK_API int tk_ctx_leaf_type(Ctx *c, PyTypeObject *tp);
/* tk_ctx_lookup and tk_ctx_leaf_type, the memo's answer read here (no call) where it has one.
 * Return value: Borrowed reference, *owned as tk_ctx_lookup's. */
static inline PyObject *tk_memo_lookup(Ctx *c, PyObject *x, PyObject **owned) {
    Memo *m = &c->memo[((uintptr_t)Py_TYPE(x) >> 4) % MEMO_SIZE];
    if (m->type == Py_TYPE(x)) {
        *owned = NULL;
        return m->ntype;
    }
    return tk_ctx_lookup(c, x, owned);
}
static inline int tk_memo_leaf_type(Ctx *c, PyTypeObject *tp) {
    Memo *m = &c->memo[((uintptr_t)tp >> 4) % MEMO_SIZE];
    if (m->type == tp) return m->ntype == Py_None;
    return tk_ctx_leaf_type(c, tp);
}

/* A list, a tuple, or a tuple subclass that reads as a tuple: safe to index directly. */
TK_API int tk_plain_seq(PyObject *o);

/* A node's (children, node data, keys) as its entry's flatten function gives them: TK_OK
 * (new references in *kids, *data and, with_path only, *keys: a sequence with at least as
 * many items as children), TK_DEFER (before any user code ran), TK_RAISED (the flatten
 * function raised), TK_ERROR. *kids may be the node itself (a list): its size must be read
 * again after user code. */
TK_API tk_status tk_flatten_node(Ctx *c, PyObject *node, PyObject *ntype, int with_path, PyObject **kids,
                                 PyObject **data, PyObject **keys);

/* dict.c: a dict's children and node data as treekit.core._registry._flatten_dict gives them:
 * TK_OK (new references in *kids, *data), TK_DEFER (let the dict entry's flatten function
 * do it), TK_ERROR. *ran_python: a key's comparison (Python code) was called. */
TK_API tk_status tk_flatten_dict(Ctx *c, PyObject *d, PyObject **kids, PyObject **data, int *ran_python);
/* [DictKey(k) for k in keys] as treekit.core._registry._dict_entries makes them, for node data
 * `keys` (a tuple or a `SortedKeys`). Return value: New reference, a tuple; NULL with an exception. */
TK_API PyObject *tk_dict_entries(Ctx *c, PyObject *keys);
/* Drop what the context remembers of dicts. */
TK_API void tk_dicts_close(Ctx *c);

#endif
