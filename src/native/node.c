/* node.c: one node at a time, for both walkers (walk.c, guide.c). It mirrors
 * treekit.core._registry.lookup (a type's NodeType), the built-in entries' flatten functions
 * (_flatten_list, _flatten_none, _flatten_namedtuple: read here; _flatten_dict: dict.c) and
 * treekit.core._register.dataclass_entry's (its fields read here) and those treekit.core._known
 * proved (known.c); every other entry's flatten function is called, as the pure core does. */
#include "node.h"
#include "entries.h"
#include "records.h"

/* -- the walk's context ------------------------------------------------------------------------ */
/* A module global, or NULL (no exception) where it is missing or not of `type`.
 * Return value: New reference. */
static PyObject *global(PyObject *module, PyObject *name, PyTypeObject *type) {
    PyObject *value = PyDict_GetItemWithError(PyModule_GetDict(module), name); /* borrowed */
    if (value == NULL || Py_TYPE(value) != type) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

int tk_ctx_open(Ctx *c, int with_path) {
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < LAST_DICTS; i++) c->last[i].n = -1;
    c->recent = &c->last[0];
    c->keep_data = 1;
    c->types = global(tk_state.registry, tk_state.s_TYPES, &PyDict_Type);
    if (c->types == NULL) {
        PyErr_SetString(PyExc_TypeError, "treekit.core._registry.TYPES is not a dict");
        return -1;
    }
    /* the ones below are optional: without them the entries' flatten functions are called */
    c->orders = global(tk_state.registry, tk_state.s_ORDERS, &PyDict_Type);
    c->field_keys = global(tk_state.registry, tk_state.s_FIELD_KEYS, &PyDict_Type);
    if (with_path) c->seq_keys = global(tk_state.registry, tk_state.s_SEQ_KEYS, &PyList_Type);
    return 0;
}

void tk_ctx_close(Ctx *c) {
    tk_forget(c);
    Py_CLEAR(c->types);
    Py_CLEAR(c->orders);
    Py_CLEAR(c->field_keys);
    Py_CLEAR(c->seq_keys);
    tk_dicts_close(c);
    Py_CLEAR(c->plain);
    Py_CLEAR(c->keyed);
    Py_CLEAR(c->finish);
    Py_CLEAR(c->convert_key);
    Py_CLEAR(c->key_kinds);
    Py_CLEAR(c->plain_of);
    Py_CLEAR(c->fields);
    Py_CLEAR(c->known);
}

void tk_forget(Ctx *c) {
    if (c->memo_used == 0) return;
    PyTypeObject *types[MEMO_SIZE];
    int n = 0;
    for (int k = 0; k < MEMO_SIZE; k++) {
        if (c->memo_used >> k & 1) {
            types[n++] = c->memo[k].type;
            c->memo[k].type = NULL;
        }
    }
    c->memo_used = 0;
    Py_CLEAR(c->plain_entry);
    Py_CLEAR(c->quiet_class);
    Py_CLEAR(c->quiet_fields);
    for (int k = 0; k < n; k++) Py_DECREF(types[k]); /* last: a type's last reference may go */
}

/* Remember TYPES' answer for tp (a new reference to tp taken). */
static void memo_set(Ctx *c, Memo *m, PyTypeObject *tp, PyObject *ntype) {
    PyTypeObject *old = m->type;
    Py_INCREF(tp);
    m->type = tp;
    m->ntype = ntype;
    c->memo_used |= 1u << (m - c->memo);
    Py_XDECREF(old);
}

static Memo *memo_of(Ctx *c, PyTypeObject *tp) {
    return &c->memo[((uintptr_t)tp >> 4) % MEMO_SIZE];
}

/* Answers the memo may keep: the module holds them. */
static int remembered(PyObject *ntype) {
    return ntype == Py_None || ntype == tk_state.LIST || ntype == tk_state.TUPLE || ntype == tk_state.DICT ||
           ntype == tk_state.NONE || ntype == tk_state.NAMEDTUPLE;
}

/* TYPES[type(x)], or treekit.core._registry.resolve(type(x)) (Python code: *resolved set to 1).
 * Return value: New reference (also in *owned); NULL with an exception. */
