/* map.c mirrors treekit._ops.tree_map and tree_map_with_path, fused: the first tree is
 * walked once (walk.c), each other tree is matched against its records (guide.c), f is
 * called once per leaf, left to right, and the result is built from the records (build.c)
 * without a TreeDef in between. Everything that can hand the call back to Python happens
 * before f is first called; if f raises, `failed` (treekit._ops._map_failed) is called with
 * the exception and the row, and raises what the pure core raises. */
#include "native.h"

/* The call's arguments, as tree_map passes them. */
typedef struct {
    PyObject *f, *tree, *rest, *is_leaf, *failed;
    int with_path, takes_path;
} MapArgs;

static PyObject *call_failed(MapArgs *a, Py_ssize_t row, PyObject *paths) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
    PyObject *index = PyLong_FromSsize_t(row);
    PyObject *r = NULL;
    if (index != NULL && value != NULL) {
        PyObject *is_leaf = a->is_leaf == NULL ? Py_None : a->is_leaf;
        r = PyObject_CallFunctionObjArgs(a->failed, value, index, paths ? paths : Py_None, a->tree, is_leaf, a->rest,
                                         NULL);
    }
    Py_XDECREF(index);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r != NULL) { /* it should have raised */
        Py_DECREF(r);
        PyErr_SetString(PyExc_SystemError, "treekit._ops._map_failed returned");
    }
    return NULL;
}

/* The mapped tree (new reference), S.deferred (new reference) to hand the call back, or
 * NULL with an exception. */
PyObject *tk_map(PyObject *f, PyObject *tree, PyObject *rest, PyObject *is_leaf, int with_path, int takes_path,
                 PyObject *failed) {
    MapArgs a = {f, tree, rest, is_leaf, failed, with_path, takes_path};
    Py_ssize_t nrest = PyTuple_GET_SIZE(rest);
    PyObject *leaves = PyList_New(0), *nodes = NULL, *paths = with_path ? PyList_New(0) : NULL;
    PyObject **columns = PyMem_Calloc((size_t)nrest + 1, sizeof(PyObject *));
    PyObject *results = NULL, *out = NULL;
    if (leaves == NULL || (with_path && paths == NULL) || columns == NULL) goto done;
    /* This call's own lists are kept from the collector: gc.get_objects() in code run meanwhile
     * (f, a flatten function, a finalizer) cannot reach them, so nothing else changes them and
     * their items may be borrowed. (What they hold is held by the trees too.) */
    PyObject_GC_UnTrack(leaves);
    if (paths != NULL) PyObject_GC_UnTrack(paths);
    int rc = tk_walk(tree, is_leaf, with_path, takes_path, leaves, &nodes, paths, NULL);
    Py_ssize_t k = 0;
    for (; rc == 0 && k < nrest; k++) {
        rc = tk_up_to(nodes, PyTuple_GET_ITEM(rest, k), 0, NULL, &columns[k]);
        if (rc == 0) PyObject_GC_UnTrack(columns[k]);
    }
    if (rc == RAISED) { /* rest[k - 1]'s flatten function raised: TreeDef._walk words it, not calling it again */
        PyObject *raised = columns[k - 1], *treedef = tk_treedef(nodes);
        columns[k - 1] = NULL;
        PyObject *label = treedef == NULL ? NULL : PyUnicode_FromFormat("rest[%zd]", k - 1);
        PyObject *kwnames = label == NULL ? NULL : Py_BuildValue("(ss)", "_again", "_raised");
        if (kwnames != NULL) {
            PyObject *args[5] = {treedef, PyTuple_GET_ITEM(rest, k - 1), label, Py_True, raised};
            PyObject *r = PyObject_VectorcallMethod(S.s_walk, args, 3, kwnames);
            if (r != NULL) { /* it should have raised */
                Py_DECREF(r);
                PyErr_SetString(PyExc_SystemError, "treekit._treedef.TreeDef._walk returned for a flatten function that raised");
            }
        }
        Py_XDECREF(kwnames);
        Py_XDECREF(label);
        Py_XDECREF(treedef);
        Py_DECREF(raised);
        goto done;
    }
    if (rc == DEFER) {
        Py_INCREF(S.deferred);
        out = S.deferred;
        goto done;
    }
    if (rc < 0) goto done;
    Py_ssize_t count = PyList_GET_SIZE(leaves);
    results = PyList_New(count);
    if (results == NULL) goto done;
    PyObject_GC_UnTrack(results); /* while it holds NULLs */
    PyObject *small[8], **args = small;
    Py_ssize_t nargs = nrest + 1 + with_path;
    if (nargs > 8 && (args = PyMem_Malloc(sizeof(PyObject *) * (size_t)nargs)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t m = 0;
        if (with_path) args[m++] = PyList_GET_ITEM(paths, i);
        args[m++] = PyList_GET_ITEM(leaves, i);
        for (Py_ssize_t k = 0; k < nrest; k++) args[m++] = PyList_GET_ITEM(columns[k], i);
        /* the lists are this call's own: nothing f does changes them */
        PyObject *r = PyObject_Vectorcall(f, args, (size_t)m, NULL);
        if (r == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) call_failed(&a, i, paths); /* else it goes on as it is */
            goto fail;
        }
        PyList_SET_ITEM(results, i, r);
    }
    if (args != small) PyMem_Free(args);
    int defer = 0;
    out = tk_build(nodes, results, &defer); /* (results stays this call's own) */
    if (out == NULL && defer) { /* node data the C builder does not read: TreeDef._build */
        PyErr_Clear();
        PyObject *treedef = tk_treedef(nodes);
        PyObject_GC_Track(results); /* (whole: it goes to Python code) */
        out = treedef == NULL ? NULL : PyObject_CallMethodOneArg(treedef, S.s_build, results);
        Py_XDECREF(treedef);
    }
    goto done;
fail:
    if (args != small) PyMem_Free(args);
done:
    Py_XDECREF(leaves);
    Py_XDECREF(nodes);
    Py_XDECREF(paths);
    Py_XDECREF(results);
    if (columns != NULL) {
        for (Py_ssize_t k = 0; k < nrest; k++) Py_XDECREF(columns[k]);
        PyMem_Free(columns);
    }
    return out;
}
