/* map.c mirrors treekit.ops._ops.tree_map and tree_map_with_path, fused: the first tree is
 * walked once (walk.c), each other tree is matched against its records (guide.c), f is
 * called once per leaf, left to right, and the result is built from the records (build.c)
 * without a TreeDef in between. Everything that can hand the call back to Python happens
 * before f is first called; if f raises, `failed` (treekit.ops._ops._map_failed) is called with
 * the exception and the row, and raises what the pure core raises. */
#include "map.h"

/* The call's arguments, as tree_map passes them (borrowed), and what it made (owned). */
typedef struct {
    PyObject *f, *tree, *rest, *is_leaf, *failed;
    int with_path, takes_path;
    Py_ssize_t nrest;
    PyObject *leaves, *nodes, *paths, **columns, *results;
} Map;

/* The first tree walked and the others matched against its records, into the call's own
 * lists, kept from the collector: gc.get_objects() in code run meanwhile (f, a flatten
 * function, a finalizer) cannot reach them, so nothing else changes them and their items
 * may be borrowed. (What they hold is held by the trees too.) TK_OK, TK_DEFER, TK_ERROR. */
static tk_status map_inputs(Map *m) {
    PyObject_GC_UnTrack(m->leaves);
    if (m->paths != NULL) PyObject_GC_UnTrack(m->paths);
    tk_status how = tk_walk(m->tree, m->is_leaf, m->with_path, m->takes_path, m->leaves, &m->nodes, m->paths, NULL);
    Py_ssize_t k = 0;
    for (; how == TK_OK && k < m->nrest; k++) {
        how = tk_guide(m->nodes, PyTuple_GET_ITEM(m->rest, k), 0, NULL, &m->columns[k]);
        if (how == TK_OK) PyObject_GC_UnTrack(m->columns[k]);
    }
    /* TK_RAISED: rest[k - 1]'s flatten function raised: treekit.core._guide.guide words it, not calling it again */
    if (how == TK_RAISED) {
        PyObject *raised = m->columns[k - 1];
        m->columns[k - 1] = NULL;
        how = tk_guide_raised(m->nodes, PyTuple_GET_ITEM(m->rest, k - 1), k - 1, raised);
        Py_DECREF(raised);
    }
    return how;
}

/* f called on each row, into m->results: 0, or -1 with an exception (f's as `failed` raises it). */
static int map_rows(Map *m) {
    Py_ssize_t count = PyList_GET_SIZE(m->leaves);
    m->results = PyList_New(count);
    if (m->results == NULL) return -1;
    PyObject_GC_UnTrack(m->results); /* while it holds NULLs */
    PyObject *small[8], **args = small;
    Py_ssize_t nargs = m->nrest + 1 + m->with_path;
    if (nargs > 8 && (args = PyMem_Malloc(sizeof(PyObject *) * (size_t)nargs)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t a = 0;
        if (m->with_path) args[a++] = PyList_GET_ITEM(m->paths, i);
        args[a++] = PyList_GET_ITEM(m->leaves, i);
        for (Py_ssize_t k = 0; k < m->nrest; k++) args[a++] = PyList_GET_ITEM(m->columns[k], i);
        /* the lists are this call's own: nothing f does changes them */
        PyObject *r = PyObject_Vectorcall(m->f, args, (size_t)a, NULL);
        if (r == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) /* else it goes on as it is */
                tk_map_failed(m->failed, i, m->paths, m->tree, m->is_leaf, m->rest);
            rc = -1;
            break;
        }
        PyList_SET_ITEM(m->results, i, r);
    }
    if (args != small) PyMem_Free(args);
    return rc;
}

tk_status tk_map(PyObject *f, PyObject *tree, PyObject *rest, PyObject *is_leaf, int with_path, int takes_path,
                 PyObject *failed, PyObject **out) {
    Map m = {f, tree, rest, is_leaf, failed, with_path, takes_path, PyTuple_GET_SIZE(rest), NULL, NULL, NULL, NULL, NULL};
    *out = NULL;
    m.leaves = PyList_New(0);
    m.paths = with_path ? PyList_New(0) : NULL;
    m.columns = PyMem_Calloc((size_t)m.nrest + 1, sizeof(PyObject *));
    tk_status how = TK_ERROR;
    if (m.columns == NULL) PyErr_NoMemory();
    if (m.leaves == NULL || (with_path && m.paths == NULL) || m.columns == NULL) goto done;
    how = map_inputs(&m);
    if (how != TK_OK) goto done;
    how = TK_ERROR;
    if (map_rows(&m) < 0) goto done;
    how = tk_build(m.nodes, m.results, out); /* (results stays this call's own) */
    if (how == TK_DEFER) { /* node data the C builder does not read: TreeDef._build */
        PyObject *treedef = tk_treedef(m.nodes);
        PyObject_GC_Track(m.results); /* (whole: it goes to Python code) */
        *out = treedef == NULL ? NULL : PyObject_CallMethodOneArg(treedef, tk_state.s_build, m.results);
        Py_XDECREF(treedef);
        how = *out == NULL ? TK_ERROR : TK_OK;
    }
done:
    Py_XDECREF(m.leaves);
    Py_XDECREF(m.nodes);
    Py_XDECREF(m.paths);
    Py_XDECREF(m.results);
    if (m.columns != NULL) {
        for (Py_ssize_t k = 0; k < m.nrest; k++) Py_XDECREF(m.columns[k]);
        PyMem_Free(m.columns);
    }
    return how;
}