static PyObject *lookup(PyObject *types, PyObject *x, PyObject **owned, int *resolved) {
    PyObject *cls = (PyObject *)Py_TYPE(x);
    PyObject *ntype = PyDict_GetItemWithError(types, cls); /* borrowed */
    *owned = NULL;
    if (ntype != NULL) {
        /* held: user code run later may drop the registry's reference */
        Py_INCREF(ntype);
        *owned = ntype;
        return ntype;
    }
    if (PyErr_Occurred()) return NULL;
    *resolved = 1;
    ntype = PyObject_CallOneArg(tk_state.resolve, cls);
    *owned = ntype;
    return ntype;
}

PyObject *tk_ctx_lookup(Ctx *c, PyObject *x, PyObject **owned) {
    Memo *m = memo_of(c, Py_TYPE(x));
    *owned = NULL;
    if (m->type == Py_TYPE(x)) return m->ntype;
    int resolved = 0;
    PyObject *ntype = lookup(c->types, x, owned, &resolved);
    if (resolved) tk_forget(c);
    if (ntype != NULL && remembered(ntype)) memo_set(c, m, Py_TYPE(x), ntype);
    return ntype;
}

int tk_ctx_leaf_type(Ctx *c, PyTypeObject *tp) {
    Memo *m = memo_of(c, tp);
    if (m->type == tp) return m->ntype == Py_None;
    PyObject *t = PyDict_GetItemWithError(c->types, (PyObject *)tp); /* borrowed */
    if (t == NULL) {
        PyErr_Clear();
        return 0; /* not seen yet: the walk resolves it */
    }
    if (remembered(t)) memo_set(c, m, tp, t);
    return t == Py_None;
}

/* -- sequences the walkers may index as the pure core does ------------------------------------- */
int tk_plain_seq(PyObject *o) {
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) return 1;
    if (!PyTuple_Check(o)) return 0;
    /* a tuple subclass (a namedtuple) that reads (x[i]: mp_subscript), counts, iterates and
     * tests true as a tuple does (sq_item differs in every subclass: it is not read) */
    PyTypeObject *tp = Py_TYPE(o);
    return PyType_GetSlot(tp, Py_mp_length) == PyType_GetSlot(&PyTuple_Type, Py_mp_length) &&
           PyType_GetSlot(tp, Py_sq_length) == PyType_GetSlot(&PyTuple_Type, Py_sq_length) &&
           PyType_GetSlot(tp, Py_mp_subscript) == PyType_GetSlot(&PyTuple_Type, Py_mp_subscript) &&
           PyType_GetSlot(tp, Py_tp_iter) == PyType_GetSlot(&PyTuple_Type, Py_tp_iter) &&
           PyType_GetSlot(tp, Py_nb_bool) == NULL;
}

/* -- the built-in entries, read here -------------------------------------------------------------- */
/* Lists, tuples, None, dicts and namedtuples as their entries' flatten functions give them:
 * TK_OK, TK_DEFER (not read here: the entry's flatten function is called), TK_ERROR. */
