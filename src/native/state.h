/* state.h: the bottom layer of treekit's native core. What every other file shares: the
 * calling convention, the rules on references and user code, and the module state (the
 * Python objects and names the core reads, tk_state).
 *
 * The layers, each including only the headers of the layers below it:
 *   state  (state.c)            module state, interned names, imports of the Python names read
 *   cache  (cache.c)            every process-wide cache, with one clear and one inspect entry
 *   node   (node.c, dict.c,     lookup, one node's flatten, dict reading (the walk's context),
 *           known.c)            model libraries' own flatten and unflatten, done here
 *   records (records.c)         post-order node records and the TreeDef made of them
 *   errors (errors.c)           the Python functions that word every error the core raises
 *   walk, guide, build          the three walkers (walk.c, guide.c, build.c)
 *   map, pairs, keystr, entries what the module's functions run (map.c, pairs.c, keystr.c, entries.c)
 *   header (header.c)           a safetensors header's entries (for treekit.checkpoint; state.h only)
 *   module (module.c)           argument parsing and the method table only
 *
 * C walks, Python speaks: the core reads the registry that treekit.core._registry keeps (its
 * TYPES dict and NodeType entries) and fills the same post-order records as the pure-Python
 * core. It never words an error. A walk that meets anything unusual (a structure mismatch,
 * a suspected cycle, a flatten function returning something other than a list or a tuple)
 * returns TK_DEFER, and the module hands the whole call to the Python function it mirrors,
 * which raises the one message.
 *
 * References, in CPython's own words (https://docs.python.org/3/c-api/intro.html):
 *   "Return value: New reference."      the caller owns the object returned and releases it;
 *   "Return value: Borrowed reference." the caller must not release it (nor keep it past
 *                                       user code without taking a reference);
 *   "Steals a reference to x."          the reference to x passes to the function, on
 *                                       failure too;
 *   arguments are borrowed references unless a function says it steals them: a function that
 *   keeps an argument takes a new reference to it ("does not steal").
 * Out-parameters (PyObject **) receive new references on TK_OK, and NULL otherwise, unless a
 * function says other.
 */
#ifndef TREEKIT_STATE_H
#define TREEKIT_STATE_H

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

/* Py_XSETREF is public only from 3.12: the same, here. Steals a reference to src. */
#define Py_XSETREF_COMPAT(dst, src)         \
    do {                                    \
        PyObject *old_ = (PyObject *)(dst); \
        (dst) = (src);                      \
        Py_XDECREF(old_);                   \
    } while (0)

/* The one calling convention: every function that can hand the call back to Python returns
 * a tk_status and gives its results through out-parameters. */
typedef enum {
    TK_ERROR = -1, /* an exception is set; it goes on as it is */
    TK_OK = 0,     /* done: the out-parameters hold new references */
    TK_DEFER = 1,  /* hand the whole call to the Python function mirrored: nothing raised, the
                      out-parameters NULL (the module returns its DEFER object, or calls that
                      function itself) */
    TK_RAISED = 2, /* a user's flatten function raised an Exception, which is still set: the
                      walker notes it with the node's key path (see errors.h); no user function
                      is called again to find that out */
} tk_status;

/* An exception is set: TK_DEFER (cleared) if it is an Exception, to hand the call back;
 * TK_ERROR if it must go on as it is (KeyboardInterrupt, SystemExit, ...). */
TK_API tk_status tk_defer_error(void);

/* User code, and when it runs. Any call that allocates a container object can run a
 * garbage collection, and a collection runs gc.callbacks and finalizers: any Python code,
 * which may change any list or dict the user can reach, clear the caches (cache.h) or walk
 * again (re-entrantly). So, in every function here:
 *  - an object used after such a point is owned (a reference taken before it), or borrowed
 *    from an exact tuple that is owned (tuples do not change);
 *  - a list's or a dict's size is read again after such a point before it is indexed;
 *  - a container the core fills is kept from the collector (untracked) until it is whole,
 *    so that gc.get_objects() never hands user code a half-made one;
 *  - a process-wide cache slot read before such a point is looked up again after it.
 * Calls that run no Python code: PyMem_*, PyLong_AsSsize_t on an int, PyTuple_GET_ITEM,
 * Py_INCREF, PyDict_Next (no hashing), PyList_Append/SetSlice (the list's storage only),
 * making an int or a str (not containers), a member descriptor's get and set. Py_DECREF can
 * run a finalizer: the core drops references last, after it has stopped reading what they
 * guard. */

/* -- every Python name the core reads -----------------------------------------------------------
 * tests/test_native_core.py reads these three lists and checks each name exists where it says.
 * TK_MODULES: X(field, module) imported at first use and kept. */
