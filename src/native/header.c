/* header.c: treekit.checkpoint._header's reading of a safetensors header's tensor entries as
 * writers write them (its _ENTRY expression and _canonical; header.h). The text is read
 * character by character; whatever is not exactly such an entry stops the loop, and Python
 * reads it (and words what is wrong). */
#include "header.h"

#define MAX_NDIM 64    /* numpy's, as _header.MAX_NDIM */
#define MAX_DIGITS 18  /* below 2**63: longer numbers go to Python */

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t at, end;
} cursor;

static Py_UCS4 peek(const cursor *c) {
    return c->at < c->end ? PyUnicode_READ(c->kind, c->data, c->at) : 0;
}

static void space(cursor *c) {
    for (Py_UCS4 ch = peek(c); ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; ch = peek(c)) c->at++;
}

/* White space, then `ch`: 1 (passed), else 0. */
static int expect(cursor *c, Py_UCS4 ch) {
    space(c);
    if (c->at >= c->end || peek(c) != ch) return 0;
    c->at++;
    return 1;
}

/* White space, then the string `word` quoted (a key): 1, else 0. */
static int key(cursor *c, const char *word) {
    if (!expect(c, '"')) return 0;
    for (; *word; word++, c->at++)
        if (peek(c) != (Py_UCS4)(unsigned char)*word) return 0;
    if (peek(c) != '"') return 0;
    c->at++;
    return expect(c, ':');
}

/* White space, then a string without escapes or control characters: its first character's
 * index into *start and its length into *n; 1, else 0. */
static int string(cursor *c, Py_ssize_t *start, Py_ssize_t *n) {
    if (!expect(c, '"')) return 0;
    *start = c->at;
    for (Py_UCS4 ch = peek(c); c->at < c->end && ch != '"'; ch = peek(c)) {
        if (ch == '\\' || ch < 0x20) return 0;
        c->at++;
    }
    if (c->at >= c->end) return 0;
    *n = c->at - *start;
    c->at++;
    return 1;
}

/* White space, then a JSON integer of at most MAX_DIGITS digits (no sign, no leading zero):
 * 1 with its value in *out, else 0. */
static int integer(cursor *c, long long *out) {
    space(c);
    Py_ssize_t start = c->at;
    long long v = 0;
    for (Py_UCS4 ch = peek(c); ch >= '0' && ch <= '9'; ch = peek(c)) {
        if (c->at - start == MAX_DIGITS || (c->at > start && v == 0)) return 0; /* (too long; 0 then a digit) */
        v = v * 10 + (long long)(ch - '0');
        c->at++;
    }
    *out = v;
    return c->at > start;
}

/* What every entry is read against (tk_scan_entries' arguments). */
typedef struct {
    long long data_start, data_size;
    PyObject *sizes, *cls;
} scan;

/* One entry from c->at: (name, Tensor) (a new reference) into *pair, its offsets from the data's
 * start into offsets[0..1], its name's length into *name_length and its number of dimensions
 * into *ndim_out; 1 (taken), 0 (not taken: left to Python) or -1 (an exception). */
