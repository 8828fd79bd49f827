/* treekit's native core: shared declarations.
 *
 * C walks, Python speaks: these functions read the registry that treekit._registry keeps
 * (its TYPES dict and NodeType entries) and fill the same post-order records as the
 * pure-Python core. They never word an error. A walk that meets anything unusual (a
 * structure mismatch, a suspected cycle, an exception from user code, a flatten function
 * returning something other than a list or tuple) returns DEFER, and the caller hands the
 * whole call to the Python function it mirrors, which raises the one message.
 *
 * References: functions returning PyObject * return a new reference (NULL on error);
 * "borrowed" is said where it is not so.
 */
#ifndef TREEKIT_NATIVE_H
#define TREEKIT_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef Py_GIL_DISABLED
#error "treekit's native core needs the GIL; the free-threaded build uses the pure-Python core"
#endif

/* The functions shared between the files stay inside the extension (no PLT calls). */
#if defined(__GNUC__) && !defined(_WIN32)
#define TK_API __attribute__((visibility("hidden")))
#else
#define TK_API
#endif

/* Py_XSETREF is public only from 3.12: the same, here. */
#define Py_XSETREF_COMPAT(dst, src)   \
    do {                              \
        PyObject *old_ = (PyObject *)(dst); \
        (dst) = (src);                \
        Py_XDECREF(old_);             \
    } while (0)

/* What a walk returns when the Python function it mirrors must take the call over. */
#define DEFER 1
/* What tk_flatten_node returns when a flatten function (the user's code) raised an Exception:
 * it is still set, and the walker notes it with the node's key path and raises it
 * (tk_raise_noted); no user function is called again to find that out. */
#define RAISED 2

/* User code, and when it runs. Any call that allocates a container object can run a
 * garbage collection, and a collection runs gc.callbacks and finalizers: any Python code,
 * which may change any list or dict the user can reach, evict the caches below or walk
 * again (re-entrantly). So, in every function here:
 *  - an object used after such a point is owned (a reference taken before it), or borrowed
 *    from an exact tuple that is owned (tuples do not change);
 *  - a list's or a dict's size is read again after such a point before it is indexed;
 *  - a container the core fills is kept from the collector (untracked) until it is whole,
 *    so that gc.get_objects() never hands user code a half-made one;
 *  - a static cache slot read before such a point is looked up again after it.
 * Calls that run no Python code: PyMem_*, PyLong_AsSsize_t on an int, PyTuple_GET_ITEM,
 * Py_INCREF, PyDict_Next (no hashing), PyList_Append/SetSlice (the list's storage only),
 * making an int or a str (not containers). Py_DECREF can run a finalizer: the core drops
 * references last, after it has stopped reading what they guard. */

/* Objects read from the Python modules at first use (strong references, kept for the
 * life of the process). The registry's TYPES, ORDERS, _FIELD_KEYS and _SEQ_KEYS are read
 * from the module at every call instead, so that a rebinding there is seen here. */
typedef struct {
    int ready;
    PyObject *registry;   /* treekit._registry */
    PyObject *treedef_mod;/* treekit._treedef */
    PyObject *traverse;   /* treekit._traverse */
    PyObject *errors;     /* treekit._errors */
    PyObject *LIST, *TUPLE, *DICT, *NONE, *NAMEDTUPLE; /* built-in NodeType entries */
    PyObject *TreeDef;    /* treekit._treedef.TreeDef */
    PyObject *LEAF;       /* treekit._treedef.LEAF, the record every leaf shares */
    PyObject *resolve;    /* treekit._registry.resolve */
    PyObject *unflatten;  /* treekit._treedef._unflatten(ntype, data, children) */
    PyObject *SequenceKey, *DictKey, *GetAttrKey, *FlattenedIndexKey; /* treekit._keys */
    PyObject *s_flatten, *s_original, *s_positions, *s_TYPES, *s_ORDERS, *s_nodes, *s_FIELD_KEYS, *s_SEQ_KEYS;
    PyObject *s_hash, *s_builder, *s_plain, *s_keyed, *s_unflatten, *s_func, *s_simple, *s_keys, *s_separator;
    PyObject *s_finish, *s_walk, *s_tree;
    int plain_treedef;    /* TreeDef's slots are the three tk_treedef sets */
    PyObject *s_MAX_DEPTH, *s_key, *s_idx, *s_name, *s_build, *s_empty;
    PyObject *empty_tuple;
    PyObject *deferred;   /* _native.DEFER: what a function returns to hand a call back */
    PyObject *small[8];   /* 0..7 as ints */
    Py_ssize_t entry_offset[4]; /* SequenceKey.idx, DictKey.key, GetAttrKey.name, FlattenedIndexKey.key:
                                   the slot's offset in the object, 0 if not read directly */
} State;

