/* module.c: the treekit._native module. Its functions take the place of the pure-Python
 * core's hot paths when treekit runs the native core (see treekit/_core.py):
 *   flatten(tree, is_leaf=None, with_path=False, leaf_takes_path=False, label='tree')
 *       mirrors treekit._traverse.flatten; hands a tree it does not finish to it
 *   leaves(tree, is_leaf=None)  mirrors treekit._traverse.leaves (no records made)
 *   build(nodes, leaves)      mirrors treekit._treedef._interpret; DEFER: let Python build it
 *   up_to(nodes, tree, strict=False, is_leaf=None)
 *       mirrors treekit._treedef.TreeDef._walk without keys; DEFER: let Python walk it;
 *       a tuple (record index, exception): the flatten function there raised it
 *   map(f, tree, rest, is_leaf, with_path, leaf_takes_path, failed)
 *       mirrors treekit._ops.tree_map / tree_map_with_path; DEFER: let Python map it
 *   keystr(keys, simple, separator)
 *       mirrors treekit._keys.keystr; DEFER: let Python join it
 *   keystr_function(pure, module)
 *       treekit.keystr, a built-in function: keystr's calls in C, with pure (keystr as
 *       written in Python) taking every call whose arguments it must check
 */
#include "native.h"
#ifndef Py_T_OBJECT_EX
#include "structmember.h" /* T_OBJECT_EX (Py_T_OBJECT_EX from 3.12) */
#else
#define T_OBJECT_EX Py_T_OBJECT_EX
#endif

State S;

static int read_slots(void);

PyObject *tk_lookup(PyObject *types, PyObject *x, PyObject **owned, int *resolved) {
    PyObject *cls = (PyObject *)Py_TYPE(x);
    PyObject *ntype = PyDict_GetItemWithError(types, cls); /* borrowed */
    *owned = NULL;
    if (ntype != NULL) {
        /* hold it: user code run later may drop the registry's reference */
        Py_INCREF(ntype);
        *owned = ntype;
        return ntype;
    }
    if (PyErr_Occurred()) return NULL;
    *resolved = 1;
    ntype = PyObject_CallOneArg(S.resolve, cls);
    *owned = ntype;
    return ntype;
}

static PyObject *attr(PyObject *mod, const char *name) {
    return PyObject_GetAttrString(mod, name);
}

int tk_ready(void) {
    if (S.ready) return 0;
    S.registry = PyImport_ImportModule("treekit._registry");
    S.treedef_mod = S.registry ? PyImport_ImportModule("treekit._treedef") : NULL;
    S.traverse = S.treedef_mod ? PyImport_ImportModule("treekit._traverse") : NULL;
    S.errors = S.traverse ? PyImport_ImportModule("treekit._errors") : NULL;
    if (S.errors == NULL) return -1;
    if (!(S.LIST = attr(S.registry, "LIST")) || !(S.TUPLE = attr(S.registry, "TUPLE")) ||
        !(S.DICT = attr(S.registry, "DICT")) || !(S.NONE = attr(S.registry, "NONE")) ||
        !(S.NAMEDTUPLE = attr(S.registry, "NAMEDTUPLE")) || !(S.resolve = attr(S.registry, "resolve")) ||
        !(S.TreeDef = attr(S.treedef_mod, "TreeDef")) || !(S.LEAF = attr(S.treedef_mod, "LEAF")) ||
        !(S.unflatten = attr(S.treedef_mod, "_unflatten")))
        return -1;
    PyObject *keys = PyImport_ImportModule("treekit._keys");
    if (keys == NULL) return -1;
    S.SequenceKey = attr(keys, "SequenceKey");
    S.DictKey = S.SequenceKey ? attr(keys, "DictKey") : NULL;
    S.GetAttrKey = S.DictKey ? attr(keys, "GetAttrKey") : NULL;
    S.FlattenedIndexKey = S.GetAttrKey ? attr(keys, "FlattenedIndexKey") : NULL;
    Py_DECREF(keys);
    if (S.FlattenedIndexKey == NULL) return -1;
    if (!PyType_Check(S.DictKey)) {
        PyErr_SetString(PyExc_TypeError, "treekit._keys.DictKey is not a class");
        return -1;
    }
    if (!(S.s_flatten = PyUnicode_InternFromString("flatten")) ||
        !(S.s_original = PyUnicode_InternFromString("original")) || !(S.s_positions = PyUnicode_InternFromString("positions")) ||
        !(S.s_TYPES = PyUnicode_InternFromString("TYPES")) || !(S.s_ORDERS = PyUnicode_InternFromString("ORDERS")) ||
        !(S.s_nodes = PyUnicode_InternFromString("_nodes")) || !(S.empty_tuple = PyTuple_New(0)) ||
        !(S.s_FIELD_KEYS = PyUnicode_InternFromString("_FIELD_KEYS")) ||
        !(S.s_SEQ_KEYS = PyUnicode_InternFromString("_SEQ_KEYS")) || !(S.s_key = PyUnicode_InternFromString("key")) ||
        !(S.s_MAX_DEPTH = PyUnicode_InternFromString("MAX_DEPTH")) ||
        !(S.s_idx = PyUnicode_InternFromString("idx")) || !(S.s_name = PyUnicode_InternFromString("name")) ||
        !(S.s_build = PyUnicode_InternFromString("_build")) || !(S.s_empty = PyUnicode_InternFromString("")))
        return -1;
    if (!(S.s_hash = PyUnicode_InternFromString("_hash")) || !(S.s_builder = PyUnicode_InternFromString("_builder")) ||
        !(S.s_plain = PyUnicode_InternFromString("plain")) || !(S.s_keyed = PyUnicode_InternFromString("keyed")) ||
        !(S.s_unflatten = PyUnicode_InternFromString("unflatten")) || !(S.s_func = PyUnicode_InternFromString("func")) ||
        !(S.s_simple = PyUnicode_InternFromString("simple")) || !(S.s_keys = PyUnicode_InternFromString("keys")) ||
        !(S.s_separator = PyUnicode_InternFromString("separator")) ||
        !(S.s_finish = PyUnicode_InternFromString("finish")) || !(S.s_walk = PyUnicode_InternFromString("_walk")) ||
        !(S.s_tree = PyUnicode_InternFromString("tree")))
        return -1;
    PyObject *slots = PyObject_GetAttrString(S.TreeDef, "__slots__");
    PyObject *expected = Py_BuildValue("(sss)", "_builder", "_hash", "_nodes");
    S.plain_treedef = slots != NULL && expected != NULL && PyObject_RichCompareBool(slots, expected, Py_EQ) == 1 &&
                      PyType_Check(S.TreeDef);
    Py_XDECREF(slots);
    Py_XDECREF(expected);
    PyErr_Clear();
    for (int i = 0; i < 8; i++)
        if (!(S.small[i] = PyLong_FromLong(i))) return -1;
    if (read_slots() < 0) return -1;
    S.ready = 1;
    return 0;
}

