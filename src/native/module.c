/* module.c: the treekit.core._native module, argument parsing and the method table only. Its
 * functions take the place of the pure-Python core's hot paths when treekit runs the native
 * core (see treekit/core/_core.py); each says which Python function it mirrors:
 *   flatten(tree, is_leaf=None, with_path=False, leaf_takes_path=False, label='tree')
 *       treekit.core._traverse.flatten; hands a tree it does not finish to pure_flatten
 *   leaves(tree, is_leaf=None)          treekit.core._traverse.leaves (no records made)
 *   structure(tree, is_leaf=None)       treekit.core._traverse.structure (no leaves kept)
 *   flatten_pairs(tree, is_leaf, leaf_takes_path)   treekit.core._traverse.flatten_pairs
 *   build(nodes, leaves)                treekit.core._build.interpret; DEFER: let Python build it
 *   guide(nodes, tree, strict=False, is_leaf=None)
 *       treekit.core._guide.guide without keys; DEFER: let Python walk it; a tuple
 *       (record index, exception): the flatten function there raised it
 *   map(f, tree, rest, is_leaf, failed, *, with_path=False, leaf_takes_path=False)
 *       treekit.ops._ops.tree_map / tree_map_with_path; DEFER: let Python map it
 *   keystr(keys, simple, separator)     treekit.core._keys.keystr; DEFER: let Python join it
 *   keystr_function(pure, module)       treekit.keystr, a built-in function (keystr.h)
 *   entry_init(k, cls)                  the k-th key entry class's __init__ (entries.h)
 *   entry_call(k, cls)                  the k-th key entry class called in C (entries.h)
 *   scan_entries(text, pos, left, at, data_start, data_size, sizes, cls, tensors)
 *       treekit.checkpoint._header's entries as writers write them (header.h); -> (pos, last, left, at)
 *   cache_info(), clear_caches()        the process-wide caches (cache.h), for tests
 *   forget_node_data()                  empty the dataclass nodes' kept node data and records
 *                                       (treekit.core._registry, before each full collection)
 * Every function returns a new reference (NULL with an exception). */
#include "entries.h"
#include "header.h"
#include "keystr.h"
#include "map.h"

/* _native.DEFER: what a function returns to hand a call back (TK_DEFER). Owned, for good. */
static PyObject *deferred;

/* Return value: New reference (to DEFER). */
static PyObject *defer(void) {
    Py_INCREF(deferred);
    return deferred;
}

/* A call handed to treekit.core._traverse.<name> (pure_flatten, pure_flatten_pairs), read now.
 * Return value: New reference. */
static PyObject *pure(PyObject *name, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *fn = PyObject_GetAttr(tk_state.traverse, name);
    if (fn == NULL) return NULL;
    PyObject *r = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    Py_DECREF(fn);
    return r;
}

/* flatten(...) -> (leaves, TreeDef, paths or None). Return value: New reference. */
static PyObject *flatten(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (tk_ready() < 0) return NULL;
    PyObject *given[5] = {NULL, Py_None, Py_False, Py_False, NULL};
    PyObject *names[5] = {tk_state.s_tree, tk_state.s_is_leaf, tk_state.s_with_path, tk_state.s_leaf_takes_path,
                          tk_state.s_label};
    if (nargs > 5) return pure(tk_state.s_pure_flatten, args, (size_t)nargs, kwnames);
    for (Py_ssize_t i = 0; i < nargs; i++) given[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        int found = 0;
        for (int i = 0; i < 5; i++) {
            if (kw == names[i] || PyUnicode_Compare(kw, names[i]) == 0) {
                given[i] = args[nargs + k];
                found = 1;
            }
        }
        if (!found) {
            PyErr_Clear();
            return pure(tk_state.s_pure_flatten, args, (size_t)nargs, kwnames);
        }
    }
    int with_path = given[0] == NULL ? -1 : PyObject_IsTrue(given[2]);
    int takes_path = with_path < 0 ? -1 : PyObject_IsTrue(given[3]);
    if (with_path < 0 || takes_path < 0 || (takes_path && (!with_path || given[1] == Py_None))) {
        PyErr_Clear();
        return pure(tk_state.s_pure_flatten, args, (size_t)nargs, kwnames);
    }
    PyObject *leaves = PyList_New(0), *records = NULL, *paths = with_path ? PyList_New(0) : NULL;
    PyObject *result = NULL;
    if (leaves == NULL || (with_path && paths == NULL)) goto done;
    tk_status how = tk_walk(given[0], given[1] == Py_None ? NULL : given[1], with_path, takes_path, leaves, &records,
                            paths, given[4]);
    if (how == TK_DEFER) result = pure(tk_state.s_pure_flatten, args, (size_t)nargs, kwnames);
    if (how != TK_OK) goto done;
    PyObject *treedef = tk_treedef(records);
    if (treedef == NULL) goto done;
    result = PyTuple_Pack(3, leaves, treedef, with_path ? paths : Py_None);
    Py_DECREF(treedef);
done:
    Py_XDECREF(leaves);
    Py_XDECREF(records);
    Py_XDECREF(paths);
    return result;
}

