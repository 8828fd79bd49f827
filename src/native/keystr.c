/* keystr.c mirrors treekit.core._keys.keystr: a key path's text, the str of each entry joined.
 * The texts of the four built-in entries are made here (for plain ASCII values, written
 * straight into the result); any other entry's through its str(). It also makes
 * treekit.keystr itself a built-in function (tk_keystr_function): its usual calls run here
 * without a Python frame, and keystr as written in Python takes every other call. */
#include "keystr.h"

/* -- one entry's text --------------------------------------------------------------------------- */
/* The class of a built-in entry (state.h: TK_SEQUENCE_KEY, ...), or -1 for any other. */
static int entry_class(PyObject *entry) {
    PyObject *cls = (PyObject *)Py_TYPE(entry);
    return cls == tk_state.SequenceKey ? TK_SEQUENCE_KEY : cls == tk_state.DictKey ? TK_DICT_KEY
         : cls == tk_state.GetAttrKey  ? TK_GETATTR_KEY  : cls == tk_state.FlattenedIndexKey ? TK_FLAT_KEY : -1;
}

/* One entry's text, as its __str__ (simple=0) or treekit.core._keys.simple_text (simple=1) gives it.
 * Return value: New reference. The four built-in entries are read here; any other through str(). */
static PyObject *entry_text(PyObject *entry, int simple) {
    int k = entry_class(entry);
    if (k < 0) return PyObject_Str(entry);
    PyObject *names[TK_KEY_CLASSES] = {tk_state.s_idx, tk_state.s_key, tk_state.s_name, tk_state.s_flat_key};
    PyObject *value = PyObject_GetAttr(entry, names[k]), *text, *out;
    if (value == NULL) return NULL;
    if (simple) {
        if (k == TK_GETATTR_KEY) return value; /* the name as it is */
        out = PyObject_Str(value);
        Py_DECREF(value);
        return out;
    }
    out = tk_text_find(k, value);
    if (out != NULL) {
        Py_DECREF(value);
        return out;
    }
    /* f"[{idx}]", f"[{key!r}]", f".{name}", f"[<flat index {key}>]" */
    text = k == TK_DICT_KEY ? PyObject_Repr(value) : PyObject_Format(value, tk_state.empty_str);
    if (text == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    if (k == TK_SEQUENCE_KEY || k == TK_DICT_KEY) {
        out = PyUnicode_FromFormat("[%U]", text);
    } else if (k == TK_GETATTR_KEY) {
        out = PyUnicode_FromFormat(".%U", text);
    } else {
        out = PyUnicode_FromFormat("[<flat index %U>]", text);
    }
    Py_DECREF(text);
    if (out != NULL) tk_text_remember(k, value, out);
    Py_DECREF(value);
    return out;
}

/* -- keystr's common case: written straight into the result ------------------------------------ */
/* ASCII characters a str's repr shows as they are (PRINTED), and those besides a quote and a
 * backslash (BARE): such a str's repr is itself in single quotes. */
#define PRINTED 1
#define BARE 2
static inline unsigned char ascii_kind(unsigned char c) {
    if (c < 0x20 || c >= 0x7f) return 0;
    return c == '\'' || c == '\\' ? PRINTED : PRINTED | BARE;
}

/* The object in entry's field when entry is exactly of the k-th class and the field is read
 * through its member descriptor; NULL (no exception) otherwise, or if unset. Return value:
 * Borrowed reference (the entry holds it: a frozen entry's slot changes only by Python code,
 * and none runs while the text is made). */
static inline PyObject *field_value(PyObject *entry, int k) {
    const tk_field *field = &tk_state.fields[k];
    if (field->descr == NULL || (PyObject *)Py_TYPE(entry) != field->cls) return NULL;
    PyObject *value = tk_field_get(field, entry);
    if (value == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(value);
    return value;
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
        if (!(ascii_kind(c[i]) & kind)) return 0;
    }
    return 1;
}

/* The texts of the built-in entries as __str__ (or simple_text) gives them, for the values whose
 * text is plain ASCII: 0, or -1 (no exception) if this entry is not of that kind. */
static int piece_of(PyObject *entry, int simple, Piece *p) {
    p->pre = p->post = "";
    p->npre = p->npost = 0;
    PyObject *v;
    if ((v = field_value(entry, TK_SEQUENCE_KEY)) != NULL) { /* SequenceKey: f"[{idx}]" */
        if (!PyLong_CheckExact(v) || digits_of(v, p) < 0) return -1;
        if (!simple) p->pre = "[", p->npre = 1, p->post = "]", p->npost = 1;
        return 0;
    }
    if ((v = field_value(entry, TK_DICT_KEY)) != NULL) { /* DictKey: f"[{key!r}]" */
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
    if ((v = field_value(entry, TK_GETATTR_KEY)) != NULL) { /* GetAttrKey: f".{name}" */
        if (!PyUnicode_CheckExact(v) || !plain_ascii(v, PRINTED)) return -1;
        p->body = (const char *)PyUnicode_1BYTE_DATA(v);
        p->nbody = PyUnicode_GET_LENGTH(v);
        if (!simple) p->pre = ".", p->npre = 1;
        return 0;
    }
    if ((v = field_value(entry, TK_FLAT_KEY)) != NULL) { /* FlattenedIndexKey: f"[<flat index {key}>]" */
        if (!PyLong_CheckExact(v) || digits_of(v, p) < 0) return -1;
        if (!simple) p->pre = "[<flat index ", p->npre = 13, p->post = ">]", p->npost = 2;
        return 0;
    }
    return -1;
}

/* The joined text of a key path of built-in entries with plain values, made in one
 * allocation. Return value: New reference; NULL (no exception) if the path is not of that kind. */
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

PyObject *tk_keystr(PyObject *keys, int simple, PyObject *separator) {
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

/* -- treekit.keystr ------------------------------------------------------------------------------ */
/* One keyword argument's name is `name` (interned). */
static int named(PyObject *kw, PyObject *name) {
    if (kw == name) return 1;
    int same = PyUnicode_Compare(kw, name) == 0;
    PyErr_Clear();
    return same;
}

/* treekit.core._keys.keystr as written in Python: what treekit.keystr calls for any call that is
 * not keystr(keys, *, simple=<a bool>, separator=<a str>), with the very arguments (it
 * checks them and raises). Owned; set by tk_keystr_function. */
static PyObject *pure_keystr;

/* treekit.keystr itself (self: its module). Return value: New reference. */
static PyObject *keystr_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *keys = nargs == 1 ? args[0] : NULL, *simple = Py_False, *separator = NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 1 || tk_ready() < 0) goto pure;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + k];
        /* (a name given twice never gets here; keys given both ways is the pure function's error) */
        if (named(kw, tk_state.s_simple)) {
            simple = value;
        } else if (named(kw, tk_state.s_separator)) {
            separator = value;
        } else if (named(kw, tk_state.s_keys) && keys == NULL) {
            keys = value;
        } else {
            goto pure;
        }
    }
    if (separator == NULL) separator = tk_state.empty_str;
    if (keys == NULL || !PyBool_Check(simple) || !PyUnicode_CheckExact(separator)) goto pure;
    return tk_keystr(keys, simple == Py_True, separator);