TK_API extern State S;

TK_API int tk_ready(void);
/* TYPES[type(x)], resolved like treekit._registry.lookup: a NodeType, Py_None for a leaf
 * type; NULL with an exception on failure. *owned gets a reference to release; *resolved
 * is set to 1 if treekit._registry.resolve (Python code) was called. */
TK_API PyObject *tk_lookup(PyObject *types, PyObject *x, PyObject **owned, int *resolved);
/* (*owned, where set, is the one reference to the NodeType the caller may rely on.) */
/* v as an int: new reference (0..7 shared). */
static inline PyObject *tk_int(Py_ssize_t v) {
    if (v >= 0 && v < 8) {
        Py_INCREF(S.small[v]);
        return S.small[v];
    }
    return PyLong_FromSsize_t(v);
}
/* The garbage collector. A gen-0 collection every 700 new container objects walks every
 * young one that is tracked, so a walk making a tuple per leaf spent about 45% of its time
 * there. What the core makes and no cycle can pass through is untracked at once, as the
 * collector itself would untrack it at its first look (tuples: _PyTuple_MaybeUntrack):
 * an exact tuple none of whose items is tracked, and a key entry of the four built-in
 * classes whose value is not tracked (a str, an int). Public API (3.9+). */
static inline void tk_untrack_tuple(PyObject *t) { /* t: an exact tuple, its items set */
    for (Py_ssize_t i = PyTuple_GET_SIZE(t); i-- > 0;)
        if (PyObject_GC_IsTracked(PyTuple_GET_ITEM(t, i))) return;
    PyObject_GC_UnTrack(t);
}
/* `entry`: a built-in key entry (exact class) just given `value`. */
static inline void tk_track_entry(PyObject *entry, PyObject *value) {
    if (!PyObject_IS_GC(entry)) return;
    if (PyObject_GC_IsTracked(value)) {
        if (!PyObject_GC_IsTracked(entry)) PyObject_GC_Track(entry);
    } else {
        PyObject_GC_UnTrack(entry);
    }
}

/* A container the core made untracked and has now filled: tracked if an item is (an exact
 * tuple none of whose items is tracked can be in no cycle, and stays untracked). */
static inline void tk_filled(PyObject *t) {
    if (PyObject_GC_IsTracked(t)) return;
    Py_ssize_t n = PyTuple_Check(t) ? PyTuple_GET_SIZE(t) : PyList_GET_SIZE(t);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_GC_IsTracked(PySequence_Fast_GET_ITEM(t, i))) {
            PyObject_GC_Track(t);
            return;
        }
    }
    if (!PyTuple_CheckExact(t)) PyObject_GC_Track(t);
}

/* The current exception, raised by a flatten function of a `cls` at `label` + `path`, noted
 * as treekit._errors.flatten_noted notes it (the user's exception itself, class and
 * traceback kept, with a note naming where; or, where that gives another exception, that one
 * raised from it). Always returns -1, with an exception set. */
TK_API int tk_raise_noted(PyObject *label, PyObject *path, PyObject *cls);
/* The key path (a tuple) out of the pure walker's frames (node, ntype, data, children, n, i):
 * treekit._traverse._frame_keys. New reference. */
TK_API PyObject *tk_frame_path(PyObject *frames);

/* TreeDef(records), records a tuple of node records: new reference. */
TK_API PyObject *tk_treedef(PyObject *records);

/* node.c: what both walkers share. A walk's context holds the registry's dicts and what
 * the walk remembers between nodes. */
typedef struct {
    PyTypeObject *type; /* owned (a type freed meanwhile and another made at its address must not match) */
    PyObject *ntype;    /* borrowed: Py_None or a built-in entry (the module holds them) */
} Memo;
#define MEMO_SIZE 16

/* The last dict flattened, if its keys were few: the very key objects and the node data
 * made for them (and its key entries, once made). */
#define LAST_KEYS 8
#define LAST_DICTS 4 /* the last dicts of a few key sets (a transformer's blocks hold several) */
typedef struct {
    Py_ssize_t n;
    PyObject *keys[LAST_KEYS];  /* borrowed from `original` */
    PyObject *original;         /* owned: the key objects in insertion order, a tuple */
    Py_ssize_t at[LAST_KEYS];   /* where each key's value goes in leaf order */
    PyObject *data;             /* owned: the key tuple or a shared `_Keys` */
    PyObject *entries;          /* owned or NULL: DictKey entries of `entries_for` */
    PyObject *entries_for;      /* borrowed: `data` when the entries were made */
} LastDict;