PyObject *tk_treedef(PyObject *records) {
    if (!S.plain_treedef) return PyObject_CallOneArg(S.TreeDef, records);
    /* TreeDef(records) without running __init__: its three slots, as __init__ sets them */
    PyTypeObject *tp = (PyTypeObject *)S.TreeDef;
    PyObject *treedef = tp->tp_alloc(tp, 0);
    if (treedef == NULL) return NULL;
    if (PyObject_GenericSetAttr(treedef, S.s_nodes, records) < 0 ||
        PyObject_GenericSetAttr(treedef, S.s_hash, Py_None) < 0 ||
        PyObject_GenericSetAttr(treedef, S.s_builder, Py_None) < 0) {
        Py_DECREF(treedef);
        return NULL;
    }
    return treedef;
}

/* The pure function a call is handed to: treekit._traverse.pure_flatten. */
static PyObject *pure_flatten(PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *fn = PyObject_GetAttrString(S.traverse, "pure_flatten");
    if (fn == NULL) return NULL;
    PyObject *r = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    Py_DECREF(fn);
    return r;
}

static const char *const FLATTEN_ARGS[] = {"tree", "is_leaf", "with_path", "leaf_takes_path", "label"};

/* flatten(...) -> (leaves, TreeDef, paths or None): new reference. */
static PyObject *flatten(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *given[5] = {NULL, Py_None, Py_False, Py_False, NULL};
    if (nargs > 5) return pure_flatten(args, (size_t)nargs, kwnames);
    for (Py_ssize_t i = 0; i < nargs; i++) given[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        int found = 0;
        for (int i = 0; name != NULL && i < 5; i++) {
            if (strcmp(name, FLATTEN_ARGS[i]) == 0) {
                given[i] = args[nargs + k];
                found = 1;
            }
        }
        if (!found) {
            PyErr_Clear();
            return pure_flatten(args, (size_t)nargs, kwnames);
        }
    }
    if (given[0] == NULL || tk_ready() < 0) return pure_flatten(args, (size_t)nargs, kwnames);
    int with_path = PyObject_IsTrue(given[2]), takes_path = PyObject_IsTrue(given[3]);
    if (with_path < 0 || takes_path < 0 || (takes_path && (!with_path || given[1] == Py_None))) {
        PyErr_Clear();
        return pure_flatten(args, (size_t)nargs, kwnames);
    }
    PyObject *leaves = PyList_New(0), *records = NULL, *paths = with_path ? PyList_New(0) : NULL;
    PyObject *result = NULL;
    if (leaves == NULL || (with_path && paths == NULL)) goto done;
    int rc = tk_walk(given[0], given[1] == Py_None ? NULL : given[1], with_path, takes_path, leaves, &records, paths,
                     given[4]);
    if (rc == DEFER) {
        result = pure_flatten(args, (size_t)nargs, kwnames);
        goto done;
    }
    if (rc < 0) goto done;
    PyObject *treedef = tk_treedef(records);
    if (treedef == NULL) goto done;
    result = PyTuple_Pack(3, leaves, treedef, with_path ? paths : Py_None);
    Py_DECREF(treedef);
done:
    Py_XDECREF(leaves);
    Py_XDECREF(records);
    Py_XDECREF(paths);
    return result;
}

/* leaves(tree, is_leaf=None) -> list (new reference): flatten(tree, is_leaf)[0] without
 * making records; a tree it does not finish goes to treekit._traverse.pure_flatten. */
