/* entries.c mirrors the __init__ that @dataclass(frozen=True, slots=True) writes for the
 * four built-in key entry classes of treekit.core._keys (SequenceKey, DictKey, GetAttrKey,
 * FlattenedIndexKey). That __init__ (object.__setattr__ on a Python frame) is most of the
 * cost of an entry (docs/performance.md, "Key entries"), and a user's flatten_with_keys
 * function makes one per child. tk_entry_init gives each class an __init__ (a method descriptor) that sets its
 * field through the field's member descriptor, as the dataclass's __init__ does, and calls
 * that __init__ for any other call. tk_entry_call sets each class's tp_vectorcall, a field of
 * the documented PyTypeObject that no function of the C API sets for a class Python code made
 * (issue 60 decided it): a call cls(value) or cls(field=value) then makes the instance as
 * type.__call__ does (object.__new__, that is tp_alloc; then the __init__ above) without its
 * generic path, 88 -> ~55 ns a key; any other call goes to type.__call__. It is not inherited:
 * subclasses are called as any class is. tk_convert_keys mirrors the `convert`
 * of treekit.core._jax._jax_node_entry: the key entries a JAX-registered class's
 * flatten_with_keys gives, made treekit's, each read from the entry's table of those made. */
#include "entries.h"

typedef struct {
    tk_field field; /* the class and its field's member descriptor */
    PyObject *name; /* borrowed (interned, tk_state): the field's name */
    PyObject *init; /* owned: the dataclass's own __init__ */
    PyObject *mine; /* owned: the __init__ tk_entry_init made, in the class's dict when tk_entry_call ran */
} EntryInit;
static EntryInit entry_inits[TK_KEY_CLASSES];

/* The value of a call's one argument for e's field (positional, or by the field's name), or
 * NULL (no exception) for any other call. Return value: Borrowed reference (the caller's). */
static PyObject *field_value(EntryInit *e, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs == 1 && nkw == 0) return args[0];
    if (nargs == 0 && nkw == 1) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, 0);
        int same = kw == e->name || PyUnicode_Compare(kw, e->name) == 0;
        PyErr_Clear();
        if (same) return args[0];
    }
    return NULL;
}

/* self.__init__(*args, **kwargs) for the k-th class. Return value: New reference (None);
 * NULL with an exception. */
static PyObject *init_entry(int k, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    EntryInit *e = &entry_inits[k];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *value = (PyObject *)Py_TYPE(self) == e->field.cls ? field_value(e, args, nargs, kwnames) : NULL;
    if (value == NULL) { /* the dataclass's __init__(self, *args, **kwargs) says what is wrong */
        PyObject *few[8], **all = nargs + nkw < 8 ? few : PyMem_Malloc(sizeof(PyObject *) * (size_t)(nargs + nkw + 1));
        if (all == NULL) return PyErr_NoMemory();
        all[0] = self;
        for (Py_ssize_t i = 0; i < nargs + nkw; i++) all[i + 1] = args[i];
        PyObject *r = PyObject_Vectorcall(e->init, all, (size_t)(nargs + 1), kwnames);
        if (all != few) PyMem_Free(all);
        return r;
    }
    if (tk_field_set(&e->field, self, value) < 0) return NULL;
    tk_track_entry(self, value);
    Py_RETURN_NONE;
}

/* type.__call__(cls, *args, **kwargs) from a vectorcall's arguments. Return value: New
 * reference; NULL with an exception. */
static PyObject *type_call(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *positional = PyTuple_New(nargs), *named = NULL, *r = NULL;
    if (positional == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(positional, i, Py_NewRef(args[i]));
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nkw > 0) {
        named = PyDict_New();
        if (named == NULL) goto done;
        for (Py_ssize_t i = 0; i < nkw; i++)
            if (PyDict_SetItem(named, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) goto done;
    }
    r = PyType_Type.tp_call(cls, positional, named);
done:
    Py_DECREF(positional);
    Py_XDECREF(named);
    return r;
}

/* The k-th class called (its tp_vectorcall): cls(value) or cls(field=value) made here, any
 * other call by type.__call__. Return value: New reference; NULL with an exception. */
static PyObject *call_entry(int k, PyObject *cls, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    EntryInit *e = &entry_inits[k];
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *value = cls == e->field.cls ? field_value(e, args, nargs, kwnames) : NULL;
    if (value != NULL) { /* (an __init__ set on the class since, by a user's patch: type.__call__ calls it) */
        PyObject *now = PyObject_GetAttr(cls, tk_state.s_init); /* (the type's attribute cache: no dict read) */
        if (now == NULL) return NULL;
        if (now != e->mine) value = NULL;
        Py_DECREF(now);
    }
    if (value == NULL) return type_call(cls, args, nargs, kwnames);
    PyObject *self = type->tp_alloc(type, 0); /* (object.__new__'s allocation) */
    if (self == NULL) return NULL;
    if (tk_field_set(&e->field, self, value) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    tk_track_entry(self, value);
    return self;
}

/* The k-th class's __init__ and call: a pair for each class (a C function has no closure). */
#define ENTRY_OF(k)                                                                                         \
    static PyObject *init_##k(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) { \
        return init_entry(k, self, args, nargs, kwnames);                                                   \
    }                                                                                                       \
    static PyObject *call_##k(PyObject *cls, PyObject *const *args, size_t nargsf, PyObject *kwnames) {     \
        return call_entry(k, cls, args, nargsf, kwnames);                                                   \
    }