#define TK_MODULES(X)                       \
    X(registry, "treekit.core._registry")   \
    X(treedef_mod, "treekit.core._treedef") \
    X(build_mod, "treekit.core._build")     \
    X(guide_mod, "treekit.core._guide")     \
    X(traverse, "treekit.core._traverse")   \
    X(errors, "treekit.core._errors")       \
    X(keys, "treekit.core._keys")

/* TK_IMPORTS: X(field, module field, name): module attributes read at first use and kept (a
 * rebinding there is not seen; the names below, in TK_NAMES, are read at every use). */
#define TK_IMPORTS(X)                           \
    X(LIST, registry, "LIST")                   \
    X(TUPLE, registry, "TUPLE")                 \
    X(DICT, registry, "DICT")                   \
    X(NONE, registry, "NONE")                   \
    X(NAMEDTUPLE, registry, "NAMEDTUPLE")       \
    X(resolve, registry, "resolve")             \
    X(TreeDef, treedef_mod, "TreeDef")          \
    X(LEAF, treedef_mod, "LEAF")                \
    X(unflatten, build_mod, "unflatten_node")   \
    X(SequenceKey, keys, "SequenceKey")         \
    X(DictKey, keys, "DictKey")                 \
    X(GetAttrKey, keys, "GetAttrKey")           \
    X(FlattenedIndexKey, keys, "FlattenedIndexKey")

/* TK_NAMES: X(field, "where it is read", name): names interned at first use, read at every
 * use (tk_state.s_<field>). "where" is a module, a class, or `Class.method` (a parameter
 * name of it), as the test finds them. */
#define TK_NAMES(X)                                                              \
    X(TYPES, "treekit.core._registry", "TYPES")                                  \
    X(ORDERS, "treekit.core._registry", "ORDERS")                                \
    X(FIELD_KEYS, "treekit.core._registry", "_FIELD_KEYS")                       \
    X(SEQ_KEYS, "treekit.core._registry", "_SEQ_KEYS")                           \
    X(MAX_DEPTH, "treekit.core._traverse", "MAX_DEPTH")                          \
    X(pure_flatten, "treekit.core._traverse", "pure_flatten")                    \
    X(pure_flatten_pairs, "treekit.core._traverse", "pure_flatten_pairs")        \
    X(changed_error, "treekit.core._traverse", "changed_error")                  \
    X(frame_keys, "treekit.core._traverse", "_frame_keys")                       \
    X(flatten_noted, "treekit.core._errors", "flatten_noted")                    \
    X(not_a_bool, "treekit.core._errors", "not_a_bool")                          \
    X(unflatten_noted, "treekit.core._errors", "unflatten_noted")                \
    X(leaves_changed, "treekit.core._build", "leaves_changed")                   \
    X(flatten, "treekit.core._registry.NodeType", "flatten")                     \
    X(unflatten, "treekit.core._registry.NodeType", "unflatten")                 \
    X(type, "treekit.core._registry.NodeType", "type")                           \
    X(plain, "flatten function", "plain")                                        \
    X(keyed, "flatten function", "keyed")                                        \
    X(finish, "flatten function", "finish")                                      \
    X(convert_key, "flatten function", "convert_key")                            \
    X(key_kinds, "flatten function", "key_kinds")                                \
    X(func, "unflatten function", "func")                                        \
    X(dataclass_fields, "dataclass flatten function", "dataclass_fields")        \
    X(known, "JAX-only flatten and unflatten functions", "known")                \
    X(mapping, "an nnx State", "_mapping")                                       \
    X(new, "an nnx Variable", "_new")                                            \
    X(trace_state, "an nnx Variable", "_trace_state")                            \
    X(var_metadata, "an nnx Variable", "_var_metadata")                          \
    X(raw_value, "an nnx Variable", "_raw_value")                                \
    X(tracers, "flax.nnx.variablelib", "tracers")                                \
    X(TraceState, "flax.nnx.tracers", "TraceState")                              \
    X(dataclass_init, "dataclass unflatten function", "dataclass_init")          \
    X(original, "treekit.core._registry.SortedKeys", "original")                 \
    X(positions, "treekit.core._registry.SortedKeys", "positions")               \
    X(slots, "treekit.core._treedef.TreeDef", "__slots__")                       \
    X(nodes, "treekit.core._treedef.TreeDef", "_nodes")                          \
    X(hash, "treekit.core._treedef.TreeDef", "_hash")                            \
    X(builder, "treekit.core._treedef.TreeDef", "_builder")                      \
    X(guide, "treekit.core._guide", "guide")                                     \
    X(again, "treekit.core._guide.guide", "again")                               \
    X(raised, "treekit.core._guide.guide", "raised")                             \
    X(build, "treekit.core._treedef.TreeDef", "_build")                          \
    X(idx, "treekit.core._keys.SequenceKey", "idx")                              \
    X(key, "treekit.core._keys.DictKey", "key")                                  \
    X(name, "treekit.core._keys.GetAttrKey", "name")                             \
    X(flat_key, "treekit.core._keys.FlattenedIndexKey", "key")                   \
    X(init, "treekit.core._keys.DictKey", "__init__")                            \
    X(doc, "treekit.core._keys.keystr", "__doc__")                               \
    X(keys, "treekit.core._keys.keystr", "keys")                                 \
    X(simple, "treekit.core._keys.keystr", "simple")                             \
    X(separator, "treekit.core._keys.keystr", "separator")                       \
    X(tree, "treekit.core._traverse.pure_flatten", "tree")                       \
    X(is_leaf, "treekit.core._traverse.pure_flatten", "is_leaf")                 \
    X(with_path, "treekit.core._traverse.pure_flatten", "with_path")             \
    X(leaf_takes_path, "treekit.core._traverse.pure_flatten", "leaf_takes_path") \
    X(label, "treekit.core._traverse.pure_flatten", "label")                     \
    X(objclass, "types.MemberDescriptorType", "__objclass__")                    \
    X(sizeof, "dict", "__sizeof__")

