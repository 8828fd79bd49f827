/* known.c mirrors registered functions of model libraries that treekit.core._known keeps a
 * copy of and proves, per class, to be the ones registered (same source, same code object,
 * same names read): equinox's generated flatten and unflatten of a Module class (a node's
 * fields read from its __dict__, stored in a new instance as they are), and flax nnx's flatten
 * of a Variable (its value, its metadata sorted) and of a State (its mapping, sorted). So those
 * trees are walked with no Python frame a node. */
#include "known.h"

#define K(i) PyTuple_GET_ITEM(k, i)
enum { MODULE, VARIABLE, STATE };

static int str_tuple(PyObject *t) {
    if (!PyTuple_CheckExact(t)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(t, i))) return 0;
    return 1;
}

static int kind(PyObject *k) {
    return PyLong_CheckExact(K(0)) ? (int)PyLong_AsLong(K(0)) : -1;
}

int tk_known_check(PyObject *k) {
    if (k == NULL || !PyTuple_CheckExact(k) || PyTuple_GET_SIZE(k) < 2 || !PyType_Check(K(1))) return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(k);
    switch (kind(k)) {
    case MODULE:
        return n == 7 && str_tuple(K(2)) && str_tuple(K(3)) && str_tuple(K(4)) && PyTuple_CheckExact(K(6)) &&
               PyTuple_GET_SIZE(K(6)) == PyTuple_GET_SIZE(K(2));
    case VARIABLE:
        return n == 5 && Py_IS_TYPE(K(2), &PyMemberDescr_Type) && Py_IS_TYPE(K(3), &PyMemberDescr_Type) &&
               PyTuple_CheckExact(K(4)) && PyTuple_GET_SIZE(K(4)) == 1;
    case STATE:
        return n == 2;
    default:
        PyErr_Clear();
        return 0;
    }
}

/* Whether every key of `dict` (an exact dict) is an exact str: looking one up runs no code. */
static int str_keys(PyObject *dict) {
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &at, &key, &value))
        if (!PyUnicode_CheckExact(key)) return 0;
    return 1;
}

/* dict.get(name, missing), every key of dict an exact str. Return value: New reference. */
static PyObject *get(PyObject *dict, PyObject *name, PyObject *missing) {
    PyObject *v = PyDict_GetItemWithError(dict, name); /* borrowed */
    v = v == NULL ? missing : v;
    Py_INCREF(v);
    return v;
}

/* -- equinox: the generated flatten and unflatten of a Module class ---------------------------- */
static tk_status module_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                                PyObject **keys) {
    PyObject *dynamic = K(2), *statics = K(3), *wrappers = K(4), *missing = K(5);
    Py_ssize_t nd = PyTuple_GET_SIZE(dynamic), ns = PyTuple_GET_SIZE(statics), nw = PyTuple_GET_SIZE(wrappers);
    PyObject *dict = PyObject_GenericGetDict(node, NULL);
    if (dict == NULL) return tk_defer_error();
    /* every allocation first (a collection in one may run code that changes the dict), then the
     * dict read with none: its keys exact str (no comparison runs code), its values taken */
    PyObject *out = PyTuple_New(nd), *aux = out == NULL ? NULL : PyTuple_New(ns + 1);
    PyObject *wrapped = aux == NULL ? NULL : PyTuple_New(nw);
    if (wrapped == NULL || !PyDict_CheckExact(dict) || !str_keys(dict)) {
        tk_status how = wrapped == NULL ? TK_ERROR : TK_DEFER;
        Py_DECREF(dict);
        Py_XDECREF(out);
        Py_XDECREF(aux);
        Py_XDECREF(wrapped);
        return how;
    }
    for (Py_ssize_t i = 0; i < nd; i++) PyTuple_SET_ITEM(out, i, get(dict, PyTuple_GET_ITEM(dynamic, i), missing));
    for (Py_ssize_t i = 0; i < ns; i++) PyTuple_SET_ITEM(aux, i + 1, get(dict, PyTuple_GET_ITEM(statics, i), missing));
    if (PyDict_GET_SIZE(dict) == nd + ns) {
        Py_DECREF(wrapped); /* (its items unset: freeing it runs no code) */
        Py_INCREF(missing);
        wrapped = missing;
    } else {
        for (Py_ssize_t i = 0; i < nw; i++) PyTuple_SET_ITEM(wrapped, i, get(dict, PyTuple_GET_ITEM(wrappers, i), missing));
    }
    PyTuple_SET_ITEM(aux, 0, wrapped);
    Py_DECREF(dict);
    *kids = out;
    *data = aux;
    if (with_path) {
        *keys = K(6);
        Py_INCREF(*keys);
    }
    return TK_OK;
}

/* object.__setattr__(self, names[i], values[i]) for each value not MISSING: 0, or -1. */
static int store(PyObject *self, PyObject *names, PyObject *const *values, PyObject *missing) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
        if (values[i] != missing && PyObject_GenericSetAttr(self, PyTuple_GET_ITEM(names, i), values[i]) < 0) return -1;
    return 0;
}

