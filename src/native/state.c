/* state.c: the module state (tk_state). It mirrors the imports of the Python modules the
 * core stands in for (treekit.core._registry, _treedef, _traverse, _errors, _keys): every Python
 * object and name the core reads is read here, at first use, from the lists in state.h. */
#include "state.h"

tk_module_state tk_state;

tk_status tk_defer_error(void) {
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return TK_DEFER;
    }
    return TK_ERROR; /* KeyboardInterrupt, SystemExit, ...: they go on as they are */
}

int tk_field_read(PyObject *cls, PyObject *name, tk_field *field) {
    field->cls = field->descr = NULL;
    if (!PyType_Check(cls)) return -1;
    /* a class's attribute that is a member descriptor is the descriptor itself */
    PyObject *descr = PyObject_GetAttr(cls, name), *owner = NULL;
    int own = descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
              (owner = PyObject_GetAttr(descr, tk_state.s_objclass)) == cls;
    Py_XDECREF(owner);
    PyErr_Clear();
    if (!own) {
        Py_XDECREF(descr);
        return -1;
    }
    Py_INCREF(cls);
    field->cls = cls;
    field->descr = descr; /* the reference made above */
    return 0;
}

void tk_field_clear(tk_field *field) {
    Py_CLEAR(field->cls);
    Py_CLEAR(field->descr);
}

PyObject *tk_entry_new(int k, PyObject *value) {
    const tk_field *field = &tk_state.fields[k];
    PyObject *cls = k == TK_SEQUENCE_KEY ? tk_state.SequenceKey : k == TK_DICT_KEY ? tk_state.DictKey
                  : k == TK_GETATTR_KEY  ? tk_state.GetAttrKey : tk_state.FlattenedIndexKey;
    PyTypeObject *tp = (PyTypeObject *)cls;
    PyObject *entry = tp->tp_alloc(tp, 0);
    if (entry == NULL) return NULL;
    /* its empty slot, set as the dataclass's __init__ sets it (object.__setattr__) */
    int bad = field->descr != NULL ? tk_field_set(field, entry, value) : PyObject_GenericSetAttr(entry,
              k == TK_SEQUENCE_KEY ? tk_state.s_idx : k == TK_GETATTR_KEY ? tk_state.s_name : tk_state.s_key, value);
    if (bad < 0) {
        Py_DECREF(entry);
        return NULL;
    }
    tk_track_entry(entry, value);
    return entry;
}

/* TreeDef(records) may be made without its __init__ where its slots are the three it sets. */
static void read_treedef(void) {
    PyObject *slots = PyObject_GetAttr(tk_state.TreeDef, tk_state.s_slots);
    PyObject *expected = PyTuple_Pack(3, tk_state.s_builder, tk_state.s_hash, tk_state.s_nodes);
    tk_state.plain_treedef = slots != NULL && expected != NULL &&
                             PyObject_RichCompareBool(slots, expected, Py_EQ) == 1 && PyType_Check(tk_state.TreeDef);
    Py_XDECREF(slots);
    Py_XDECREF(expected);
    PyErr_Clear();
}

/* Each key entry class's field (SequenceKey.idx, DictKey.key, GetAttrKey.name,
 * FlattenedIndexKey.key): its member descriptor, where the class's attribute is one of that
 * very class; else (descr NULL) it is read and set by name. */
static void read_fields(void) {
    PyObject *classes[TK_KEY_CLASSES] = {tk_state.SequenceKey, tk_state.DictKey, tk_state.GetAttrKey,
                                         tk_state.FlattenedIndexKey};
    PyObject *names[TK_KEY_CLASSES] = {tk_state.s_idx, tk_state.s_key, tk_state.s_name, tk_state.s_flat_key};
    for (int k = 0; k < TK_KEY_CLASSES; k++) tk_field_read(classes[k], names[k], &tk_state.fields[k]);
}

int tk_names(void) {
#define TK_INTERN(field, where, name) \
    if (tk_state.s_##field == NULL && (tk_state.s_##field = PyUnicode_InternFromString(name)) == NULL) return -1;
    TK_NAMES(TK_INTERN)
    if (tk_state.empty_str == NULL && (tk_state.empty_str = PyUnicode_InternFromString("")) == NULL) return -1;
    if (tk_state.empty_tuple == NULL && (tk_state.empty_tuple = PyTuple_New(0)) == NULL) return -1;
    return 0;
}

int tk_ready(void) {
    if (tk_state.ready) return 0;
    if (tk_names() < 0) return -1;
#define TK_IMPORT_MODULE(field, module) \
    if (tk_state.field == NULL && (tk_state.field = PyImport_ImportModule(module)) == NULL) return -1;
    TK_MODULES(TK_IMPORT_MODULE)
#define TK_READ_IMPORT(field, module, name) \
    if (tk_state.field == NULL && (tk_state.field = PyObject_GetAttrString(tk_state.module, name)) == NULL) return -1;
    TK_IMPORTS(TK_READ_IMPORT)
    for (int k = 0; k < TK_KEY_CLASSES; k++) {
        PyObject *cls = k == 0 ? tk_state.SequenceKey : k == 1 ? tk_state.DictKey : k == 2 ? tk_state.GetAttrKey
                                                                                   : tk_state.FlattenedIndexKey;
        if (!PyType_Check(cls)) {
            PyErr_Format(PyExc_TypeError, "treekit.core._keys: a key entry class expected, got %R", cls);
            return -1;
        }
    }
    read_treedef();
    read_fields();
    tk_state.ready = 1;
    return 0;
}