static tk_status flatten_builtin(Ctx *c, PyObject *node, PyObject *ntype, int with_path, PyObject **kids,
                                 PyObject **data, PyObject **keys) {
    if ((ntype == tk_state.LIST && PyList_CheckExact(node)) || (ntype == tk_state.TUPLE && PyTuple_CheckExact(node))) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(node);
        if (with_path) {
            if (c->seq_keys == NULL || PyList_GET_SIZE(c->seq_keys) < n) return TK_DEFER;
            Py_INCREF(c->seq_keys); /* the shared keys only grow: indexes below n stay put */
            *keys = c->seq_keys;
        }
        Py_INCREF(node);
        *kids = node;
        Py_INCREF(Py_None);
        *data = Py_None;
        return TK_OK;
    }
    if (ntype == tk_state.NONE) {
        Py_INCREF(Py_None);
        *data = Py_None;
        Py_INCREF(tk_state.empty_tuple);
        *kids = tk_state.empty_tuple;
        if (with_path) {
            Py_INCREF(tk_state.empty_tuple);
            *keys = tk_state.empty_tuple;
        }
        return TK_OK;
    }
    if (ntype == tk_state.DICT && PyDict_CheckExact(node)) {
        int ran_python = 0;
        tk_status how = tk_flatten_dict(c, node, kids, data, &ran_python);
        if (ran_python) tk_forget(c);
        if (how != TK_OK || !with_path) return how;
        *keys = tk_dict_entries(c, *data);
        if (*keys != NULL) return TK_OK;
        Py_CLEAR(*kids);
        Py_CLEAR(*data);
        return TK_ERROR;
    }
    if (ntype == tk_state.NAMEDTUPLE && c->field_keys != NULL && tk_plain_seq(node) && PyTuple_Check(node)) {
        /* treekit.core._registry._flatten_namedtuple, once its class's entries are known (the
         * look-up hashes the class, which a metaclass may do in Python: the list is held) */
        PyObject *fields = PyDict_GetItemWithError(c->field_keys, (PyObject *)Py_TYPE(node)); /* borrowed */
        if (fields == NULL) PyErr_Clear();
        if (fields == NULL || !PyList_CheckExact(fields) || PyList_GET_SIZE(fields) != PyTuple_GET_SIZE(node))
            return TK_DEFER;
        if (with_path) {
            Py_INCREF(fields);
            *keys = fields;
        }
        Py_INCREF(node);
        *kids = node;
        Py_INCREF(Py_TYPE(node));
        *data = (PyObject *)Py_TYPE(node);
        return TK_OK;
    }
    return TK_DEFER;
}

/* -- an entry's flatten function ------------------------------------------------------------------ */
/* `fields` if it is a dataclass entry's `dataclass_fields` as _register.dataclass_entry makes
 * it: (data names, meta names, keys), exact tuples, the names exact str, a key per data name. */
static int dataclass_fields(PyObject *fields) {
    if (fields == NULL || !PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 3) return 0;
    PyObject *data = PyTuple_GET_ITEM(fields, 0), *meta = PyTuple_GET_ITEM(fields, 1);
    PyObject *keys = PyTuple_GET_ITEM(fields, 2);
    if (!PyTuple_CheckExact(data) || !PyTuple_CheckExact(meta) || !PyTuple_CheckExact(keys) ||
        PyTuple_GET_SIZE(keys) != PyTuple_GET_SIZE(data))
        return 0;
    for (int t = 0; t < 2; t++) {
        PyObject *names = t == 0 ? data : meta;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) return 0;
    }
    return 1;
}

/* Note the user's own functions behind flatten function `fn`, where the entry names them (see
 * _register.make_flatten: its `plain`, `keyed` and `finish`), or a dataclass entry's fields. */
static void read_own_functions(Ctx *c, PyObject *fn) {
    if (c->plain_of == fn || !PyFunction_Check(fn)) return;
    PyObject *attrs = PyObject_GenericGetDict(fn, NULL);
    PyObject *fields = attrs == NULL ? NULL : PyDict_GetItemWithError(attrs, tk_state.s_dataclass_fields);
    fields = dataclass_fields(fields) ? fields : NULL; /* borrowed (str keys: no code runs) */
    Py_XINCREF(fields);
    Py_XSETREF_COMPAT(c->fields, fields);
    PyObject *gen = attrs == NULL ? NULL : PyDict_GetItemWithError(attrs, tk_state.s_known); /* borrowed */
    gen = tk_known_check(gen) ? gen : NULL;
    Py_XINCREF(gen);
    Py_XSETREF_COMPAT(c->known, gen);
    PyObject *got[5] = {NULL, NULL, NULL, NULL, NULL};
    PyObject *names[5] = {tk_state.s_plain, tk_state.s_keyed, tk_state.s_finish, tk_state.s_convert_key,
                          tk_state.s_key_kinds};
    for (int k = 0; attrs != NULL && k < 5; k++) {
        got[k] = PyDict_GetItemWithError(attrs, names[k]); /* borrowed (str keys: no code runs) */
        if (got[k] == Py_None) got[k] = NULL;
        Py_XINCREF(got[k]);
    }
    Py_XDECREF(attrs);
    PyErr_Clear();
    if (got[4] != NULL && !PyDict_CheckExact(got[4])) Py_CLEAR(got[4]); /* (no table: convert_key each) */
    if (got[2] == NULL) { /* no `finish`: the entry's function is called */
        for (int k = 0; k < 5; k++) Py_CLEAR(got[k]);
    }
    Py_XSETREF_COMPAT(c->plain, got[0]);
    Py_XSETREF_COMPAT(c->keyed, got[1]);
    Py_XSETREF_COMPAT(c->finish, got[2]);
    Py_XSETREF_COMPAT(c->convert_key, got[3]);
    Py_XSETREF_COMPAT(c->key_kinds, got[4]);
    Py_INCREF(fn);
    Py_XSETREF_COMPAT(c->plain_of, fn);
    Py_CLEAR(c->plain_entry); /* (it named the last function's entry) */
}