ENTRY_OF(0)
ENTRY_OF(1)
ENTRY_OF(2)
ENTRY_OF(3)
static PyMethodDef INIT_DEFS[TK_KEY_CLASSES] = {
    {"__init__", (PyCFunction)(void (*)(void))init_0, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, idx)\n--\n\nInitialize self with its field's value."},
    {"__init__", (PyCFunction)(void (*)(void))init_1, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, key)\n--\n\nInitialize self with its field's value."},
    {"__init__", (PyCFunction)(void (*)(void))init_2, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, name)\n--\n\nInitialize self with its field's value."},
    {"__init__", (PyCFunction)(void (*)(void))init_3, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, key)\n--\n\nInitialize self with its field's value."},
};

static vectorcallfunc CALLS[TK_KEY_CLASSES] = {call_0, call_1, call_2, call_3};

int tk_entry_call(int k, PyObject *cls) {
    EntryInit *e = &entry_inits[k];
    if (cls != e->field.cls || !PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "entry_call: expected the class entry_init was given");
        return -1;
    }
    PyObject *mine = PyObject_GetAttr(cls, tk_state.s_init); /* (a method descriptor: itself, from its class) */
    if (mine == NULL) return -1;
    if (!PyObject_TypeCheck(mine, &PyMethodDescr_Type)) {
        Py_DECREF(mine);
        PyErr_SetString(PyExc_TypeError, "entry_call: expected the __init__ entry_init made");
        return -1;
    }
    Py_XSETREF_COMPAT(e->mine, mine);
    ((PyTypeObject *)cls)->tp_vectorcall = CALLS[k];
    return 0;
}

/* (Called while treekit.core._keys is imported: the module state cannot be read yet, only the
 * names interned.) */
PyObject *tk_entry_init(int k, PyObject *cls) {
    if (tk_names() < 0) return NULL;
    PyObject *names[TK_KEY_CLASSES] = {tk_state.s_idx, tk_state.s_key, tk_state.s_name, tk_state.s_flat_key};
    tk_field field;
    if (tk_field_read(cls, names[k], &field) < 0) Py_RETURN_NONE;
    PyObject *init = PyObject_GetAttr(cls, tk_state.s_init);
    if (init == NULL || !PyFunction_Check(init)) {
        PyErr_Clear();
        Py_XDECREF(init);
        tk_field_clear(&field);
        Py_RETURN_NONE;
    }
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)cls, &INIT_DEFS[k]);
    if (descr == NULL) {
        Py_DECREF(init);
        tk_field_clear(&field);
        return NULL;
    }
    EntryInit *e = &entry_inits[k]; /* (a class made again, as by a reload, takes the place of the old) */
    tk_field old = e->field;
    PyObject *old_init = e->init;
    e->field = field;
    e->name = names[k];
    e->init = init;
    tk_field_clear(&old);
    Py_XDECREF(old_init);
    return descr;
}

/* The key entries in `keys` (a tuple nothing else holds) made treekit's, as the entry's
 * `convert_key` makes them (see treekit.core._jax): read from `kinds` ({entry class: (field
 * name, {str or int value of that field: treekit's entry})}) where it holds one, else
 * `convert(entry)`. Reading a field or hashing a class may run code: the caller forgets after.
 * 0, or -1 with an exception. */
int tk_convert_keys(PyObject *keys, PyObject *kinds, PyObject *convert) {
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(keys); j++) {
        PyObject *key = PyTuple_GET_ITEM(keys, j), *ours = NULL; /* key: the tuple's */
        PyObject *kind = kinds == NULL ? NULL : PyDict_GetItemWithError(kinds, (PyObject *)Py_TYPE(key)); /* borrowed */
        if (kind == NULL && PyErr_Occurred()) return -1;
        if (kind != NULL && PyTuple_CheckExact(kind) && PyTuple_GET_SIZE(kind) == 2 &&
            PyDict_CheckExact(PyTuple_GET_ITEM(kind, 1))) {
            Py_INCREF(kind);
            PyObject *value = PyObject_GetAttr(key, PyTuple_GET_ITEM(kind, 0));
            if (value != NULL && (PyUnicode_CheckExact(value) || PyLong_CheckExact(value))) {
                ours = PyDict_GetItemWithError(PyTuple_GET_ITEM(kind, 1), value); /* borrowed (exact str
                                                                                      or int: no code runs) */
                Py_XINCREF(ours);
            }
            Py_XDECREF(value);
            Py_DECREF(kind);
            if (ours == NULL && PyErr_Occurred()) return -1;
        }
        if (ours == NULL && (ours = PyObject_CallOneArg(convert, key)) == NULL) return -1;
        PyTuple_SET_ITEM(keys, j, ours); /* the reference made above */
        Py_DECREF(key);
    }
    return 0;
}
