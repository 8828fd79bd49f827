/* module.c: the treekit._native module. Its functions take the place of the pure-Python
 * core's hot paths when treekit runs the native core (see treekit/_core.py):
 *   flatten(tree, is_leaf=None, with_path=False, leaf_takes_path=False, label='tree')
 *       mirrors treekit._traverse.flatten; hands a tree it does not finish to it
 *   leaves(tree, is_leaf=None)  mirrors treekit._traverse.leaves (no records made)
 *   build(nodes, leaves)      mirrors treekit._treedef._interpret; DEFER: let Python build it
 *   up_to(nodes, tree, strict=False, is_leaf=None)
 *       mirrors treekit._treedef.TreeDef._walk without keys; DEFER: let Python walk it
 *   map(f, tree, rest, is_leaf, with_path, leaf_takes_path, failed)
 *       mirrors treekit._ops.tree_map / tree_map_with_path; DEFER: let Python map it
 *   keystr(keys, simple, separator)
 *       mirrors treekit._keys.keystr; DEFER: let Python join it
 */
#include "native.h"

State S;

PyObject *tk_lookup(PyObject *types, PyObject *x, PyObject **owned, int *resolved) {
    PyObject *cls = (PyObject *)Py_TYPE(x);
    PyObject *ntype = PyDict_GetItemWithError(types, cls); /* borrowed */
    *owned = NULL;
    if (ntype != NULL) {
        /* hold it: user code run later may drop the registry's reference */
        Py_INCREF(ntype);
        *owned = ntype;
        return ntype;
    }
    if (PyErr_Occurred()) return NULL;
    *resolved = 1;
    ntype = PyObject_CallOneArg(S.resolve, cls);
    *owned = ntype;
    return ntype;
}

static PyObject *attr(PyObject *mod, const char *name) {
    return PyObject_GetAttrString(mod, name);
}

int tk_ready(void) {
    if (S.ready) return 0;
    S.registry = PyImport_ImportModule("treekit._registry");
    S.treedef_mod = S.registry ? PyImport_ImportModule("treekit._treedef") : NULL;
    S.traverse = S.treedef_mod ? PyImport_ImportModule("treekit._traverse") : NULL;
    if (S.traverse == NULL) return -1;
    if (!(S.LIST = attr(S.registry, "LIST")) || !(S.TUPLE = attr(S.registry, "TUPLE")) ||
        !(S.DICT = attr(S.registry, "DICT")) || !(S.NONE = attr(S.registry, "NONE")) ||
        !(S.NAMEDTUPLE = attr(S.registry, "NAMEDTUPLE")) || !(S.resolve = attr(S.registry, "resolve")) ||
        !(S.TreeDef = attr(S.treedef_mod, "TreeDef")) || !(S.LEAF = attr(S.treedef_mod, "LEAF")) ||
        !(S.unflatten = attr(S.treedef_mod, "_unflatten")))
        return -1;
    PyObject *keys = PyImport_ImportModule("treekit._keys");
    if (keys == NULL) return -1;
    S.SequenceKey = attr(keys, "SequenceKey");
    S.DictKey = S.SequenceKey ? attr(keys, "DictKey") : NULL;
    S.GetAttrKey = S.DictKey ? attr(keys, "GetAttrKey") : NULL;
    S.FlattenedIndexKey = S.GetAttrKey ? attr(keys, "FlattenedIndexKey") : NULL;
    Py_DECREF(keys);
    if (S.FlattenedIndexKey == NULL) return -1;
    if (!PyType_Check(S.DictKey)) {
        PyErr_SetString(PyExc_TypeError, "treekit._keys.DictKey is not a class");
        return -1;
    }
    if (!(S.s_flatten = PyUnicode_InternFromString("flatten")) ||
        !(S.s_original = PyUnicode_InternFromString("original")) || !(S.s_positions = PyUnicode_InternFromString("positions")) ||
        !(S.s_TYPES = PyUnicode_InternFromString("TYPES")) || !(S.s_ORDERS = PyUnicode_InternFromString("ORDERS")) ||
        !(S.s_nodes = PyUnicode_InternFromString("_nodes")) || !(S.empty_tuple = PyTuple_New(0)) ||
        !(S.s_FIELD_KEYS = PyUnicode_InternFromString("_FIELD_KEYS")) ||
        !(S.s_SEQ_KEYS = PyUnicode_InternFromString("_SEQ_KEYS")) || !(S.s_key = PyUnicode_InternFromString("key")) ||
        !(S.s_MAX_DEPTH = PyUnicode_InternFromString("MAX_DEPTH")) ||
        !(S.s_idx = PyUnicode_InternFromString("idx")) || !(S.s_name = PyUnicode_InternFromString("name")) ||
        !(S.s_build = PyUnicode_InternFromString("_build")) || !(S.s_empty = PyUnicode_InternFromString("")))
        return -1;
    if (!(S.s_hash = PyUnicode_InternFromString("_hash")) || !(S.s_builder = PyUnicode_InternFromString("_builder")) ||
        !(S.s_plain = PyUnicode_InternFromString("plain")) || !(S.s_keyed = PyUnicode_InternFromString("keyed")) ||
        !(S.s_unflatten = PyUnicode_InternFromString("unflatten")) || !(S.s_func = PyUnicode_InternFromString("func")))
        return -1;
    PyObject *slots = PyObject_GetAttrString(S.TreeDef, "__slots__");
    PyObject *expected = Py_BuildValue("(sss)", "_builder", "_hash", "_nodes");
    S.plain_treedef = slots != NULL && expected != NULL && PyObject_RichCompareBool(slots, expected, Py_EQ) == 1 &&
                      PyType_Check(S.TreeDef);
    Py_XDECREF(slots);
    Py_XDECREF(expected);
    PyErr_Clear();
    for (int i = 0; i < 8; i++)
        if (!(S.small[i] = PyLong_FromLong(i))) return -1;
    S.ready = 1;
    return 0;
}