/* (key entry, child) pairs, unzipped as treekit.core._registry._unzip_keyed does, into two tuples
 * made first (nothing else holds them, and they cost less than lists); then `pairs` (a list
 * user code may hold, which a collection while they were made may have changed) is read by
 * its size as it is then, with nothing run meanwhile. 1 (new references in *kids, *keys), 0
 * (a pair of another shape: nothing set), -1 with an exception. */
static int unzip_pairs(PyObject *pairs, PyObject **kids, PyObject **keys) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pairs), j = 0;
    *kids = PyTuple_New(n);
    if (*kids != NULL) PyObject_GC_UnTrack(*kids); /* (while *keys is made) */
    *keys = *kids == NULL ? NULL : PyTuple_New(n);
    int whole = *keys != NULL && PySequence_Fast_GET_SIZE(pairs) == n;
    for (; whole && j < n; j++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(pairs, j);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) break;
        Py_INCREF(PyTuple_GET_ITEM(pair, 0));
        PyTuple_SET_ITEM(*keys, j, PyTuple_GET_ITEM(pair, 0));
        Py_INCREF(PyTuple_GET_ITEM(pair, 1));
        PyTuple_SET_ITEM(*kids, j, PyTuple_GET_ITEM(pair, 1));
    }
    if (whole && j == n) {
        PyObject_GC_Track(*kids);
        return 1;
    }
    int failed = *keys == NULL;
    Py_CLEAR(*kids); /* (their unset items are NULL) */
    Py_CLEAR(*keys);
    return failed ? -1 : 0;
}

/* The user's own function `own` (the entry's `plain` or `keyed`) called on node: TK_OK with
 * *kids, *data (and with_path, *keys) set where it gives the usual shape ((children, node
 * data), or with_path ((entry, child) pairs, node data)); else TK_OK with *result, what
 * `finish` makes of it (to check as the entry's function's result), TK_RAISED or TK_ERROR.
 * Steals a reference to own and to finish. */
static tk_status call_own(Ctx *c, PyObject *node, int with_path, PyObject *own, PyObject *finish, PyObject **kids,
                          PyObject **data, PyObject **keys, PyObject **result) {
    PyObject *r = PyObject_CallOneArg(own, node);
    Py_DECREF(own);
    tk_forget(c);
    if (r != NULL && PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) == 2 && tk_plain_seq(PyTuple_GET_ITEM(r, 0))) {
        PyObject *first = PyTuple_GET_ITEM(r, 0); /* r's, and r is ours */
        int unzipped = 1;
        if (!with_path) {
            Py_INCREF(first);
            *kids = first;
        } else {
            unzipped = unzip_pairs(first, kids, keys);
            if (unzipped > 0 && c->convert_key != NULL) { /* (JAX's key entries, made treekit's) */
                PyObject *kinds = c->key_kinds, *convert = c->convert_key;
                Py_XINCREF(kinds);
                Py_INCREF(convert);
                if (tk_convert_keys(*keys, kinds, convert) < 0) {
                    Py_CLEAR(*kids);
                    Py_CLEAR(*keys); /* raised in the entry's flatten, as the pure core sees it: noted */
                    unzipped = PyErr_ExceptionMatches(PyExc_Exception) ? -2 : -1;
                }
                Py_XDECREF(kinds);
                Py_DECREF(convert);
                tk_forget(c);
            }
        }
        if (unzipped != 0) {
            if (unzipped > 0) {
                *data = PyTuple_GET_ITEM(r, 1);
                Py_INCREF(*data);
            }
            Py_DECREF(r);
            Py_DECREF(finish);
            return unzipped > 0 ? TK_OK : unzipped == -2 ? TK_RAISED : TK_ERROR;
        } /* a pair of another shape: `finish` words it (the pairs as the function gave them) */
    }
    if (r == NULL) {
        Py_DECREF(finish);
        return PyErr_ExceptionMatches(PyExc_Exception) ? TK_RAISED : TK_ERROR;
    }
    /* not of the usual shape: `finish` checks it, makes it (children, node data, keys) or
     * raises, as the entry's function would have */
    PyObject *args[3] = {r, with_path ? Py_True : Py_False, with_path ? Py_True : Py_False};
    *result = PyObject_Vectorcall(finish, args, 3, NULL);
    Py_DECREF(finish);
    Py_DECREF(r);
    tk_forget(c);
    return TK_OK;
}

