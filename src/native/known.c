/* known.c mirrors registered functions of model libraries that treekit.core._known keeps a
 * copy of and proves, per class, to be the ones registered (same source, same code object,
 * same names read): equinox's generated flatten and unflatten of a Module class (a node's
 * fields read from its __dict__, stored in a new instance as they are), flax nnx's flatten of
 * a Variable (its value, its metadata sorted) and of a State (its mapping, sorted), and its
 * unflatten of a Variable (a new instance, its fields stored, TraceState() called). So those
 * trees are walked with no Python frame a node (but TraceState's). */
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
        return n == 6 && Py_IS_TYPE(K(2), &PyMemberDescr_Type) && Py_IS_TYPE(K(3), &PyMemberDescr_Type) &&
               PyTuple_CheckExact(K(4)) && PyTuple_GET_SIZE(K(4)) == 1 &&
               (K(5) == Py_None || (PyTuple_CheckExact(K(5)) && PyTuple_GET_SIZE(K(5)) == 2 &&
                                    PyType_Check(PyTuple_GET_ITEM(K(5), 0)) &&
                                    PyFunction_Check(PyTuple_GET_ITEM(K(5), 1)) &&
                                    PyDict_CheckExact(PyFunction_GetGlobals(PyTuple_GET_ITEM(K(5), 1)))));
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

/* Untrack (track: 1) a tuple or list the core fills, so that a collection meanwhile never hands
 * it out half-filled (NULL items). The empty tuple is shared: it is left alone. Returns o. */
static PyObject *filling(PyObject *o, int done) {
    if (o == NULL || Py_SIZE(o) == 0) return o;
    if (done) PyObject_GC_Track(o);
    else PyObject_GC_UnTrack(o);
    return o;
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
    PyObject *out = filling(PyTuple_New(nd), 0), *aux = out == NULL ? NULL : filling(PyTuple_New(ns + 1), 0);
    PyObject *wrapped = aux == NULL ? NULL : filling(PyTuple_New(nw), 0);
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
        filling(wrapped, 1);
    }
    PyTuple_SET_ITEM(aux, 0, wrapped);
    filling(out, 1);
    filling(aux, 1);
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
/* d's keys, sorted, into `into` (a list of d's size, made and untracked before: nothing is
 * allocated here, so no code runs), where they are all exact str or all exact int (no
 * comparison runs code): 1; 0 where d's size is not into's or its keys are of other kinds
 * (into's items set or NULL: the caller drops it); -1 with an exception. CPython's
 * PyDict_Items is not used: its list is tracked, half-filled, while it makes the pairs. */
static int sorted_keys(PyObject *d, PyObject *into) {
    Py_ssize_t at = 0, i = 0;
    PyObject *key, *value;
    if (PyDict_GET_SIZE(d) != PyList_GET_SIZE(into)) return 0;
    int strs = 1, ints = 1;
    while (PyDict_Next(d, &at, &key, &value)) {
        Py_INCREF(key);
        PyList_SET_ITEM(into, i++, key);
        strs = strs && PyUnicode_CheckExact(key);
        ints = ints && PyLong_CheckExact(key);
    }
    if (!strs && !ints) return 0;
    return PyList_Sort(into) < 0 ? -1 : 1;
}

/* d[key], for a key just read from d, nothing run since. Return value: New reference. */
static PyObject *value_of(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key); /* borrowed (exact str or int keys: no code runs) */
    Py_INCREF(v);
    return v;
}

static tk_status defer_or_error(int got) {
    return got < 0 ? TK_ERROR : TK_DEFER;
}

/* _variable_flatten: ((x._raw_value,), tuple(sorted(x._var_metadata.items()))), each field
 * read through the member descriptor it is (an unset one: the function is called). */
static tk_status variable_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                                  PyObject **keys) {
    PyObject *raw = PyMemberDescr_Type.tp_descr_get(K(2), node, K(1)), *meta = NULL, *order = NULL;
    if (raw == NULL || (meta = PyMemberDescr_Type.tp_descr_get(K(3), node, K(1))) == NULL) {
        Py_XDECREF(raw);
        return tk_defer_error();
    }
    int got = 0;
    if (PyDict_CheckExact(meta)) { /* every allocation first, the dict read after with none */
        Py_ssize_t n = PyDict_GET_SIZE(meta);
        order = filling(PyList_New(n), 0);
        *data = order == NULL ? NULL : filling(PyTuple_New(n), 0);
        for (Py_ssize_t i = 0; *data != NULL && i < n; i++) {
            PyObject *pair = filling(PyTuple_New(2), 0);
            if (pair == NULL) Py_CLEAR(*data);
            else PyTuple_SET_ITEM(*data, i, pair);
        }
        *kids = *data == NULL ? NULL : PyTuple_Pack(1, raw);
        got = *kids == NULL ? -1 : sorted_keys(meta, order);
    }
    for (Py_ssize_t i = 0; got > 0 && i < PyList_GET_SIZE(order); i++) {
        PyObject *pair = PyTuple_GET_ITEM(*data, i), *key = PyList_GET_ITEM(order, i);
        Py_INCREF(key);
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value_of(meta, key));
        filling(pair, 1);
    }
    filling(*data, 1); /* (its pairs, where not whole, are untracked) */
    Py_XDECREF(order);
    Py_DECREF(meta);
    Py_DECREF(raw);
    if (got <= 0) {
        Py_CLEAR(*kids);
        Py_CLEAR(*data);
        return defer_or_error(got);
    }
    if (with_path) {
        *keys = K(4);
        Py_INCREF(*keys);
    }
    return TK_OK;
}