typedef struct {
    PyObject *types, *orders, *field_keys, *seq_keys; /* owned; all but types may be NULL */
    PyObject *plain_of, *plain, *keyed, *finish; /* owned or NULL: the last flatten function met, its
                                                    `plain`, `keyed` and `finish` */
    Memo memo[MEMO_SIZE];
    unsigned memo_used;        /* bit k: memo[k] holds a type */
    LastDict last[LAST_DICTS]; /* by the first key's address and the number of keys */
    LastDict *recent;          /* the one that last served a dict */
} Ctx;

TK_API int tk_ctx_open(Ctx *c, int with_path);
/* treekit._traverse.MAX_DEPTH (-1 if it is not a size; a very large number where it is missing). */
TK_API Py_ssize_t tk_max_depth(void);
TK_API void tk_ctx_close(Ctx *c);
/* Forget what the context remembers about types: Python code ran. */
TK_API void tk_forget(Ctx *c);
/* An exception is set: 1 (cleared) if it is an Exception, to hand the call back; 0 if it
 * must go on (KeyboardInterrupt, MemoryError's parent BaseException, ...). */
TK_API int tk_defer_error(void);
/* tk_lookup through the context's memo: *owned as tk_lookup's. */
TK_API PyObject *tk_ctx_lookup(Ctx *c, PyObject *x, PyObject **owned);
/* 1 if TYPES says instances of tp are leaves, 0 if not or not known yet. */
TK_API int tk_ctx_leaf_type(Ctx *c, PyTypeObject *tp);
/* tk_ctx_lookup and tk_ctx_leaf_type, the memo's answer read here (no call) where it has one. */
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
/* path + (key,): new reference. */
TK_API PyObject *tk_extend(PyObject *path, PyObject *key);
/* A node's (children, node data, keys) as its entry's flatten function gives them: new
 * references (*keys only with_path: a sequence with at least as many items as children).
 * 0 done, DEFER (before any user code ran), RAISED (the flatten function raised), -1 error.
 * *kids may be the node itself (a list): its size must be read again after user code. */
TK_API int tk_flatten_node(Ctx *c, PyObject *node, PyObject *ntype, int with_path, PyObject **kids, PyObject **data,
                    PyObject **keys);

/* What is kept for the few big key orders (`_Keys` of more than LAST_KEYS keys) met last,
 * bounded by keys in all: their DictKey entries, and a dict of their keys in insertion order
 * (values None) that dicts of that order are copied from. */
#define KEPT_ENTRIES 0
#define KEPT_TEMPLATE 1
#define KEPT_PATHS 2 /* the key paths (entry,) of the order's entries: a big dict at the root */
#define KEPT_WHAT 3
/* What is kept for `order`: new reference, or NULL (no exception) if nothing. */
TK_API PyObject *tk_kept(PyObject *order, int what);
/* Keep `item` (borrowed) for `order`, if the bound allows. */
TK_API void tk_keep(PyObject *order, int what, PyObject *item);
/* The key paths ((entry,) for each) of a big dict at the root whose node data is `order`
 * and whose entries (from dict_entries) are `entries`: new reference, a tuple; NULL (no
 * exception) where `entries` are not those kept for `order`. Made at first ask, kept. */
TK_API PyObject *tk_root_paths(PyObject *order, PyObject *entries);

/* walk.c: treekit._traverse.flatten (plain and with_path; takes_path: is_leaf(path, x)).
 * 0 done (*records: a new tuple of the node records), DEFER (a mismatch, a cycle, a tree too
 * deep: nothing raised), -1 error (a user function's exception noted with its key path, as
 * the pure walker raises it). `records` NULL: the leaves only (no records made). `label`
 * (borrowed; NULL: 'tree') names the tree in errors. */
TK_API int tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, int takes_path, PyObject *leaves,
                   PyObject **records, PyObject *paths, PyObject *label);

/* guide.c: treekit._treedef.TreeDef._walk without keys. 0 done (*out: a new list of the
 * subtrees), DEFER, -1 error, RAISED (*out: (record index, exception), see guide.c). */
TK_API int tk_up_to(PyObject *records, PyObject *tree, int strict, PyObject *is_leaf, PyObject **out);

/* build.c: treekit._treedef.TreeDef._build. The tree, or NULL with an exception (user
 * unflatten errors come from treekit._treedef._unflatten, as in the pure core); DEFER is
 * signalled by setting *defer. `nodes`: a tuple or a list of records. */
TK_API PyObject *tk_build(PyObject *nodes, PyObject *leaves, int *defer);

/* map.c: treekit._ops.tree_map / tree_map_with_path, fused. */
TK_API PyObject *tk_map(PyObject *f, PyObject *tree, PyObject *rest, PyObject *is_leaf, int with_path, int takes_path,
                 PyObject *failed);

#endif