/* The four built-in key entry classes, by their place in TK_IMPORTS. */
enum { TK_SEQUENCE_KEY, TK_DICT_KEY, TK_GETATTR_KEY, TK_FLAT_KEY, TK_KEY_CLASSES };

/* A key entry class's one field, read and set through its member descriptor's own get and
 * set (the descriptor of a __slots__ field: public API, and no Python code runs). */
typedef struct {
    PyObject *cls;   /* owned or NULL */
    PyObject *descr; /* owned or NULL: cls's member descriptor of the field, NULL if cls's field is not one */
} tk_field;

/* The module state: objects read from the Python modules at first use (strong references,
 * kept for the life of the process). */
typedef struct {
    int ready;
#define TK_MODULE_FIELD(field, module) PyObject *field;
    TK_MODULES(TK_MODULE_FIELD)
#define TK_IMPORT_FIELD(field, module, name) PyObject *field;
    TK_IMPORTS(TK_IMPORT_FIELD)
#define TK_NAME_FIELD(field, where, name) PyObject *s_##field;
    TK_NAMES(TK_NAME_FIELD)
    PyObject *empty_str;     /* '' */
    PyObject *empty_tuple;   /* () */
    int plain_treedef;       /* TreeDef's __slots__ are the three tk_treedef sets */
    tk_field fields[TK_KEY_CLASSES]; /* SequenceKey.idx, DictKey.key, GetAttrKey.name, FlattenedIndexKey.key */
} tk_module_state;

TK_API extern tk_module_state tk_state;

/* Read the state (once): 0, or -1 with an exception. */
TK_API int tk_ready(void);
/* Intern TK_NAMES only (what treekit.core._keys's classes need while that module is imported,
 * before the state can be read): 0, or -1 with an exception. */
TK_API int tk_names(void);

/* cls's member descriptor for the attribute `name` (interned by tk_names), where cls is a
 * class whose `name` is a __slots__ field of its own: 0 (*field set, references taken), or
 * -1 (no exception) where it is not. */
TK_API int tk_field_read(PyObject *cls, PyObject *name, tk_field *field);
TK_API void tk_field_clear(tk_field *field);

/* The value of entry's field: entry must be an instance of field->cls (exactly, or of a
 * subclass). Return value: New reference; NULL with an exception (an unset slot). */
static inline PyObject *tk_field_get(const tk_field *field, PyObject *entry) {
    return PyMemberDescr_Type.tp_descr_get(field->descr, entry, field->cls);
}
/* Set entry's field to value: 0, or -1 with an exception. Does not steal value. */
static inline int tk_field_set(const tk_field *field, PyObject *entry, PyObject *value) {
    return PyMemberDescr_Type.tp_descr_set(field->descr, entry, value);
}

/* A new entry of the k-th built-in key class holding `value`, made as the dataclass's
 * __init__ makes it (object.__new__, then its field set), without a call. Return value: New
 * reference; NULL with an exception. Does not steal value. */
TK_API PyObject *tk_entry_new(int k, PyObject *value);

/* -- the garbage collector -------------------------------------------------------------------
 * A gen-0 collection every 700 new container objects walks every young one that is tracked,
 * so a walk making a tuple per leaf spent about 45% of its time there. What the core makes
 * and no cycle can pass through is untracked at once, as the collector itself would untrack
 * it at its first look: an exact tuple none of whose items is tracked, and a key entry of the
 * four built-in classes whose value is not tracked (a str, an int). Public API (3.9+). */
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
/* A list or tuple the core made untracked and has now filled: tracked if an item is (an exact
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

#endif