PyObject *tk_treedef(PyObject *records) {
    if (!S.plain_treedef) return PyObject_CallOneArg(S.TreeDef, records);
    /* TreeDef(records) without running __init__: its three slots, as __init__ sets them */
    PyTypeObject *tp = (PyTypeObject *)S.TreeDef;
    PyObject *treedef = tp->tp_alloc(tp, 0);
    if (treedef == NULL) return NULL;
    if (PyObject_GenericSetAttr(treedef, S.s_nodes, records) < 0 ||
        PyObject_GenericSetAttr(treedef, S.s_hash, Py_None) < 0 ||
        PyObject_GenericSetAttr(treedef, S.s_builder, Py_None) < 0) {
        Py_DECREF(treedef);
        return NULL;
    }
    return treedef;
}

/* The pure function a call is handed to: treekit._traverse.pure_flatten. */
static PyObject *pure_flatten(PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *fn = PyObject_GetAttrString(S.traverse, "pure_flatten");
    if (fn == NULL) return NULL;
    PyObject *r = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    Py_DECREF(fn);
    return r;
}

static const char *const FLATTEN_ARGS[] = {"tree", "is_leaf", "with_path", "leaf_takes_path", "label"};

/* flatten(...) -> (leaves, TreeDef, paths or None): new reference. */
static PyObject *flatten(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *given[5] = {NULL, Py_None, Py_False, Py_False, NULL};
    if (nargs > 5) return pure_flatten(args, (size_t)nargs, kwnames);
    for (Py_ssize_t i = 0; i < nargs; i++) given[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        int found = 0;
        for (int i = 0; name != NULL && i < 5; i++) {
            if (strcmp(name, FLATTEN_ARGS[i]) == 0) {
                given[i] = args[nargs + k];
                found = 1;
            }
        }
        if (!found) {
            PyErr_Clear();
            return pure_flatten(args, (size_t)nargs, kwnames);
        }
    }
    if (given[0] == NULL || tk_ready() < 0) return pure_flatten(args, (size_t)nargs, kwnames);
    int with_path = PyObject_IsTrue(given[2]), takes_path = PyObject_IsTrue(given[3]);
    if (with_path < 0 || takes_path < 0 || (takes_path && (!with_path || given[1] == Py_None))) {
        PyErr_Clear();
        return pure_flatten(args, (size_t)nargs, kwnames);
    }
    PyObject *leaves = PyList_New(0), *records = NULL, *paths = with_path ? PyList_New(0) : NULL;
    PyObject *result = NULL;
    if (leaves == NULL || (with_path && paths == NULL)) goto done;
    int rc = tk_walk(given[0], given[1] == Py_None ? NULL : given[1], with_path, takes_path, leaves, &records, paths);
    if (rc == DEFER) {
        result = pure_flatten(args, (size_t)nargs, kwnames);
        goto done;
    }
    if (rc < 0) goto done;
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

/* leaves(tree, is_leaf=None) -> list (new reference): flatten(tree, is_leaf)[0] without
 * making records; a tree it does not finish goes to treekit._traverse.pure_flatten. */
static PyObject *leaves(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "leaves(tree, is_leaf=None)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    PyObject *is_leaf = nargs > 1 && args[1] != Py_None ? args[1] : NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    int rc = tk_walk(args[0], is_leaf, 0, 0, out, NULL, NULL);
    if (rc == 0) return out;
    Py_DECREF(out);
    if (rc < 0) return NULL;
    PyObject *r = pure_flatten(args, (size_t)nargs, NULL);
    if (r == NULL) return NULL;
    out = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 3 ? PyTuple_GET_ITEM(r, 0) : NULL;
    Py_XINCREF(out);
    Py_DECREF(r);
    if (out == NULL) PyErr_SetString(PyExc_SystemError, "treekit._traverse.pure_flatten returned no leaves");
    return out;
}

/* build(nodes, leaves) -> the tree (new reference), or the module's DEFER object. */
static PyObject *build(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "build(nodes, leaves)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int defer = 0;
    PyObject *tree = tk_build(args[0], args[1], &defer);
    if (tree == NULL && defer) {
        PyErr_Clear();
        Py_INCREF(S.deferred);
        return S.deferred;
    }
    return tree;
}


/* up_to(nodes, tree, strict=False, is_leaf=None) -> list of subtrees (new reference), or DEFER. */
static PyObject *up_to(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "up_to(nodes, tree, strict=False, is_leaf=None)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int strict = nargs > 2 ? PyObject_IsTrue(args[2]) : 0;
    if (strict < 0) return NULL;
    PyObject *is_leaf = nargs > 3 && args[3] != Py_None ? args[3] : NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    int rc = tk_up_to(args[0], args[1], strict, is_leaf, out);
    if (rc == 0) return out;
    Py_DECREF(out);
    if (rc < 0) return NULL;
    Py_INCREF(S.deferred);
    return S.deferred;
}

/* map(f, tree, rest, is_leaf, with_path, leaf_takes_path, failed) -> the tree, or DEFER. */
static PyObject *map(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "map(f, tree, rest: tuple, is_leaf, with_path, leaf_takes_path, failed)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int with_path = PyObject_IsTrue(args[4]), takes_path = PyObject_IsTrue(args[5]);
    if (with_path < 0 || takes_path < 0) return NULL;
    PyObject *is_leaf = args[3] == Py_None ? NULL : args[3];
    if (takes_path && (!with_path || is_leaf == NULL)) takes_path = 0; /* nothing to call with a path */
    return tk_map(args[0], args[1], args[2], is_leaf, with_path, takes_path, args[6]);
}

/* Texts of entries seen before: "[i]" for SequenceKey(i) with 0 <= i < 256, and, in a
 * bounded dict each, "['k']" for DictKey(k) and ".n" for GetAttrKey(n) with k, n exact
 * strs (strs are immutable and their repr and format depend on nothing else). */
#define SEQ_TEXTS 256
static PyObject *seq_texts[SEQ_TEXTS];
static PyObject *dict_texts, *attr_texts;
#define TEXTS_LIMIT 4096

static PyObject *remembered_text(PyObject **cache, PyObject *key, PyObject *text) {
    if (*cache == NULL && (*cache = PyDict_New()) == NULL) return NULL;
    if (PyDict_GET_SIZE(*cache) >= TEXTS_LIMIT) PyDict_Clear(*cache);
    if (PyDict_SetItem(*cache, key, text) < 0) return NULL;
    return text;
}

/* One entry's text, as its __str__ (simple=0) or treekit._keys._simple (simple=1) gives it:
 * new reference. The four built-in entries are read here; any other through str(). */
static PyObject *entry_text(PyObject *entry, int simple) {
    PyObject *cls = (PyObject *)Py_TYPE(entry), *name, *value, *text, *out;
    PyObject **cache = NULL;
    if (cls == S.SequenceKey) {
        name = S.s_idx;
    } else if (cls == S.DictKey) {
        name = S.s_key, cache = &dict_texts;
    } else if (cls == S.GetAttrKey) {
        name = S.s_name, cache = &attr_texts;
    } else if (cls == S.FlattenedIndexKey) {
        name = S.s_key;
    } else {
        return PyObject_Str(entry);
    }
    value = PyObject_GetAttr(entry, name);
    if (value == NULL) return NULL;
    if (simple) {
        if (cls == S.GetAttrKey) return value; /* the name as it is */
        out = PyObject_Str(value);
        Py_DECREF(value);
        return out;
    }
    if (cls == S.SequenceKey && PyLong_CheckExact(value)) {
        Py_ssize_t i = PyLong_AsSsize_t(value);
        if (i >= 0 && i < SEQ_TEXTS && seq_texts[i] != NULL) {
            Py_DECREF(value);
            Py_INCREF(seq_texts[i]);
            return seq_texts[i];
        }
        PyErr_Clear();
    }
    int plain_str = PyUnicode_CheckExact(value);
    if (cache != NULL && plain_str && *cache != NULL) {
        out = PyDict_GetItemWithError(*cache, value); /* borrowed */
        if (out != NULL) {
            Py_DECREF(value);
            Py_INCREF(out);
            return out;
        }
        PyErr_Clear();
    }
    /* f"[{idx}]", f"[{key!r}]", f".{name}", f"[<flat index {key}>]" */
    text = cls == S.DictKey ? PyObject_Repr(value) : PyObject_Format(value, S.s_empty);
    if (text == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    if (cls == S.SequenceKey) {
        out = PyUnicode_FromFormat("[%U]", text);
    } else if (cls == S.DictKey) {
        out = PyUnicode_FromFormat("[%U]", text);
    } else if (cls == S.GetAttrKey) {
        out = PyUnicode_FromFormat(".%U", text);
    } else {
        out = PyUnicode_FromFormat("[<flat index %U>]", text);
    }
    Py_DECREF(text);
    if (out != NULL && cls == S.SequenceKey && PyLong_CheckExact(value)) {
        Py_ssize_t i = PyLong_AsSsize_t(value);
        if (i >= 0 && i < SEQ_TEXTS && seq_texts[i] == NULL) {
            Py_INCREF(out);
            seq_texts[i] = out;
        }
        PyErr_Clear();
    }
    if (out != NULL && cache != NULL && plain_str && remembered_text(cache, value, out) == NULL) PyErr_Clear();
    Py_DECREF(value);
    return out;
}

/* keystr(keys, simple, separator) -> str (new reference), or DEFER before reading keys. */
static PyObject *keystr(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "keystr(keys, simple, separator)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int simple = PyBool_Check(args[1]) ? args[1] == Py_True : -1;
    if (simple < 0 || !PyUnicode_CheckExact(args[2])) {
        Py_INCREF(S.deferred);
        return S.deferred;
    }
    PyObject *seq;
    if (PyTuple_CheckExact(args[0]) || PyList_CheckExact(args[0])) {
        seq = args[0];
        Py_INCREF(seq);
    } else {
        PyObject *it = PyObject_GetIter(args[0]); /* as map(str, keys): its TypeError */
        seq = it == NULL ? NULL : PySequence_List(it);
        Py_XDECREF(it);
        if (seq == NULL) return NULL;
    }
    /* read as map() reads a list: its size at each step (an entry's __str__ may change it) */
    PyObject *texts = PyList_New(0), *out = NULL;
    for (Py_ssize_t i = 0; texts != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(entry);
        PyObject *text = entry_text(entry, simple);
        Py_DECREF(entry);
        if (text == NULL || PyList_Append(texts, text) < 0) Py_CLEAR(texts);
        Py_XDECREF(text);
    }
    if (texts != NULL) out = PyUnicode_Join(args[2], texts);
    Py_XDECREF(texts);
    Py_DECREF(seq);
    return out;
}

static PyMethodDef METHODS[] = {
    {"flatten", (PyCFunction)(void (*)(void))flatten, METH_FASTCALL | METH_KEYWORDS,
     "treekit._traverse.flatten, in C (hands what it does not finish to the pure core)."},
    {"leaves", (PyCFunction)(void (*)(void))leaves, METH_FASTCALL,
     "treekit._traverse.leaves, in C (hands what it does not finish to the pure core)."},
    {"build", (PyCFunction)(void (*)(void))build, METH_FASTCALL,
     "treekit._treedef._interpret, in C; returns DEFER to let Python build it."},
    {"up_to", (PyCFunction)(void (*)(void))up_to, METH_FASTCALL,
     "treekit._treedef.TreeDef._walk without keys, in C; returns DEFER to let Python walk it."},
    {"map", (PyCFunction)(void (*)(void))map, METH_FASTCALL,
     "treekit._ops.tree_map and tree_map_with_path, in C; returns DEFER to let Python map it."},
    {"keystr", (PyCFunction)(void (*)(void))keystr, METH_FASTCALL,
     "treekit._keys.keystr, in C; returns DEFER to let Python join it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "treekit._native",
                                    "treekit's native core: C walks, Python speaks.", -1, METHODS};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (S.deferred == NULL) S.deferred = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (S.deferred == NULL || PyModule_AddObjectRef(m, "DEFER", S.deferred) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