static PyObject *leaves(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "leaves(tree, is_leaf=None)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    PyObject *is_leaf = nargs > 1 && args[1] != Py_None ? args[1] : NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    int rc = tk_walk(args[0], is_leaf, 0, 0, out, NULL, NULL, NULL);
    if (rc == 0) return out;
    Py_DECREF(out);
    if (rc < 0) return NULL;
    PyObject *r = pure_flatten(args, (size_t)nargs, NULL);
    if (r == NULL) return NULL;
    out = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 3 ? PyTuple_GET_ITEM(r, 0) : NULL;
    Py_XINCREF(out);
    Py_DECREF(r);
    if (out == NULL) PyErr_SetString(PyExc_SystemError, "treekit._traverse.pure_flatten returned no leaves");
    return out;
}

/* build(nodes, leaves) -> the tree (new reference), or the module's DEFER object. */
static PyObject *build(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "build(nodes, leaves)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int defer = 0;
    PyObject *tree = tk_build(args[0], args[1], &defer);
    if (tree == NULL && defer) {
        PyErr_Clear();
        Py_INCREF(S.deferred);
        return S.deferred;
    }
    return tree;
}


/* up_to(nodes, tree, strict=False, is_leaf=None) -> list of subtrees (new reference), DEFER,
 * or (record index, exception) where a flatten function raised. */
static PyObject *up_to(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "up_to(nodes, tree, strict=False, is_leaf=None)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int strict = nargs > 2 ? PyObject_IsTrue(args[2]) : 0;
    if (strict < 0) return NULL;
    PyObject *is_leaf = nargs > 3 && args[3] != Py_None ? args[3] : NULL;
    PyObject *out = NULL;
    int rc = tk_up_to(args[0], args[1], strict, is_leaf, &out);
    if (rc == 0 || rc == RAISED) return out; /* RAISED: (record index, exception), for _walk to word */
    if (rc < 0) return NULL;
    Py_INCREF(S.deferred);
    return S.deferred;
}

/* map(f, tree, rest, is_leaf, with_path, leaf_takes_path, failed) -> the tree, or DEFER. */
static PyObject *map(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "map(f, tree, rest: tuple, is_leaf, with_path, leaf_takes_path, failed)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int with_path = PyObject_IsTrue(args[4]), takes_path = PyObject_IsTrue(args[5]);
    if (with_path < 0 || takes_path < 0) return NULL;
    PyObject *is_leaf = args[3] == Py_None ? NULL : args[3];
    if (takes_path && (!with_path || is_leaf == NULL)) takes_path = 0; /* nothing to call with a path */
    return tk_map(args[0], args[1], args[2], is_leaf, with_path, takes_path, args[6]);
}

/* flatten_pairs(tree, is_leaf, leaf_takes_path) -> (pairs, TreeDef): new reference;
 * treekit._traverse.flatten_pairs. Its leaves and paths lists never leave this function, so
 * the collector is not told of them, and the pairs are collected in C before their list is
 * made: a gen-0 collection while the pairs are made (one each 700) finds no 10,000-item list
 * of this call to go over. A pair is untracked where neither item is tracked. */
static PyObject *flatten_pairs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "flatten_pairs(tree, is_leaf, leaf_takes_path)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    int takes_path = PyObject_IsTrue(args[2]);
    if (takes_path < 0) return NULL;
    PyObject *is_leaf = args[1] == Py_None ? NULL : args[1];
    PyObject *leaves = NULL, *paths = NULL, *records = NULL, *out = NULL, **made = NULL;
    Py_ssize_t n = 0, done = 0;
    int rc = DEFER;
    if (takes_path && is_leaf == NULL) goto done; /* the pure core's call */
    leaves = PyList_New(0);
    paths = leaves == NULL ? NULL : PyList_New(0);
    if (paths == NULL) goto fail;
    PyObject_GC_UnTrack(leaves);
    PyObject_GC_UnTrack(paths);
    rc = tk_walk(args[0], is_leaf, 1, takes_path, leaves, &records, paths, NULL);
    if (rc != 0) goto done;
    n = PyList_GET_SIZE(leaves);
    if (PyList_GET_SIZE(paths) != n || (made = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1))) == NULL) {
        if (made == NULL && PyList_GET_SIZE(paths) == n) PyErr_NoMemory();
        else PyErr_SetString(PyExc_SystemError, "treekit._native: as many paths as leaves expected");
        goto fail;
    }
    for (; done < n; done++) {
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(paths, done), PyList_GET_ITEM(leaves, done));
        if (pair == NULL) goto fail;
        tk_untrack_tuple(pair);
        made[done] = pair;
    }
    /* the treedef first: the list is filled as soon as it is made (no collection can see its NULLs) */
    PyObject *treedef = tk_treedef(records), *list = treedef == NULL ? NULL : PyList_New(n);
    if (list == NULL) {
        Py_XDECREF(treedef);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyList_SET_ITEM(list, i, made[i]);
    done = 0; /* the list's now */
    out = PyTuple_Pack(2, list, treedef);
    Py_DECREF(list);
    Py_DECREF(treedef);
    goto done;
fail:
    rc = -1;
done:
    for (Py_ssize_t i = 0; i < done; i++) Py_DECREF(made[i]);
    PyMem_Free(made);
    Py_XDECREF(leaves);
    Py_XDECREF(paths);
    Py_XDECREF(records);
    if (rc == DEFER) { /* treekit._traverse.pure_flatten_pairs raises or finishes it */
        PyObject *fn = PyObject_GetAttrString(S.traverse, "pure_flatten_pairs");
        out = fn == NULL ? NULL : PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
        Py_XDECREF(fn);
    }
    return out;
}