pure:
    PyErr_Clear();
    return PyObject_Vectorcall(pure_keystr, args, (size_t)nargs, kwnames);
}

static PyMethodDef *keystr_def; /* made once and kept: the function refers to it for good */

PyObject *tk_keystr_function(PyObject *pure, PyObject *module) {
    if (tk_names() < 0) return NULL;
    PyObject *doc = PyObject_GetAttr(pure, tk_state.s_doc);
    PyObject *name = doc == NULL ? NULL : PyModule_GetNameObject(module);
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
    if (keystr_def == NULL) {
        PyMethodDef *def = PyMem_Calloc(1, sizeof(PyMethodDef));
        char *doc_copy = def == NULL ? NULL : PyMem_Malloc(strlen(utf8) + 1);
        if (doc_copy == NULL) {
            PyMem_Free(def);
            Py_DECREF(text);
            Py_DECREF(name);
            return PyErr_NoMemory();
        }
        strcpy(doc_copy, utf8);
        keystr_def = def;
        keystr_def->ml_name = "keystr";
        keystr_def->ml_meth = (PyCFunction)(void (*)(void))keystr_call;
        keystr_def->ml_flags = METH_FASTCALL | METH_KEYWORDS;
        keystr_def->ml_doc = doc_copy;
    }
    Py_DECREF(text);
    PyObject *fn = PyCFunction_NewEx(keystr_def, module, name);
    Py_DECREF(name);
    if (fn != NULL) {
        Py_INCREF(pure);
        Py_XSETREF_COMPAT(pure_keystr, pure);
    }
    return fn;
}