/* Whether reading the fields `fields` of an instance of class `tp` with getattr runs no
 * Python code: the class's getattr is object's, its metaclass is `type`, and each name is
 * on the class (as type(x).name finds it) not at all, as a value that is no descriptor, or as
 * a slot's member descriptor; so each getattr reads the instance's __dict__ (exact str keys)
 * or its slot. (The look-ups on the class may run code: the caller forgets after.) */
static int quiet_fields(PyTypeObject *tp, PyObject *fields) {
    if (tp->tp_getattro != PyObject_GenericGetAttr || !Py_IS_TYPE((PyObject *)tp, &PyType_Type)) return 0;
    for (int t = 0; t < 2; t++) {
        PyObject *names = PyTuple_GET_ITEM(fields, t);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
            PyObject *name = PyTuple_GET_ITEM(names, i);
            if (PyUnicode_GET_LENGTH(name) >= 2 && PyUnicode_READ_CHAR(name, 0) == '_' &&
                PyUnicode_READ_CHAR(name, 1) == '_')
                return 0; /* (type's own attributes: __doc__, __dict__, ...) */
            PyObject *attr = PyObject_GetAttr((PyObject *)tp, name);
            if (attr == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                    PyErr_Clear();
                    return 0;
                }
                PyErr_Clear();
                continue;
            }
            int plain = Py_TYPE(attr)->tp_descr_get == NULL || Py_IS_TYPE(attr, &PyMemberDescr_Type);
            Py_DECREF(attr);
            if (!plain) return 0;
        }
    }
    return 1;
}

/* A dataclass entry's flatten function, read here: the node's data fields (children, a tuple)
 * and meta fields (node data, a tuple), each read with getattr in the function's order, and
 * the entry's keys. Takes a reference to `fields` (the context's, which a getattr's code may
 * replace). TK_OK, TK_RAISED (a getattr raised, as the function would have), TK_ERROR. */
static tk_status flatten_fields(Ctx *c, PyObject *node, PyObject *fields, int with_path, PyObject **kids,
                                PyObject **data, PyObject **keys) {
    PyObject *names[2] = {PyTuple_GET_ITEM(fields, 0), PyTuple_GET_ITEM(fields, 1)}, *out[2] = {NULL, NULL};
    tk_status how = TK_OK;
    int quiet = (PyObject *)Py_TYPE(node) == c->quiet_class && fields == c->quiet_fields;
    if (!quiet && c->quiet_class == NULL) { /* the first class met since Python code last ran */
        PyObject *cls = (PyObject *)Py_TYPE(node);
        Py_INCREF(cls);
        quiet = quiet_fields(Py_TYPE(node), fields);
        tk_forget(c);
        if (quiet) {
            Py_INCREF(fields);
            c->quiet_class = cls;
            c->quiet_fields = fields;
        } else {
            Py_DECREF(cls);
        }
    }
    for (int t = 0; t < 2 && how == TK_OK; t++) {
        Py_ssize_t n = PyTuple_GET_SIZE(names[t]);
        if (t == 1 && n <= TK_KEPT_META) {
            how = tk_kept_data(node, fields, c->keep_data, &out[1]);
            break;
        }
        if ((out[t] = PyTuple_New(n)) == NULL) how = TK_ERROR;
        for (Py_ssize_t i = 0; how == TK_OK && i < n; i++) {
            PyObject *v = PyObject_GetAttr(node, PyTuple_GET_ITEM(names[t], i));
            if (v == NULL) how = PyErr_ExceptionMatches(PyExc_Exception) ? TK_RAISED : TK_ERROR;
            else PyTuple_SET_ITEM(out[t], i, v);
        }
    }
    if (!quiet) tk_forget(c); /* a getattr may have run Python code (a property, __getattr__) */
    if (how == TK_OK) {
        *kids = out[0];
        *data = out[1];
        if (with_path) {
            *keys = PyTuple_GET_ITEM(fields, 2);
            Py_INCREF(*keys);
        }
    } else {
        Py_XDECREF(out[0]);
        Py_XDECREF(out[1]);
    }
    Py_DECREF(fields);
    return how;
}