/* leaves(tree, is_leaf=None) -> list and structure(tree, is_leaf=None) -> TreeDef: item
 * `part` of flatten(tree, is_leaf) (0: the leaves, no records made; 1: the TreeDef, no leaves
 * kept). Return value: New reference. */
static PyObject *flatten_part(PyObject *const *args, Py_ssize_t nargs, int part) {
    static const char *const what[2][2] = {{"leaves(tree, is_leaf=None)", "leaves"},
                                           {"structure(tree, is_leaf=None)", "TreeDef"}};
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, what[part][0]);
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    PyObject *is_leaf = nargs > 1 && args[1] != Py_None ? args[1] : NULL, *records = NULL;
    PyObject *out = part ? NULL : PyList_New(0);
    if (!part && out == NULL) return NULL;
    tk_status how = tk_walk(args[0], is_leaf, 0, 0, out, part ? &records : NULL, NULL, NULL);
    if (how == TK_OK && part) {
        out = tk_treedef(records);
        Py_DECREF(records);
    }
    if (how == TK_OK) return out;
    Py_XDECREF(out);
    if (how != TK_DEFER) return NULL;
    PyObject *r = pure(tk_state.s_pure_flatten, args, (size_t)nargs, NULL);
    if (r == NULL) return NULL;
    out = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 3 ? PyTuple_GET_ITEM(r, part) : NULL;
    Py_XINCREF(out);
    Py_DECREF(r);
    if (out == NULL)
        PyErr_Format(PyExc_SystemError, "treekit.core._traverse.pure_flatten returned no %s", what[part][1]);
    return out;
}

static PyObject *leaves(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return flatten_part(args, nargs, 0);
}

static PyObject *structure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return flatten_part(args, nargs, 1);
}

/* flatten_pairs(tree, is_leaf, leaf_takes_path) -> (pairs, TreeDef). Return value: New reference. */
static PyObject *flatten_pairs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "flatten_pairs(tree, is_leaf, leaf_takes_path)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int takes_path = PyObject_IsTrue(args[2]);
    if (takes_path < 0) return NULL;
    PyObject *is_leaf = args[1] == Py_None ? NULL : args[1], *out = NULL;
    /* takes_path without is_leaf: the pure core's call */
    tk_status how = takes_path && is_leaf == NULL ? TK_DEFER : tk_pairs(args[0], is_leaf, takes_path, &out);
    if (how == TK_DEFER) return pure(tk_state.s_pure_flatten_pairs, args, (size_t)nargs, NULL);
    return out;
}

/* build(nodes, leaves) -> the tree, or DEFER. Return value: New reference. */
static PyObject *build(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "build(nodes, leaves)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    PyObject *tree;
    tk_status how = tk_build(args[0], args[1], &tree);
    return how == TK_DEFER ? defer() : tree;
}

/* guide(nodes, tree, strict=False, is_leaf=None) -> list of subtrees, DEFER, or (record
 * index, exception) where a flatten function raised. Return value: New reference. */