/* Texts of entries seen before: "[i]" for SequenceKey(i) with 0 <= i < 256, and, in a
 * bounded dict each, "['k']" for DictKey(k) and ".n" for GetAttrKey(n) with k, n exact
 * strs (strs are immutable and their repr and format depend on nothing else). */
#define SEQ_TEXTS 256
static PyObject *seq_texts[SEQ_TEXTS];
static PyObject *dict_texts, *attr_texts;
#define TEXTS_LIMIT (1 << 15) /* keys: a flat dict of as many keys as the big-dict caches keep */

static PyObject *remembered_text(PyObject **cache, PyObject *key, PyObject *text) {
    if (*cache == NULL && (*cache = PyDict_New()) == NULL) return NULL;
    if (PyDict_GET_SIZE(*cache) >= TEXTS_LIMIT) PyDict_Clear(*cache);
    if (PyDict_SetItem(*cache, key, text) < 0) return NULL;
    return text;
}

/* One entry's text, as its __str__ (simple=0) or treekit._keys._simple (simple=1) gives it:
 * new reference. The four built-in entries are read here; any other through str(). */
static PyObject *entry_text(PyObject *entry, int simple) {
    PyObject *cls = (PyObject *)Py_TYPE(entry), *name, *value, *text, *out;
    PyObject **cache = NULL;
    if (cls == S.SequenceKey) {
        name = S.s_idx;
    } else if (cls == S.DictKey) {
        name = S.s_key, cache = &dict_texts;
    } else if (cls == S.GetAttrKey) {
        name = S.s_name, cache = &attr_texts;
    } else if (cls == S.FlattenedIndexKey) {
        name = S.s_key;
    } else {
        return PyObject_Str(entry);
    }
    value = PyObject_GetAttr(entry, name);
    if (value == NULL) return NULL;
    if (simple) {
        if (cls == S.GetAttrKey) return value; /* the name as it is */
        out = PyObject_Str(value);
        Py_DECREF(value);
        return out;
    }
    if (cls == S.SequenceKey && PyLong_CheckExact(value)) {
        Py_ssize_t i = PyLong_AsSsize_t(value);
        if (i >= 0 && i < SEQ_TEXTS && seq_texts[i] != NULL) {
            Py_DECREF(value);
            Py_INCREF(seq_texts[i]);
            return seq_texts[i];
        }
        PyErr_Clear();
    }
    int plain_str = PyUnicode_CheckExact(value);
    if (cache != NULL && plain_str && *cache != NULL) {
        out = PyDict_GetItemWithError(*cache, value); /* borrowed */
        if (out != NULL) {
            Py_DECREF(value);
            Py_INCREF(out);
            return out;
        }
        PyErr_Clear();
    }
    /* f"[{idx}]", f"[{key!r}]", f".{name}", f"[<flat index {key}>]" */
    text = cls == S.DictKey ? PyObject_Repr(value) : PyObject_Format(value, S.s_empty);
    if (text == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    if (cls == S.SequenceKey) {
        out = PyUnicode_FromFormat("[%U]", text);
    } else if (cls == S.DictKey) {
        out = PyUnicode_FromFormat("[%U]", text);
    } else if (cls == S.GetAttrKey) {
        out = PyUnicode_FromFormat(".%U", text);
    } else {
        out = PyUnicode_FromFormat("[<flat index %U>]", text);
    }
    Py_DECREF(text);
    if (out != NULL && cls == S.SequenceKey && PyLong_CheckExact(value)) {
        Py_ssize_t i = PyLong_AsSsize_t(value);
        if (i >= 0 && i < SEQ_TEXTS && seq_texts[i] == NULL) {
            Py_INCREF(out);
            seq_texts[i] = out;
        }
        PyErr_Clear();
    }
    if (out != NULL && cache != NULL && plain_str && remembered_text(cache, value, out) == NULL) PyErr_Clear();
    Py_DECREF(value);
    return out;
}

/* -- keystr's common case: written straight into the result ------------------------------------ */
/* ASCII characters a str's repr shows as they are (PRINTED), and those besides a quote and a
 * backslash (BARE): such a str's repr is itself in single quotes. */
#define PRINTED 1
#define BARE 2
static unsigned char ascii_kind[128];

/* The value slot of each built-in entry class (SequenceKey.idx, DictKey.key, GetAttrKey.name,
 * FlattenedIndexKey.key): its offset where the class's attribute is a member descriptor of
 * that very class holding an object (S.entry_offset), 0 where it must be read by getattr. */
static int read_slots(void) {
    PyObject *classes[4] = {S.SequenceKey, S.DictKey, S.GetAttrKey, S.FlattenedIndexKey};
    PyObject *names[4] = {S.s_idx, S.s_key, S.s_name, S.s_key};
    for (int k = 0; k < 4; k++) {
        S.entry_offset[k] = 0;
        if (!PyType_Check(classes[k])) continue;
        PyObject *dict = ((PyTypeObject *)classes[k])->tp_dict;
        PyObject *d = dict == NULL ? NULL : PyDict_GetItemWithError(dict, names[k]); /* borrowed */
        if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type &&
            ((PyDescrObject *)d)->d_type == (PyTypeObject *)classes[k]) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            if (m->type == T_OBJECT_EX && m->offset > 0) S.entry_offset[k] = m->offset;
        }
    }
    PyErr_Clear();
    for (int c = 0x20; c < 0x7f; c++) ascii_kind[c] = c == '\'' || c == '\\' ? PRINTED : PRINTED | BARE;
    return 0;
}

