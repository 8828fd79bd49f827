/* errors.h: every error the native core raises is worded by the Python function that words
 * it for the pure core (treekit.core._errors, treekit.core._traverse, treekit.core._treedef, treekit.ops._ops);
 * these are the calls (errors.c). Each returns with an exception set. */
#ifndef TREEKIT_ERRORS_H
#define TREEKIT_ERRORS_H

#include "records.h"

/* The current exception, raised by a flatten function of a `cls` at `label` + `path`, noted
 * as treekit.core._errors.flatten_noted notes it (the user's exception itself, class and
 * traceback kept, with a note naming where; or, where that gives another exception, that one
 * raised from it). Always returns TK_ERROR. */
TK_API tk_status tk_raise_noted(PyObject *label, PyObject *path, PyObject *cls);
/* The current exception goes on as the context of the exception `exc` was to be noted with:
 * where finding a key path for a noted error failed. Steals a reference to type, exc and tb
 * (as PyErr_Fetch gave them). */
TK_API void tk_raise_in_context(PyObject *type, PyObject *exc, PyObject *tb);
/* The key path (a tuple) out of the pure walker's frames (node, ntype, data, children, n, i):
 * treekit.core._traverse._frame_keys. Return value: New reference. */
TK_API PyObject *tk_frame_path(PyObject *frames);
/* treekit.core._traverse.changed_error's error: a list shortened by user code while it was walked. */
TK_API void tk_changed_error(PyObject *label, PyObject *ancestors, PyObject *node, Py_ssize_t n, Py_ssize_t now);
/* treekit.core._errors.not_a_bool's error: an is_leaf that answered `answer` at key path `at`. */
TK_API void tk_not_a_bool(PyObject *label, PyObject *at, PyObject *answer);
/* The current exception as (j, exc), exc with its traceback, none set after: what the guided
 * walk gives treekit.core._guide.guide to word (see guide.c). Return value: New reference. */
TK_API PyObject *tk_fetch_raised(Py_ssize_t j);
/* treekit.core._guide.guide(nodes, tree, 'rest[k]', again=True, raised=raised): it raises the
 * error for rest[k]'s flatten function that raised. Always returns TK_ERROR. */
TK_API tk_status tk_guide_raised(PyObject *nodes, PyObject *tree, Py_ssize_t k, PyObject *raised);
/* The user's exception (set), raised by the unflatten function of entry `ntype` building a
 * node of n children with node data `data`: noted as treekit.core._build.unflatten_node notes it,
 * without calling that function again. */
TK_API void tk_unflatten_failed(PyObject *ntype, PyObject *data, Py_ssize_t n);
/* treekit.core._build.leaves_changed's error: a leaves list changed while it was built from. */
TK_API void tk_leaves_changed(Py_ssize_t count, Py_ssize_t now);
/* The current exception (an Exception), raised by f on row `row` of tree_map: `failed`
 * (treekit.ops._ops._map_failed) called with it, which raises what the pure core raises. */
TK_API void tk_map_failed(PyObject *failed, Py_ssize_t row, PyObject *paths, PyObject *tree, PyObject *is_leaf,
                          PyObject *rest);

#endif