static PyObject *guide(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "guide(nodes, tree, strict=False, is_leaf=None)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int strict = nargs > 2 ? PyObject_IsTrue(args[2]) : 0;
    if (strict < 0) return NULL;
    PyObject *is_leaf = nargs > 3 && args[3] != Py_None ? args[3] : NULL, *out;
    tk_status how = tk_guide(args[0], args[1], strict, is_leaf, &out);
    /* TK_RAISED: (record index, exception), for treekit.core._guide.guide to word */
    return how == TK_DEFER ? defer() : out;
}

/* map(f, tree, rest, is_leaf, failed, *, with_path=False, leaf_takes_path=False) -> the tree,
 * or DEFER. Return value: New reference. */
static PyObject *map(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char usage[] = "map(f, tree, rest: tuple, is_leaf, failed, *, with_path=False, leaf_takes_path=False)";
    if (nargs != 5 || !PyTuple_CheckExact(args[2]) || tk_ready() < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    PyObject *flags[2] = {Py_False, Py_False}, *names[2] = {tk_state.s_with_path, tk_state.s_leaf_takes_path};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        int i = kw == names[0] || PyUnicode_Compare(kw, names[0]) == 0 ? 0
              : kw == names[1] || PyUnicode_Compare(kw, names[1]) == 0 ? 1 : -1;
        if (i < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, usage);
            return NULL;
        }
        flags[i] = args[nargs + k];
    }
    int with_path = PyObject_IsTrue(flags[0]), takes_path = with_path < 0 ? -1 : PyObject_IsTrue(flags[1]);
    if (takes_path < 0) return NULL;
    PyObject *is_leaf = args[3] == Py_None ? NULL : args[3], *out;
    if (takes_path && (!with_path || is_leaf == NULL)) takes_path = 0; /* nothing to call with a path */
    tk_status how = tk_map(args[0], args[1], args[2], is_leaf, with_path, takes_path, args[4], &out);
    return how == TK_DEFER ? defer() : out;
}

/* keystr(keys, simple, separator) -> str, or DEFER before reading keys. Return value: New reference. */
static PyObject *keystr(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "keystr(keys, simple, separator)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    if (!PyBool_Check(args[1]) || !PyUnicode_CheckExact(args[2])) return defer();
    return tk_keystr(args[0], args[1] == Py_True, args[2]);
}

/* keystr_function(pure, module) -> treekit.keystr. Return value: New reference. */
static PyObject *keystr_function(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyModule_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keystr_function(pure: function, module)");
        return NULL;
    }
    return tk_keystr_function(args[0], args[1]);
}

/* entry_init(k, cls) -> cls's __init__, or None (it keeps its own). Return value: New reference. */
static PyObject *entry_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long k = nargs == 2 ? PyLong_AsLong(args[0]) : -1;
    if (k < 0 || k >= TK_KEY_CLASSES || !PyType_Check(args[1])) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "entry_init(k: 0..3, cls)");
        return NULL;
    }
    return tk_entry_init((int)k, args[1]);
}