/* The object in entry's value slot (borrowed, NULL if unset) when entry is exactly of the
 * k-th class and the slot is read directly; NULL otherwise. */
static inline PyObject *slot_value(PyObject *entry, int k, PyObject *cls) {
    if (S.entry_offset[k] == 0 || (PyObject *)Py_TYPE(entry) != cls) return NULL;
    return *(PyObject **)((char *)entry + S.entry_offset[k]);
}

/* One entry's text in pieces: prefix, body, suffix (ASCII). */
typedef struct {
    const char *pre, *body, *post;
    Py_ssize_t npre, nbody, npost;
    char digits[24];
} Piece;

#define PIECES 16

/* An exact int as decimal digits into p->digits (the body): 0, or -1 if it does not fit. */
static int digits_of(PyObject *v, Piece *p) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    char *end = p->digits + sizeof(p->digits), *at = end;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        *--at = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0) *--at = '-';
    p->body = at;
    p->nbody = end - at;
    return 0;
}

/* A str that is ASCII and made of `kind` characters only. */
static int plain_ascii(PyObject *v, unsigned char kind) {
    if (!PyUnicode_IS_ASCII(v)) return 0;
    const unsigned char *c = PyUnicode_1BYTE_DATA(v);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(v); i < n; i++) {
        if (!(ascii_kind[c[i]] & kind)) return 0;
    }
    return 1;
}

/* The texts of the built-in entries as __str__ (or _simple) gives them, for the values whose
 * text is plain ASCII: 0, or -1 (no exception) if this entry is not of that kind. */
static int piece_of(PyObject *entry, int simple, Piece *p) {
    p->pre = p->post = "";
    p->npre = p->npost = 0;
    PyObject *v;
    if ((v = slot_value(entry, 0, S.SequenceKey)) != NULL) { /* SequenceKey: f"[{idx}]" */
        if (!PyLong_CheckExact(v) || digits_of(v, p) < 0) return -1;
        if (!simple) p->pre = "[", p->npre = 1, p->post = "]", p->npost = 1;
        return 0;
    }
    if ((v = slot_value(entry, 1, S.DictKey)) != NULL) { /* DictKey: f"[{key!r}]" */
        if (PyLong_CheckExact(v)) {
            if (digits_of(v, p) < 0) return -1;
            if (!simple) p->pre = "[", p->npre = 1, p->post = "]", p->npost = 1;
            return 0;
        }
        if (!PyUnicode_CheckExact(v) || !plain_ascii(v, simple ? PRINTED : BARE)) return -1;
        p->body = (const char *)PyUnicode_1BYTE_DATA(v);
        p->nbody = PyUnicode_GET_LENGTH(v);
        if (!simple) p->pre = "['", p->npre = 2, p->post = "']", p->npost = 2;
        return 0;
    }
    if ((v = slot_value(entry, 2, S.GetAttrKey)) != NULL) { /* GetAttrKey: f".{name}" */
        if (!PyUnicode_CheckExact(v) || !plain_ascii(v, PRINTED)) return -1;
        p->body = (const char *)PyUnicode_1BYTE_DATA(v);
        p->nbody = PyUnicode_GET_LENGTH(v);
        if (!simple) p->pre = ".", p->npre = 1;
        return 0;
    }
    if ((v = slot_value(entry, 3, S.FlattenedIndexKey)) != NULL) { /* FlattenedIndexKey: f"[<flat index {key}>]" */
        if (!PyLong_CheckExact(v) || digits_of(v, p) < 0) return -1;
        if (!simple) p->pre = "[<flat index ", p->npre = 13, p->post = ">]", p->npost = 2;
        return 0;
    }
    return -1;
}

/* The joined text of a key path of built-in entries with plain values, made in one
 * allocation: new reference; NULL (no exception) if the path is not of that kind. */
