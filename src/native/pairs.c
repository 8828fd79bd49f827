/* pairs.c mirrors treekit.core._traverse.flatten_pairs: a tree's (key path, leaf) pairs and its
 * TreeDef, from one walk with paths (walk.c). Its leaves and paths lists never leave this
 * file, so the collector is not told of them, and the pairs are collected in C before their
 * list is made: a gen-0 collection while the pairs are made (one each 700) finds no
 * 10,000-item list of this call to go over. A pair is untracked where neither item is. */
#include "map.h"

/* The (path, leaf) pairs of the n leaves, into made[0..n-1] (new references; *done: how
 * many were made): 0, or -1 with an exception. */
static int make_pairs(PyObject *paths, PyObject *leaves, Py_ssize_t n, PyObject **made, Py_ssize_t *done) {
    for (; *done < n; ++*done) {
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(paths, *done), PyList_GET_ITEM(leaves, *done));
        if (pair == NULL) return -1;
        tk_untrack_tuple(pair);
        made[*done] = pair;
    }
    return 0;
}

tk_status tk_pairs(PyObject *tree, PyObject *is_leaf, int takes_path, PyObject **out) {
    PyObject *leaves = PyList_New(0), *paths = leaves == NULL ? NULL : PyList_New(0), *records = NULL, **made = NULL;
    Py_ssize_t n = 0, done = 0;
    *out = NULL;
    tk_status how = TK_ERROR;
    if (paths == NULL) goto done;
    PyObject_GC_UnTrack(leaves);
    PyObject_GC_UnTrack(paths);
    how = tk_walk(tree, is_leaf, 1, takes_path, leaves, &records, paths, NULL);
    if (how != TK_OK) goto done;
    how = TK_ERROR;
    n = PyList_GET_SIZE(leaves);
    if (PyList_GET_SIZE(paths) != n || (made = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1))) == NULL) {
        if (made == NULL && PyList_GET_SIZE(paths) == n) PyErr_NoMemory();
        else PyErr_SetString(PyExc_SystemError, "treekit.core._native: as many paths as leaves expected");
        goto done;
    }
    if (make_pairs(paths, leaves, n, made, &done) < 0) goto done;
    /* the treedef first: the list is filled as soon as it is made (no collection can see its NULLs) */
    PyObject *treedef = tk_treedef(records), *list = treedef == NULL ? NULL : PyList_New(n);
    if (list == NULL) {
        Py_XDECREF(treedef);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyList_SET_ITEM(list, i, made[i]);
    done = 0; /* the list's now */
    *out = PyTuple_Pack(2, list, treedef);
    Py_DECREF(list);
    Py_DECREF(treedef);
    how = *out == NULL ? TK_ERROR : TK_OK;
done:
    for (Py_ssize_t i = 0; i < done; i++) Py_DECREF(made[i]);
    PyMem_Free(made);
    Py_XDECREF(leaves);
    Py_XDECREF(paths);
    Py_XDECREF(records);
    return how;
}