/* plain_of's dataclass fields or known function, read here (TK_DEFER: not read). */
static tk_status read_fields(Ctx *c, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                             PyObject **keys) {
    if (c->known != NULL) return tk_known_flatten(c->known, node, with_path, kids, data, keys);
    Py_INCREF(c->fields);
    return flatten_fields(c, node, c->fields, with_path, kids, data, keys);
}

/* The entry's flatten function (or the user's own behind it, or its fields) called on node. */
static tk_status flatten_call(Ctx *c, PyObject *node, PyObject *ntype, int with_path, PyObject **kids,
                              PyObject **data, PyObject **keys) {
    PyObject *fn = NULL, *r = NULL;
    tk_status how = ntype == c->plain_entry ? read_fields(c, node, with_path, kids, data, keys) : TK_DEFER;
    if (how != TK_DEFER) return how;
    fn = PyObject_GetAttr(ntype, tk_state.s_flatten);
    if (fn == NULL) return tk_defer_error();
    read_own_functions(c, fn);
    if (c->plain_of == fn && (c->fields != NULL || c->known != NULL)) {
        if (c->plain_entry == NULL) { /* (the entry's flatten attribute, read once until code runs) */
            Py_INCREF(ntype);
            c->plain_entry = ntype;
        }
        if ((how = read_fields(c, node, with_path, kids, data, keys)) != TK_DEFER) {
            Py_DECREF(fn);
            return how;
        }
    }
    PyObject *own = c->plain_of != fn ? NULL : with_path ? c->keyed : c->plain;
    if (own != NULL) {
        Py_INCREF(own);
        Py_INCREF(c->finish);
        Py_DECREF(fn);
        tk_status how = call_own(c, node, with_path, own, c->finish, kids, data, keys, &r);
        if (how != TK_OK || *kids != NULL) return how;
    } else {
        r = PyObject_CallFunctionObjArgs(fn, node, with_path ? Py_True : Py_False, NULL);
        Py_DECREF(fn);
        tk_forget(c);
    }
    if (r == NULL) return PyErr_ExceptionMatches(PyExc_Exception) ? TK_RAISED : TK_ERROR;
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 3 || !tk_plain_seq(PyTuple_GET_ITEM(r, 0))) {
        Py_DECREF(r);
        return TK_DEFER; /* (treekit's own entries return lists or tuples) */
    }
    PyObject *k = PyTuple_GET_ITEM(r, 2);
    if (with_path && (!tk_plain_seq(k) || PySequence_Fast_GET_SIZE(k) != PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(r, 0)))) {
        Py_DECREF(r);
        return TK_DEFER;
    }
    *kids = PyTuple_GET_ITEM(r, 0);
    *data = PyTuple_GET_ITEM(r, 1);
    Py_INCREF(*kids);
    Py_INCREF(*data);
    if (with_path) {
        Py_INCREF(k);
        *keys = k;
    }
    Py_DECREF(r);
    return TK_OK;
}

tk_status tk_flatten_node(Ctx *c, PyObject *node, PyObject *ntype, int with_path, PyObject **kids, PyObject **data,
                          PyObject **keys) {
    *kids = *data = *keys = NULL;
    tk_status how = flatten_builtin(c, node, ntype, with_path, kids, data, keys);
    if (how != TK_DEFER) return how;
    return flatten_call(c, node, ntype, with_path, kids, data, keys);
}