static PyObject *plain_keystr(PyObject *seq, int simple, PyObject *separator) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (!PyUnicode_IS_ASCII(separator)) return NULL;
    Piece few[PIECES], *pieces = n <= PIECES ? few : PyMem_Malloc(sizeof(Piece) * (size_t)n);
    if (pieces == NULL) return NULL;
    Py_ssize_t nsep = PyUnicode_GET_LENGTH(separator), total = n > 1 ? nsep * (n - 1) : 0;
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Piece *p = &pieces[i];
        if (piece_of(PySequence_Fast_GET_ITEM(seq, i), simple, p) < 0) goto done;
        total += p->npre + p->nbody + p->npost;
    }
    out = PyUnicode_New(total, 127);
    if (out == NULL) {
        PyErr_Clear();
        goto done;
    }
    char *at = (char *)PyUnicode_1BYTE_DATA(out);
    const char *sep = (const char *)PyUnicode_1BYTE_DATA(separator);
    for (Py_ssize_t i = 0; i < n; i++) {
        Piece *p = &pieces[i];
        if (i && nsep) memcpy(at, sep, (size_t)nsep), at += nsep;
        memcpy(at, p->pre, (size_t)p->npre), at += p->npre;
        memcpy(at, p->body, (size_t)p->nbody), at += p->nbody;
        memcpy(at, p->post, (size_t)p->npost), at += p->npost;
    }
done:
    if (pieces != few) PyMem_Free(pieces);
    return out;
}

/* The joined text of `keys` (new reference; NULL with an exception), simple and separator
 * given as the pure function's checks let them through (a bool, an exact str). */
static PyObject *keystr_of(PyObject *keys, int simple, PyObject *separator) {
    PyObject *seq;
    if (PyTuple_CheckExact(keys) || PyList_CheckExact(keys)) {
        seq = keys;
        PyObject *out = plain_keystr(seq, simple, separator); /* nothing runs that could change seq */
        if (out != NULL) return out;
        Py_INCREF(seq);
    } else {
        PyObject *it = PyObject_GetIter(keys); /* as map(str, keys): its TypeError */
        seq = it == NULL ? NULL : PySequence_List(it);
        Py_XDECREF(it);
        if (seq == NULL) return NULL;
    }
    /* read as map() reads a list: its size at each step (an entry's __str__ may change it) */
    PyObject *texts = PyList_New(0), *out = NULL;
    for (Py_ssize_t i = 0; texts != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(entry);
        PyObject *text = entry_text(entry, simple);
        Py_DECREF(entry);
        if (text == NULL || PyList_Append(texts, text) < 0) Py_CLEAR(texts);
        Py_XDECREF(text);
    }
    if (texts != NULL) out = PyUnicode_Join(separator, texts);
    Py_XDECREF(texts);
    Py_DECREF(seq);
    return out;
}

/* keystr(keys, simple, separator) -> str (new reference), or DEFER before reading keys. */
static PyObject *keystr(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "keystr(keys, simple, separator)");
        return NULL;
    }
    if (tk_ready() < 0) return NULL;
    if (!PyBool_Check(args[1]) || !PyUnicode_CheckExact(args[2])) {
        Py_INCREF(S.deferred);
        return S.deferred;
    }
    return keystr_of(args[0], args[1] == Py_True, args[2]);
}

/* One keyword argument's name is `name`. */
static int named(PyObject *kw, PyObject *interned, const char *name) {
    return kw == interned || PyUnicode_CompareWithASCIIString(kw, name) == 0;
}

/* treekit._keys.keystr as written in Python: what treekit.keystr calls for any call that is
 * not keystr(keys, *, simple=<a bool>, separator=<a str>), with the very arguments (it
 * checks them and raises). Owned; set by keystr_function. */
static PyObject *pure_keystr;

/* treekit.keystr itself (self: its module). New reference. */
static PyObject *keystr_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *keys = nargs == 1 ? args[0] : NULL, *simple = Py_False, *separator = NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 1 || tk_ready() < 0) goto pure;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + k];
        /* (a name given twice never gets here; keys given both ways is the pure function's error) */
        if (named(kw, S.s_simple, "simple")) {
            simple = value;
        } else if (named(kw, S.s_separator, "separator")) {
            separator = value;
        } else if (named(kw, S.s_keys, "keys") && keys == NULL) {
            keys = value;
        } else {
            goto pure;
        }
    }
    if (separator == NULL) separator = S.s_empty;
    if (keys == NULL || !PyBool_Check(simple) || !PyUnicode_CheckExact(separator)) goto pure;
    return keystr_of(keys, simple == Py_True, separator);
pure:
    PyErr_Clear();
    return PyObject_Vectorcall(pure_keystr, args, (size_t)nargs, kwnames);
}

/* keystr_function(pure, module) -> treekit.keystr: a built-in function of `module` with
 * pure's name and docstring (and its signature, for inspect) that runs keystr_call. */
