/* errors.c: the calls to the Python functions that word the native core's errors (see
 * errors.h): treekit.core._errors.flatten_noted, not_a_bool and unflatten_noted,
 * treekit.core._traverse._frame_keys and changed_error, treekit.core._build.leaves_changed,
 * treekit.core._guide.guide, treekit.ops._ops._map_failed (given by its caller). */
#include "errors.h"

/* Raise `exc`, an exception instance made by a Python function (NULL: its error is set). */
static void raise_made(PyObject *exc) {
    if (exc == NULL) return;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* The current exception, normalized, with its traceback: *type, *exc, *tb new references
 * (as PyErr_Fetch gives them; *exc NULL only if none was set). */
static void fetch(PyObject **type, PyObject **exc, PyObject **tb) {
    PyErr_Fetch(type, exc, tb);
    PyErr_NormalizeException(type, exc, tb);
    if (*tb != NULL && *exc != NULL) PyException_SetTraceback(*exc, *tb);
}

void tk_raise_in_context(PyObject *type, PyObject *exc, PyObject *tb) {
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *t2, *e2, *tb2;
    PyErr_Fetch(&t2, &e2, &tb2);
    PyErr_NormalizeException(&t2, &e2, &tb2);
    if (e2 != NULL && exc != NULL) PyException_SetContext(e2, exc); /* (steals exc) */
    else Py_XDECREF(exc);
    PyErr_Restore(t2, e2, tb2);
    Py_XDECREF(type);
    Py_XDECREF(tb);
}

tk_status tk_raise_noted(PyObject *label, PyObject *path, PyObject *cls) {
    PyObject *type, *exc, *tb;
    fetch(&type, &exc, &tb);
    if (exc == NULL) { /* (an exception is always set here) */
        Py_XDECREF(type);
        Py_XDECREF(tb);
        PyErr_SetString(PyExc_SystemError, "treekit.core._native: no exception to note");
        return TK_ERROR;
    }
    PyObject *noted = PyObject_CallMethodObjArgs(tk_state.errors, tk_state.s_flatten_noted, label, path, cls, exc, NULL);
    if (noted != NULL) { /* the user's exception goes on, its note added */
        Py_DECREF(noted);
        PyErr_Restore(type, exc, tb); /* (steals the references fetched) */
        return TK_ERROR;
    }
    /* the noting failed: that error, in the context of the user's */
    Py_INCREF(exc);
    tk_raise_in_context(NULL, exc, NULL);
    Py_XDECREF(type);
    Py_DECREF(exc);
    Py_XDECREF(tb);
    return TK_ERROR;
}

PyObject *tk_frame_path(PyObject *frames) {
    PyObject *keys = PyObject_CallMethodObjArgs(tk_state.traverse, tk_state.s_frame_keys, frames, NULL);
    if (keys == NULL) return NULL;
    PyObject *path = PySequence_Tuple(keys);
    Py_DECREF(keys);
    return path;
}

void tk_changed_error(PyObject *label, PyObject *ancestors, PyObject *node, Py_ssize_t n, Py_ssize_t now) {
    PyObject *count = PyLong_FromSsize_t(n), *size = count == NULL ? NULL : PyLong_FromSsize_t(now), *exc = NULL;
    if (size != NULL)
        exc = PyObject_CallMethodObjArgs(tk_state.traverse, tk_state.s_changed_error, label, ancestors, node, count,
                                         size, NULL);
    Py_XDECREF(count);
    Py_XDECREF(size);
    raise_made(exc);
}

void tk_not_a_bool(PyObject *label, PyObject *at, PyObject *answer) {
    raise_made(PyObject_CallMethodObjArgs(tk_state.errors, tk_state.s_not_a_bool, label, at, answer, NULL));
}

PyObject *tk_fetch_raised(Py_ssize_t j) {
    PyObject *type, *exc, *tb;
    fetch(&type, &exc, &tb);
    PyObject *out = exc == NULL ? NULL : Py_BuildValue("(nO)", j, exc);
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    return out;
}

tk_status tk_guide_raised(PyObject *nodes, PyObject *tree, Py_ssize_t k, PyObject *raised) {
    PyObject *guide = PyObject_GetAttr(tk_state.guide_mod, tk_state.s_guide);
    PyObject *label = guide == NULL ? NULL : PyUnicode_FromFormat("rest[%zd]", k);
    PyObject *kwnames = label == NULL ? NULL : PyTuple_Pack(2, tk_state.s_again, tk_state.s_raised);
    if (kwnames != NULL) {
        PyObject *args[5] = {nodes, tree, label, Py_True, raised};
        PyObject *r = PyObject_Vectorcall(guide, args, 3, kwnames);
        if (r != NULL) { /* it should have raised */
            Py_DECREF(r);
            PyErr_SetString(PyExc_SystemError,
                            "treekit.core._guide.guide returned for a flatten function that raised");
        }
    }
    Py_XDECREF(kwnames);
    Py_XDECREF(label);
    Py_XDECREF(guide);
    return TK_ERROR;
}

void tk_unflatten_failed(PyObject *ntype, PyObject *data, Py_ssize_t n) {
    PyObject *type, *exc, *tb;
    fetch(&type, &exc, &tb);
    PyObject *cls = exc == NULL ? NULL : PyObject_GetAttr(ntype, tk_state.s_type);
    PyObject *count = cls == NULL ? NULL : PyLong_FromSsize_t(n);
    PyObject *noted = count == NULL ? NULL
                                    : PyObject_CallMethodObjArgs(tk_state.errors, tk_state.s_unflatten_noted, cls, data,
                                                                 count, exc, NULL);
    Py_XDECREF(cls);
    Py_XDECREF(count);
    if (noted != NULL) { /* the user's exception goes on, its note added */
        Py_DECREF(noted);
        PyErr_Restore(type, exc, tb); /* (steals the references fetched) */
        return;
    } /* (else the noting's own error, set) */
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
}

void tk_leaves_changed(Py_ssize_t count, Py_ssize_t now) {
    PyObject *a = PyLong_FromSsize_t(count), *b = a == NULL ? NULL : PyLong_FromSsize_t(now), *exc = NULL;
    if (b != NULL) exc = PyObject_CallMethodObjArgs(tk_state.build_mod, tk_state.s_leaves_changed, a, b, NULL);
    Py_XDECREF(a);
    Py_XDECREF(b);
    raise_made(exc);
}

void tk_map_failed(PyObject *failed, Py_ssize_t row, PyObject *paths, PyObject *tree, PyObject *is_leaf,
                   PyObject *rest) {
    PyObject *type, *value, *tb;
    fetch(&type, &value, &tb);
    PyObject *index = PyLong_FromSsize_t(row), *r = NULL;
    if (index != NULL && value != NULL)
        r = PyObject_CallFunctionObjArgs(failed, value, index, paths ? paths : Py_None, tree,
                                         is_leaf == NULL ? Py_None : is_leaf, rest, NULL);
    Py_XDECREF(index);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r != NULL) { /* it should have raised */
        Py_DECREF(r);
        PyErr_SetString(PyExc_SystemError, "treekit.ops._ops._map_failed returned");
    }
}
