/* module.c: the treekit._native module. Its functions take the place of the pure-Python
 * core's hot paths when treekit runs the native core (see treekit/_core.py):
 *   flatten(tree, is_leaf=None, with_path=False, leaf_takes_path=False, label='tree')
 *       mirrors treekit._traverse.flatten; hands a tree it does not finish to it
 *   build(nodes, leaves)      mirrors treekit._treedef._interpret; DEFER: let Python build it
 */
#include "native.h"

State S;

PyObject *tk_int(Py_ssize_t v) {
    if (v >= 0 && v < 8) {
        Py_INCREF(S.small[v]);
        return S.small[v];
    }
    return PyLong_FromSsize_t(v);
}

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
    if (!(S.s_flatten = PyUnicode_InternFromString("flatten")) ||
        !(S.s_original = PyUnicode_InternFromString("original")) || !(S.s_positions = PyUnicode_InternFromString("positions")) ||
        !(S.s_TYPES = PyUnicode_InternFromString("TYPES")) || !(S.s_ORDERS = PyUnicode_InternFromString("ORDERS")) ||
        !(S.s_nodes = PyUnicode_InternFromString("_nodes")) || !(S.empty_tuple = PyTuple_New(0)))
        return -1;
    for (int i = 0; i < 8; i++)
        if (!(S.small[i] = PyLong_FromLong(i))) return -1;
    S.ready = 1;
    return 0;
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
    if (with_path < 0 || takes_path < 0 || takes_path) {
        PyErr_Clear();
        return pure_flatten(args, (size_t)nargs, kwnames);
    }
    PyObject *leaves = PyList_New(0), *nodes = PyList_New(0), *paths = with_path ? PyList_New(0) : NULL;
    PyObject *result = NULL;
    if (leaves == NULL || nodes == NULL || (with_path && paths == NULL)) goto done;
    int rc = tk_walk(given[0], given[1] == Py_None ? NULL : given[1], with_path, leaves, nodes, paths);
    if (rc == DEFER) {
        result = pure_flatten(args, (size_t)nargs, kwnames);
        goto done;
    }
    if (rc < 0) goto done;
    PyObject *records = PyList_AsTuple(nodes);
    PyObject *treedef = records == NULL ? NULL : PyObject_CallOneArg(S.TreeDef, records);
    Py_XDECREF(records);
    if (treedef == NULL) goto done;
    result = PyTuple_Pack(3, leaves, treedef, with_path ? paths : Py_None);
    Py_DECREF(treedef);
done:
    Py_XDECREF(leaves);
    Py_XDECREF(nodes);
    Py_XDECREF(paths);
    return result;
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

static PyMethodDef METHODS[] = {
    {"flatten", (PyCFunction)(void (*)(void))flatten, METH_FASTCALL | METH_KEYWORDS,
     "treekit._traverse.flatten, in C (hands what it does not finish to the pure core)."},
    {"build", (PyCFunction)(void (*)(void))build, METH_FASTCALL,
     "treekit._treedef._interpret, in C; returns DEFER to let Python build it."},
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