static PyMethodDef *keystr_def;
static PyObject *keystr_function(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyFunction_Check(args[0]) || !PyModule_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keystr_function(pure: function, module)");
        return NULL;
    }
    PyObject *doc = PyObject_GetAttrString(args[0], "__doc__");
    PyObject *name = doc == NULL ? NULL : PyModule_GetNameObject(args[1]);
    if (name == NULL || !PyUnicode_Check(doc)) {
        Py_XDECREF(doc);
        Py_XDECREF(name);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "keystr_function: a function with a docstring");
        return NULL;
    }
    /* what inspect reads as the signature, then the docstring */
    PyObject *text = PyUnicode_FromFormat("keystr(keys, *, simple=False, separator='')\n--\n\n%U", doc);
    Py_DECREF(doc);
    const char *utf8 = text == NULL ? NULL : PyUnicode_AsUTF8(text);
    if (utf8 == NULL) {
        Py_XDECREF(text);
        Py_DECREF(name);
        return NULL;
    }
    if (keystr_def == NULL) { /* made once and kept: the function refers to it for good */
        keystr_def = PyMem_Calloc(1, sizeof(PyMethodDef));
        char *kept = keystr_def == NULL ? NULL : PyMem_Malloc(strlen(utf8) + 1);
        if (kept == NULL) {
            Py_DECREF(text);
            Py_DECREF(name);
            return PyErr_NoMemory();
        }
        strcpy(kept, utf8);
        keystr_def->ml_name = "keystr";
        keystr_def->ml_meth = (PyCFunction)(void (*)(void))keystr_call;
        keystr_def->ml_flags = METH_FASTCALL | METH_KEYWORDS;
        keystr_def->ml_doc = kept;
    }
    Py_DECREF(text);
    PyObject *fn = PyCFunction_NewEx(keystr_def, args[1], name);
    Py_DECREF(name);
    if (fn != NULL) {
        Py_INCREF(args[0]);
        Py_XSETREF_COMPAT(pure_keystr, args[0]);
    }
    return fn;
}

/* -- key entries' __init__ ------------------------------------------------------------------------ */
/* The four built-in entry classes are frozen slotted dataclasses; their generated __init__
 * (object.__setattr__ on a Python frame) made constructing an entry cost about 3,000
 * instructions, where a user's flatten_with_keys function makes one per child. entry_init
 * gives each class an __init__ (a method descriptor) that stores the value in its slot, as
 * the dataclass's __init__ does, and calls that __init__ for any other call. */
typedef struct {
    PyObject *cls;   /* owned or NULL */
    PyObject *field; /* owned: the field's name */
    PyObject *init;  /* owned: the dataclass's own __init__ */
    PyObject *s_init; /* owned: "__init__" */
    Py_ssize_t offset;
} EntryInit;
static EntryInit entry_inits[4];

/* The value of a call's one argument for e's field (positional, or by the field's name):
 * borrowed, or NULL (no exception) for any other call. */
static PyObject *field_value(EntryInit *e, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs == 1 && nkw == 0) return args[0];
    if (nargs == 0 && nkw == 1) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, 0);
        int same = kw == e->field || PyUnicode_Compare(kw, e->field) == 0;
        PyErr_Clear();
        if (same) return args[0];
    }
    return NULL;
}

static PyObject *init_entry(int k, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    EntryInit *e = &entry_inits[k];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *value = (PyObject *)Py_TYPE(self) == e->cls ? field_value(e, args, nargs, kwnames) : NULL;
    if (value == NULL) { /* the dataclass's __init__(self, *args, **kwargs) says what is wrong */
        PyObject *few[8], **all = nargs + nkw < 8 ? few : PyMem_Malloc(sizeof(PyObject *) * (size_t)(nargs + nkw + 1));
        if (all == NULL) return PyErr_NoMemory();
        all[0] = self;
        for (Py_ssize_t i = 0; i < nargs + nkw; i++) all[i + 1] = args[i];
        PyObject *r = PyObject_Vectorcall(e->init, all, (size_t)(nargs + 1), kwnames);
        if (all != few) PyMem_Free(all);
        return r;
    }
    PyObject **slot = (PyObject **)((char *)self + e->offset), *old = *slot;
    Py_INCREF(value);
    *slot = value;
    tk_track_entry(self, value);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyMethodDef INIT_DEFS[4];

/* Calling the class (its type's vectorcall): `cls(value)` made as type.__call__ makes it
 * (object.__new__, then the __init__ above), without the generic call's argument tuple and
 * slot lookups (the entry costs about 0.4x). Any other call, or once the class's __new__ or
 * __init__ is not those, goes through type.__call__. */
static PyObject *new_entry(int k, PyObject *cls, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    EntryInit *e = &entry_inits[k];
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyTypeObject *tp = (PyTypeObject *)cls;
    PyObject *value = NULL;
    if (cls == e->cls && tp->tp_new == PyBaseObject_Type.tp_new && tp->tp_dict != NULL) {
        PyObject *init = PyDict_GetItemWithError(tp->tp_dict, e->s_init); /* borrowed */
        if (init != NULL && Py_TYPE(init) == &PyMethodDescr_Type && ((PyMethodDescrObject *)init)->d_method == &INIT_DEFS[k])
            value = field_value(e, args, nargs, kwnames);
        PyErr_Clear();
    }
    if (value == NULL) {
        PyObject *given = PyTuple_New(nargs), *named = NULL, *r = NULL;
        for (Py_ssize_t i = 0; given != NULL && i < nargs; i++) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(given, i, args[i]);
        }
        if (nkw) named = PyDict_New(); /* (after `given` is whole: a collection may run here) */
        int ok = given != NULL && (nkw == 0 || named != NULL);
        for (Py_ssize_t i = 0; ok && i < nkw; i++) ok = PyDict_SetItem(named, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) == 0;
        if (ok) r = PyType_Type.tp_call(cls, given, named);
        Py_XDECREF(given);
        Py_XDECREF(named);
        return r;
    }
    PyObject *self = tp->tp_alloc(tp, 0);
    if (self == NULL) return NULL;
    Py_INCREF(value);
    *(PyObject **)((char *)self + e->offset) = value;
    tk_track_entry(self, value);
    return self;
}