static int entry(cursor *c, PyObject *text, const scan *how, PyObject **pair, long long *offsets,
                 Py_ssize_t *name_length, int *ndim_out) {
    Py_ssize_t name_at, name_n, code_at, code_n;
    long long dims[MAX_NDIM], begin, end;
    int ndim = 0;
    if (!string(c, &name_at, &name_n) || !expect(c, ':') || !expect(c, '{') || !key(c, "dtype") ||
        !string(c, &code_at, &code_n) || !expect(c, ',') || !key(c, "shape") || !expect(c, '['))
        return 0;
    space(c);
    if (peek(c) != ']') {
        do {
            if (ndim == MAX_NDIM || !integer(c, &dims[ndim])) return 0;
            ndim++;
        } while (expect(c, ','));
    }
    if (!expect(c, ']') || !expect(c, ',') || !key(c, "data_offsets") || !expect(c, '[') || !integer(c, &begin) ||
        !expect(c, ',') || !integer(c, &end) || !expect(c, ']') || !expect(c, '}'))
        return 0;
    if (begin > end || end > how->data_size || code_n > 16) return 0;
    unsigned long long bytes = 1;
    for (int i = 0; i < ndim; i++)
        if (dims[i] == 0 || __builtin_mul_overflow(bytes, (unsigned long long)dims[i], &bytes)) return 0;
    PyObject *code = PyUnicode_Substring(text, code_at, code_at + code_n);
    if (code == NULL) return -1;
    PyObject *size = PyDict_GetItemWithError(how->sizes, code); /* (a str's hash and compare: no Python code) */
    long long item = size != NULL && PyLong_CheckExact(size) ? PyLong_AsLongLong(size) : 0;
    if (PyErr_Occurred() || item <= 0 || __builtin_mul_overflow(bytes, (unsigned long long)item, &bytes) ||
        bytes != (unsigned long long)(end - begin)) {
        Py_DECREF(code);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *name = PyUnicode_Substring(text, name_at, name_at + name_n);
    PyObject *shape = PyTuple_New(ndim);
    for (int i = 0; name != NULL && shape != NULL && i < ndim; i++) {
        PyObject *d = PyLong_FromLongLong(dims[i]);
        if (d == NULL) Py_CLEAR(shape);
        else PyTuple_SET_ITEM(shape, i, d); /* (steals d) */
    }
    PyObject *b = PyLong_FromLongLong(how->data_start + begin), *e = PyLong_FromLongLong(how->data_start + end);
    PyObject *fields = name && shape && b && e ? PyTuple_Pack(4, code, shape, b, e) : NULL;
    PyObject *args = fields ? PyTuple_Pack(1, fields) : NULL;
    /* tuple.__new__(cls, fields), as the namedtuple's own __new__ makes it */
    PyObject *made = args ? PyTuple_Type.tp_new((PyTypeObject *)how->cls, args, NULL) : NULL;
    *pair = made && name ? PyTuple_Pack(2, name, made) : NULL;
    Py_XDECREF(made);
    Py_XDECREF(args);
    Py_XDECREF(fields);
    Py_XDECREF(name);
    Py_XDECREF(shape);
    Py_XDECREF(b);
    Py_XDECREF(e);
    Py_DECREF(code);
    offsets[0] = begin;
    offsets[1] = end;
    *name_length = name_n;
    *ndim_out = ndim;
    return *pair != NULL ? 1 : -1;
}

TK_API int tk_scan_entries(PyObject *text, Py_ssize_t *pos, int *last, long long data_start, long long data_size,
                           PyObject *sizes, PyObject *cls, PyObject *tensors, Py_ssize_t *left, long long *at) {
    cursor c = {PyUnicode_KIND(text), PyUnicode_DATA(text), *pos, PyUnicode_GET_LENGTH(text)};
    scan how = {data_start, data_size, sizes, cls};
    *last = 0;
    for (;;) {
        PyObject *pair = NULL; /* (name, Tensor) */
        Py_ssize_t name_length = 0;
        long long offsets[2];
        int ndim = 0;
        c.at = *pos;
        int took = entry(&c, text, &how, &pair, offsets, &name_length, &ndim);
        if (took < 0) return -1;
        if (took == 0) return 0;
        /* the closing "," or "}" (Python's expression reads it as part of the entry) */
        int closed = expect(&c, '}');
        if (!closed && !expect(&c, ',')) {
            Py_DECREF(pair);
            return 0;
        }
        PyObject *name = PyTuple_GET_ITEM(pair, 0);
        Py_ssize_t cost = 256 + 4 * name_length + 8 * (Py_ssize_t)ndim;
        int known = PyUnicode_CompareWithASCIIString(name, "__metadata__") == 0 ? 1 : PyDict_Contains(tensors, name);
        if (known != 0 || cost > *left || PyDict_SetItem(tensors, name, PyTuple_GET_ITEM(pair, 1)) < 0) {
            Py_DECREF(pair);
            return known < 0 || PyErr_Occurred() ? -1 : 0; /* (taken twice, or too costly: Python says so) */
        }
        Py_DECREF(pair);
        *left -= cost;
        *at = *at == offsets[0] ? offsets[1] : -1;
        *pos = c.at;
        if (closed) {
            *last = 1;
            return 0;
        }
    }
}