static PyObject *module_make(PyObject *k, PyObject *data, PyObject *const *kids, Py_ssize_t n, int *called) {
    PyObject *wrappers = K(4), *missing = K(5), *waux = NULL;
    Py_ssize_t nw = PyTuple_GET_SIZE(wrappers);
    *called = n == PyTuple_GET_SIZE(K(2)) && PyTuple_CheckExact(data) && PyTuple_GET_SIZE(data) == PyTuple_GET_SIZE(K(3)) + 1 &&
              ((waux = PyTuple_GET_ITEM(data, 0)) == missing || (PyTuple_CheckExact(waux) && PyTuple_GET_SIZE(waux) >= nw));
    if (!*called) return NULL;
    Py_INCREF(k); /* (a descriptor's __set__ may drop the builder's and the record's references) */
    Py_INCREF(data);
    PyObject *self = PyBaseObject_Type.tp_new((PyTypeObject *)K(1), tk_state.empty_tuple, NULL);
    if (self != NULL && store(self, K(2), kids, missing) < 0) Py_CLEAR(self);
    if (self != NULL && waux != missing) {
        PyObject *dict = PyObject_GenericGetDict(self, NULL);
        for (Py_ssize_t i = 0; dict != NULL && i < nw; i++)
            if (PyObject_SetItem(dict, PyTuple_GET_ITEM(wrappers, i), PyTuple_GET_ITEM(waux, i)) < 0) Py_CLEAR(dict);
        if (dict == NULL) Py_CLEAR(self);
        Py_XDECREF(dict);
    }
    if (self != NULL && store(self, K(3), PySequence_Fast_ITEMS(data) + 1, missing) < 0) Py_CLEAR(self);
    Py_DECREF(data);
    Py_DECREF(k);
    return self;
}

/* -- flax nnx: a Variable's and a State's flatten ------------------------------------------------- */
/* sorted(d.items()), where d (an exact dict) has keys all exact str, or all exact int: no
 * comparison runs code. NULL with *how TK_DEFER (keys of another kind) or TK_ERROR.
 * Return value: New reference (a list of (key, value) tuples nothing else holds). */
static PyObject *sorted_items(PyObject *d, tk_status *how) {
    PyObject *items = PyDict_Items(d);
    *how = TK_ERROR;
    if (items == NULL) return NULL;
    int strs = 1, ints = 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *key = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        strs = strs && PyUnicode_CheckExact(key);
        ints = ints && PyLong_CheckExact(key);
    }
    if (!strs && !ints) *how = TK_DEFER;
    if ((!strs && !ints) || PyList_Sort(items) < 0) Py_CLEAR(items);
    return items;
}

/* _variable_flatten: ((x._raw_value,), tuple(sorted(x._var_metadata.items()))), each field
 * read through the member descriptor it is (an unset one: the function is called). */
static tk_status variable_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                                  PyObject **keys) {
    PyObject *raw = PyMemberDescr_Type.tp_descr_get(K(2), node, K(1));
    if (raw == NULL) return tk_defer_error();
    PyObject *meta = PyMemberDescr_Type.tp_descr_get(K(3), node, K(1));
    if (meta == NULL) {
        Py_DECREF(raw);
        return tk_defer_error();
    }
    tk_status how = TK_DEFER;
    PyObject *items = PyDict_CheckExact(meta) ? sorted_items(meta, &how) : NULL;
    Py_DECREF(meta);
    if (items != NULL) {
        *data = PyList_AsTuple(items);
        Py_DECREF(items);
        *kids = *data == NULL ? NULL : PyTuple_Pack(1, raw);
        how = *kids != NULL ? TK_OK : TK_ERROR;
        if (how != TK_OK) Py_CLEAR(*data);
    }
    Py_DECREF(raw);
    if (how == TK_OK && with_path) {
        *keys = K(4);
        Py_INCREF(*keys);
    }
    return how;
}

/* _state_flatten: the values of x._mapping (from x's __dict__) by sorted key, and the keys. */
static tk_status state_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                               PyObject **keys) {
    PyObject *dict = PyObject_GenericGetDict(node, NULL), *mapping = NULL;
    if (dict == NULL) return tk_defer_error();
    if (PyDict_CheckExact(dict) && str_keys(dict)) mapping = PyDict_GetItemWithError(dict, tk_state.s_mapping);
    Py_XINCREF(mapping);
    Py_DECREF(dict);
    tk_status how = TK_DEFER;
    PyObject *items = mapping != NULL && PyDict_CheckExact(mapping) ? sorted_items(mapping, &how) : NULL;
    Py_XDECREF(mapping);
    if (items == NULL) return how;
    Py_ssize_t n = PyList_GET_SIZE(items);
    *kids = PyList_New(n);
    *data = *kids == NULL ? NULL : PyTuple_New(n);
    *keys = *data == NULL || !with_path ? NULL : PyTuple_New(n);
    how = *data == NULL || (with_path && *keys == NULL) ? TK_ERROR : TK_OK;
    for (Py_ssize_t i = 0; how == TK_OK && i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(items, i), *key = PyTuple_GET_ITEM(pair, 0);
        PyObject *value = PyTuple_GET_ITEM(pair, 1);
        Py_INCREF(value);
        PyList_SET_ITEM(*kids, i, value);
        Py_INCREF(key);
        PyTuple_SET_ITEM(*data, i, key);
        if (with_path) {
            PyObject *entry = tk_entry_new(TK_DICT_KEY, key);
            if (entry == NULL) how = TK_ERROR;
            else PyTuple_SET_ITEM(*keys, i, entry);
        }
    }
    Py_DECREF(items);
    if (how != TK_OK) { /* (the items not set are NULL) */
        Py_CLEAR(*kids);
        Py_CLEAR(*data);
        Py_CLEAR(*keys);
    }
    return how;
}

tk_status tk_known_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                           PyObject **keys) {
    if ((PyObject *)Py_TYPE(node) != K(1)) return TK_DEFER;
    switch (kind(k)) {
    case MODULE:
        return module_flatten(k, node, with_path, kids, data, keys);
    case VARIABLE:
        return variable_flatten(k, node, with_path, kids, data, keys);
    default:
        return state_flatten(k, node, with_path, kids, data, keys);
    }
}

PyObject *tk_known_make(PyObject *k, PyObject *data, PyObject *const *kids, Py_ssize_t n, int *called) {
    *called = 0;
    return kind(k) == MODULE ? module_make(k, data, kids, n, called) : NULL;
}