#define INIT_OF(k)                                                                                      \
    static PyObject *init_##k(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) { \
        return init_entry(k, self, args, nargs, kwnames);                                               \
    }                                                                                                   \
    static PyObject *new_##k(PyObject *cls, PyObject *const *args, size_t nargsf, PyObject *kwnames) {   \
        return new_entry(k, cls, args, nargsf, kwnames);                                                \
    }
INIT_OF(0)
INIT_OF(1)
INIT_OF(2)
INIT_OF(3)
static vectorcallfunc NEW_FUNCS[4] = {new_0, new_1, new_2, new_3};
static PyMethodDef INIT_DEFS[4] = {
    {"__init__", (PyCFunction)(void (*)(void))init_0, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, idx)\n--\n\nInitialize self with its field's value."},
    {"__init__", (PyCFunction)(void (*)(void))init_1, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, key)\n--\n\nInitialize self with its field's value."},
    {"__init__", (PyCFunction)(void (*)(void))init_2, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, name)\n--\n\nInitialize self with its field's value."},
    {"__init__", (PyCFunction)(void (*)(void))init_3, METH_FASTCALL | METH_KEYWORDS,
     "__init__($self, /, key)\n--\n\nInitialize self with its field's value."},
};

/* entry_init(k, cls) -> cls's __init__ for the k-th entry class (idx, key, name, key),
 * or None where cls's field is not a slot holding an object (it keeps its own __init__). */
static PyObject *entry_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *const fields[4] = {"idx", "key", "name", "key"};
    long k = nargs == 2 ? PyLong_AsLong(args[0]) : -1;
    if (k < 0 || k > 3 || !PyType_Check(args[1])) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "entry_init(k: 0..3, cls)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[1];
    PyObject *d = tp->tp_dict == NULL ? NULL : PyDict_GetItemString(tp->tp_dict, fields[k]); /* borrowed */
    PyObject *init = tp->tp_dict == NULL ? NULL : PyDict_GetItemString(tp->tp_dict, "__init__");
    if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type || ((PyDescrObject *)d)->d_type != tp ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX || ((PyMemberDescrObject *)d)->d_member->offset <= 0 ||
        init == NULL || !PyFunction_Check(init))
        Py_RETURN_NONE;
    EntryInit *e = &entry_inits[k]; /* (a class made again, as by a reload, takes the place of the old) */
    PyObject *field = PyUnicode_InternFromString(fields[k]);
    if (field == NULL) return NULL;
    Py_XSETREF_COMPAT(e->field, field);
    e->offset = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_INCREF(init);
    Py_XSETREF_COMPAT(e->init, init);
    if (e->s_init == NULL && (e->s_init = PyUnicode_InternFromString("__init__")) == NULL) return NULL;
    Py_INCREF(tp);
    Py_XSETREF_COMPAT(e->cls, (PyObject *)tp);
    tp->tp_vectorcall = NEW_FUNCS[k]; /* (never inherited: a subclass is made by type.__call__) */
    return PyDescr_NewMethod(tp, &INIT_DEFS[k]);
}

static PyMethodDef METHODS[] = {
    {"flatten", (PyCFunction)(void (*)(void))flatten, METH_FASTCALL | METH_KEYWORDS,
     "treekit._traverse.flatten, in C (hands what it does not finish to the pure core)."},
    {"leaves", (PyCFunction)(void (*)(void))leaves, METH_FASTCALL,
     "treekit._traverse.leaves, in C (hands what it does not finish to the pure core)."},
    {"build", (PyCFunction)(void (*)(void))build, METH_FASTCALL,
     "treekit._treedef._interpret, in C; returns DEFER to let Python build it."},
    {"up_to", (PyCFunction)(void (*)(void))up_to, METH_FASTCALL,
     "treekit._treedef.TreeDef._walk without keys, in C; returns DEFER to let Python walk it."},
    {"map", (PyCFunction)(void (*)(void))map, METH_FASTCALL,
     "treekit._ops.tree_map and tree_map_with_path, in C; returns DEFER to let Python map it."},
    {"flatten_pairs", (PyCFunction)(void (*)(void))flatten_pairs, METH_FASTCALL,
     "treekit._traverse.flatten_pairs, in C (hands what it does not finish to the pure core)."},
    {"keystr", (PyCFunction)(void (*)(void))keystr, METH_FASTCALL,
     "treekit._keys.keystr, in C; returns DEFER to let Python join it."},
    {"entry_init", (PyCFunction)(void (*)(void))entry_init, METH_FASTCALL,
     "entry_init(k, cls): the k-th key entry class's __init__, storing its field's slot (None: keep its own)."},
    {"keystr_function", (PyCFunction)(void (*)(void))keystr_function, METH_FASTCALL,
     "treekit.keystr, a built-in function of the module given; the pure keystr given takes the unusual calls."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "treekit._native",
                                    "treekit's native core: C walks, Python speaks.", -1, METHODS};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (S.deferred == NULL) S.deferred = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (S.deferred == NULL || PyModule_AddObjectRef(m, "DEFER", S.deferred) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