/* entry_call(k, cls) -> None: calls to cls make its instances in C. Return value: New reference. */
static PyObject *entry_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long k = nargs == 2 ? PyLong_AsLong(args[0]) : -1;
    if (k < 0 || k >= TK_KEY_CLASSES || !PyType_Check(args[1])) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "entry_call(k: 0..3, cls)");
        return NULL;
    }
    if (tk_entry_call((int)k, args[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* scan_entries(text, pos, left, at, data_start, data_size, sizes, cls, tensors) -> (pos, last,
 * left, at) (header.h). Return value: New reference. */
static PyObject *scan_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyUnicode_CheckExact(args[0]) || !PyDict_CheckExact(args[6]) || !PyType_Check(args[7]) ||
        !PyType_IsSubtype((PyTypeObject *)args[7], &PyTuple_Type) || !PyDict_CheckExact(args[8])) {
        PyErr_SetString(PyExc_TypeError,
                        "scan_entries(text: str, pos, left, at, data_start, data_size, sizes: dict, cls: tuple "
                        "subclass, tensors: dict)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]), left = PyLong_AsSsize_t(args[2]);
    long long at = PyLong_AsLongLong(args[3]), start = PyLong_AsLongLong(args[4]), size = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_OverflowError)) { /* (no file is that big: Python reads it) */
        PyErr_Clear();
        return PyTuple_Pack(4, args[1], Py_False, args[2], args[3]);
    }
    if (PyErr_Occurred()) return NULL;
    if (pos < 0 || pos > PyUnicode_GET_LENGTH(args[0]) || start < 0 || size < 0 || start > LLONG_MAX - size) {
        PyErr_SetString(PyExc_ValueError, "scan_entries: pos outside the text, or offsets out of range");
        return NULL;
    }
    int last = 0;
    if (tk_scan_entries(args[0], &pos, &last, start, size, args[6], args[7], args[8], &left, &at) < 0) return NULL;
    return Py_BuildValue("(nOnL)", pos, last ? Py_True : Py_False, left, at);
}

/* cache_info() -> {name: (size, limit)}. Return value: New reference. */
static PyObject *cache_info(PyObject *self, PyObject *unused) {
    return tk_cache_info();
}

/* clear_caches() -> None. Return value: New reference. */
static PyObject *clear_caches(PyObject *self, PyObject *unused) {
    tk_cache_clear();
    Py_RETURN_NONE;
}

/* forget_node_data() -> None. Return value: New reference. */
static PyObject *forget_node_data(PyObject *self, PyObject *unused) {
    tk_node_caches_clear();
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"flatten", (PyCFunction)(void (*)(void))flatten, METH_FASTCALL | METH_KEYWORDS,
     "treekit.core._traverse.flatten, in C (hands what it does not finish to the pure core)."},
    {"leaves", (PyCFunction)(void (*)(void))leaves, METH_FASTCALL,
     "treekit.core._traverse.leaves, in C (hands what it does not finish to the pure core)."},
    {"structure", (PyCFunction)(void (*)(void))structure, METH_FASTCALL,
     "treekit.core._traverse.structure, in C (hands what it does not finish to the pure core)."},
    {"build", (PyCFunction)(void (*)(void))build, METH_FASTCALL,
     "treekit.core._build.interpret, in C; returns DEFER to let Python build it."},
    {"guide", (PyCFunction)(void (*)(void))guide, METH_FASTCALL,
     "treekit.core._guide.guide without keys, in C; returns DEFER to let Python walk it."},
    {"map", (PyCFunction)(void (*)(void))map, METH_FASTCALL | METH_KEYWORDS,
     "treekit.ops._ops.tree_map and tree_map_with_path, in C; returns DEFER to let Python map it."},
    {"flatten_pairs", (PyCFunction)(void (*)(void))flatten_pairs, METH_FASTCALL,
     "treekit.core._traverse.flatten_pairs, in C (hands what it does not finish to the pure core)."},
    {"keystr", (PyCFunction)(void (*)(void))keystr, METH_FASTCALL,
     "treekit.core._keys.keystr, in C; returns DEFER to let Python join it."},
    {"entry_init", (PyCFunction)(void (*)(void))entry_init, METH_FASTCALL,
     "entry_init(k, cls): the k-th key entry class's __init__, setting its field (None: keep its own)."},
    {"entry_call", (PyCFunction)(void (*)(void))entry_call, METH_FASTCALL,
     "entry_call(k, cls): calls to the k-th key entry class make its instances in C (after entry_init)."},
    {"keystr_function", (PyCFunction)(void (*)(void))keystr_function, METH_FASTCALL,
     "treekit.keystr, a built-in function of the module given; the pure keystr given takes the unusual calls."},
    {"scan_entries", (PyCFunction)(void (*)(void))scan_entries, METH_FASTCALL,
     "treekit.checkpoint._header's entries as writers write them, in C; stops at any other (header.h)."},
    {"cache_info", cache_info, METH_NOARGS,
     "cache_info() -> {name: (size, limit)}: every process-wide cache of the native core, each bounded."},
    {"clear_caches", clear_caches, METH_NOARGS, "clear_caches(): empty every process-wide cache of the native core."},
    {"forget_node_data", forget_node_data, METH_NOARGS,
     "forget_node_data(): empty the node data and records of dataclass nodes kept from walk to walk."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "treekit.core._native",
                                    "treekit's native core: C walks, Python speaks.", -1, METHODS};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (deferred == NULL) deferred = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (deferred == NULL || PyModule_AddObjectRef(m, "DEFER", deferred) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