/* Variable._new(cls, value, meta) as flax writes it: the instance by object.__new__, then
 * object.__setattr__ of its _trace_state (tracers.TraceState(), `tracers` as read from _new's
 * globals, given), its _var_metadata and its _raw_value. Return value: New reference. */
static PyObject *new_variable(PyObject *cls, PyObject *tracers, PyObject *value, PyObject *meta) {
    PyObject *self = PyBaseObject_Type.tp_new((PyTypeObject *)cls, tk_state.empty_tuple, NULL), *make = NULL;
    PyObject *trace = self == NULL || (make = PyObject_GetAttr(tracers, tk_state.s_TraceState)) == NULL
                          ? NULL
                          : PyObject_CallNoArgs(make);
    if (trace == NULL || PyObject_GenericSetAttr(self, tk_state.s_trace_state, trace) < 0 ||
        PyObject_GenericSetAttr(self, tk_state.s_var_metadata, meta) < 0 ||
        PyObject_GenericSetAttr(self, tk_state.s_raw_value, value) < 0)
        Py_CLEAR(self);
    Py_XDECREF(trace);
    Py_XDECREF(make);
    return self;
}

/* _variable_unflatten: cls._new(children[0], dict(static)), the proof's cls; done here where
 * cls._new is still the proved function bound to cls (else what it gives is called). */
static PyObject *variable_make(PyObject *k, PyObject *data, PyObject *const *kids, Py_ssize_t n, int *called) {
    PyObject *made = K(5), *self = NULL, *meta = NULL, *tracers = NULL;
    *called = made != Py_None && n >= 1; /* (no child: the function's IndexError) */
    if (!*called) return NULL;
    PyObject *cls = PyTuple_GET_ITEM(made, 0), *fn = PyTuple_GET_ITEM(made, 1), *value = kids[0];
    Py_INCREF(k); /* (code run here may drop the entry's hold on the proof, or the builder's on a child) */
    Py_INCREF(value);
    PyObject *bound = PyObject_GetAttr(cls, tk_state.s_new);
    if (bound != NULL) meta = PyObject_CallOneArg((PyObject *)&PyDict_Type, data);
    if (meta != NULL && PyMethod_Check(bound) && PyMethod_GET_FUNCTION(bound) == fn && PyMethod_GET_SELF(bound) == cls)
        tracers = PyDict_GetItemWithError(PyFunction_GetGlobals(fn), tk_state.s_tracers); /* borrowed (str key) */
    if (tracers != NULL) {
        Py_INCREF(tracers);
        self = new_variable(cls, tracers, value, meta);
        Py_DECREF(tracers);
    } else if (meta != NULL && !PyErr_Occurred()) { /* (another _new, or no `tracers`: _new's NameError) */
        self = PyObject_CallFunctionObjArgs(bound, value, meta, NULL);
    }
    Py_XDECREF(meta);
    Py_XDECREF(bound);
    Py_DECREF(value);
    Py_DECREF(k);
    return self;
}

/* _state_flatten: the values of x._mapping (from x's __dict__) by sorted key, and the keys. */
static tk_status state_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                               PyObject **keys) {
    PyObject *dict = PyObject_GenericGetDict(node, NULL), *mapping = NULL;
    if (dict == NULL) return tk_defer_error();
    if (PyDict_CheckExact(dict) && str_keys(dict)) mapping = PyDict_GetItemWithError(dict, tk_state.s_mapping);
    Py_XINCREF(mapping);
    Py_DECREF(dict);
    if (mapping == NULL || !PyDict_CheckExact(mapping)) {
        Py_XDECREF(mapping);
        return TK_DEFER;
    }
    /* every allocation first, the mapping read after with none; then the keys' entries */
    Py_ssize_t n = PyDict_GET_SIZE(mapping);
    *kids = filling(PyList_New(n), 0); /* (the sorted keys, then the values) */
    *data = *kids == NULL ? NULL : filling(PyTuple_New(n), 0);
    *keys = *data == NULL || !with_path ? NULL : filling(PyTuple_New(n), 0);
    int got = *data == NULL || (with_path && *keys == NULL) ? -1 : sorted_keys(mapping, *kids);
    for (Py_ssize_t i = 0; got > 0 && i < n; i++) {
        PyObject *key = PyList_GET_ITEM(*kids, i);
        PyTuple_SET_ITEM(*data, i, key); /* (the list's reference) */
        PyList_SET_ITEM(*kids, i, value_of(mapping, key));
    }
    filling(*kids, 1);
    filling(*data, 1);
    for (Py_ssize_t i = 0; got > 0 && with_path && i < n; i++) {
        PyObject *entry = tk_entry_new(TK_DICT_KEY, PyTuple_GET_ITEM(*data, i));
        if (entry == NULL) got = -1;
        else PyTuple_SET_ITEM(*keys, i, entry);
    }
    filling(*keys, 1);
    Py_DECREF(mapping);
    if (got <= 0) { /* (the items not set are NULL) */
        Py_CLEAR(*kids);
        Py_CLEAR(*data);
        Py_CLEAR(*keys);
        return defer_or_error(got);
    }
    return TK_OK;
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
    switch (kind(k)) {
    case MODULE:
        return module_make(k, data, kids, n, called);
    case VARIABLE:
        return variable_make(k, data, kids, n, called);
    default:
        return NULL;
    }
}
