/* walk.c mirrors treekit._traverse.flatten (the one building walker): a tree to its leaves,
 * its post-order node records and, with paths, each leaf's key path. Iterative: the
 * ancestors of the current node live in a growable array of frames, never on the C stack.
 * Lists, tuples, dicts, namedtuples and None are read here (node.c); every other node type
 * through its NodeType's flatten function, as the pure core does. Anything unusual returns
 * DEFER (see native.h). */
#include "native.h"

typedef struct {
    PyObject *node;     /* owned */
    PyObject *ntype;    /* owned */
    PyObject *data;     /* owned */
    PyObject *children; /* owned: a list or a tuple (see tk_plain_seq) */
    PyObject *keys;     /* owned or NULL: a list or a tuple of key entries (with paths) */
    PyObject *prefix;   /* owned or NULL: the node's key path, made when a second path is asked */
    Py_ssize_t n, i, leaf_start, node_start;
    int asked;          /* a child's key path was made */
} Frame;

static void frame_clear(Frame *f) {
    Py_CLEAR(f->node);
    Py_CLEAR(f->ntype);
    Py_CLEAR(f->data);
    Py_CLEAR(f->children);
    Py_CLEAR(f->keys);
    Py_CLEAR(f->prefix);
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(PyObject *const *)a, y = (uintptr_t)*(PyObject *const *)b;
    return x < y ? -1 : x > y;
}

/* Whether a node on the path (frames 1..depth-1, then child) is its own ancestor: the
 * pointers are sorted and neighbours compared. -1 on memory failure. */
static int has_cycle(Frame *frames, Py_ssize_t depth, PyObject *child) {
    PyObject **ids = PyMem_Malloc(sizeof(PyObject *) * (size_t)(depth + 1));
    if (ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 1; k < depth; k++) ids[m++] = frames[k].node;
    ids[m++] = child;
    qsort(ids, (size_t)m, sizeof(PyObject *), cmp_ptr);
    int found = 0;
    for (Py_ssize_t k = 1; k < m; k++) {
        if (ids[k] == ids[k - 1]) {
            found = 1;
            break;
        }
    }
    PyMem_Free(ids);
    return found;
}

/* The key path of the top frame's current child (child i - 1): new reference. The first
 * one asked of a frame is copied straight from the frames' keys; from the second on, the
 * frame's own key path (its prefix: the keys leading out of frames 1..depth-2) is kept and
 * extended, as the pure walker's `prefix` (a chain with one leaf per level copies once). */
static PyObject *child_path(Frame *frames, Py_ssize_t depth) {
    if (depth == 1) {
        Py_INCREF(S.empty_tuple);
        return S.empty_tuple;
    }
    Frame *f = &frames[depth - 1];
    if (f->prefix == NULL) {
        int first = !f->asked;
        f->asked = 1;
        PyObject *out = PyTuple_New(first ? depth - 1 : depth - 2);
        if (out == NULL) return NULL;
        for (Py_ssize_t k = 1; k < (first ? depth : depth - 1); k++) {
            PyObject *key = PySequence_Fast_GET_ITEM(frames[k].keys, frames[k].i - 1);
            Py_INCREF(key);
            PyTuple_SET_ITEM(out, k - 1, key);
        }
        if (first) return out;
        f->prefix = out;
    }
    return tk_extend(f->prefix, PySequence_Fast_GET_ITEM(f->keys, f->i - 1));
}

/* The records made in this walk, by (node type, node data, arity, num_leaves, num_nodes):
 * an equal record is shared (records are immutable tuples; the layers of a parameter tree,
 * the items of a dataset give equal ones, node data included). Direct-mapped, so a miss
 * costs one comparison. */
#define RECORDS 64
typedef struct {
    PyObject *record; /* owned */
    Py_ssize_t arity, num_leaves, num_nodes;
} Made;
typedef struct {
    Made slot[RECORDS];
} Records;

/* The walk's records, in post-order (owned references), made into the TreeDef's tuple at
 * the end without a list in between. */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
} Buf;

static int buf_push(Buf *b, PyObject *x) { /* takes a new reference to x */
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 64;
        PyObject **more = PyMem_Realloc(b->items, sizeof(PyObject *) * (size_t)cap);
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->items = more;
        b->cap = cap;
    }
    Py_INCREF(x);
    b->items[b->n++] = x;
    return 0;
}

static void buf_clear(Buf *b) {
    for (Py_ssize_t k = 0; k < b->n; k++) Py_DECREF(b->items[k]);
    PyMem_Free(b->items);
    b->items = NULL;
    b->n = b->cap = 0;
}

/* The records as a tuple (new reference); the buffer is emptied. */
static PyObject *buf_tuple(Buf *b) {
    PyObject *out = PyTuple_New(b->n);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < b->n; k++) PyTuple_SET_ITEM(out, k, b->items[k]); /* the buffer's references */
    b->n = 0;
    buf_clear(b);
    return out;
}

static void records_clear(Records *r) {
    for (int k = 0; k < RECORDS; k++) Py_CLEAR(r->slot[k].record);
}

static int add_record(Buf *nodes, Records *made, PyObject *ntype, PyObject *data, Py_ssize_t arity,
                      Py_ssize_t num_leaves, Py_ssize_t num_nodes) {
    uintptr_t h = ((uintptr_t)ntype >> 4) * 31u + ((uintptr_t)data >> 4) * 17u + (uintptr_t)arity * 7u +
                  (uintptr_t)num_leaves * 3u + (uintptr_t)num_nodes;
    Made *m = &made->slot[(h ^ (h >> 7)) % RECORDS];
    if (m->record != NULL && PyTuple_GET_ITEM(m->record, 0) == ntype && PyTuple_GET_ITEM(m->record, 1) == data &&
        m->arity == arity && m->num_leaves == num_leaves && m->num_nodes == num_nodes)
        return buf_push(nodes, m->record);
    PyObject *record = PyTuple_New(5);
    if (record == NULL) return -1;
    Py_INCREF(ntype);
    PyTuple_SET_ITEM(record, 0, ntype);
    Py_INCREF(data);
    PyTuple_SET_ITEM(record, 1, data);
    PyObject *a = tk_int(arity), *l = a ? tk_int(num_leaves) : NULL, *n = l ? tk_int(num_nodes) : NULL;
    if (n == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(l);
        Py_DECREF(record);
        return -1;
    }
    PyTuple_SET_ITEM(record, 2, a);
    PyTuple_SET_ITEM(record, 3, l);
    PyTuple_SET_ITEM(record, 4, n);
    int rc = buf_push(nodes, record);
    Py_XDECREF(m->record);
    m->record = record; /* the reference made above */
    m->arity = arity;
    m->num_leaves = num_leaves;
    m->num_nodes = num_nodes;
    return rc;
}

#define FIRST_FRAMES 32

/* Drop the references a child being looked at holds (the walk's locals). */
#define DROP_CHILD()          \
    do {                      \
        Py_XDECREF(kids);     \
        Py_XDECREF(data);     \
        Py_XDECREF(keys);     \
        Py_XDECREF(owned);    \
        Py_DECREF(child);     \
    } while (0)

/* Set the error for frame f's list, shortened by user code: _traverse.changed_error's,
 * given frames 1..depth-2 (its ancestors) as the pure walker's frames. */
static void changed_error(Frame *frames, Py_ssize_t depth, Frame *f) {
    PyObject *ancestors = PyList_New(0), *exc = NULL;
    for (Py_ssize_t k = 1; ancestors != NULL && k < depth - 1; k++) {
        PyObject *frame = Py_BuildValue("(OOOOnn)", frames[k].node, frames[k].ntype, Py_None, Py_None,
                                        frames[k].n, frames[k].i);
        if (frame == NULL || PyList_Append(ancestors, frame) < 0) Py_CLEAR(ancestors);
        Py_XDECREF(frame);
    }
    if (ancestors != NULL)
        exc = PyObject_CallMethod(S.traverse, "changed_error", "sOOnn", "tree", ancestors, f->node, f->n,
                                  PySequence_Fast_GET_SIZE(f->children));
    Py_XDECREF(ancestors);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

int tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, int takes_path, PyObject *leaves, PyObject **records,
            PyObject *paths) {
    Buf buf = {NULL, 0, 0}, *nodes = records != NULL ? &buf : NULL;
    Ctx ctx;
    if (tk_ctx_open(&ctx, with_path) < 0) return -1;
    Py_ssize_t cap = FIRST_FRAMES, depth = 1;
    Frame first[FIRST_FRAMES]; /* the heap takes over past this depth */
    memset(first, 0, sizeof(first));
    Frame *frames = first;
    Records made_s, *made_records = &made_s; /* records shared within this walk */
    memset(&made_s, 0, sizeof(made_s));
    int rc = -1;
    /* The root is the one child of a virtual node, so it goes through the same code. */
    frames[0].children = PyTuple_Pack(1, tree);
    if (frames[0].children == NULL) goto done;
    frames[0].n = 1;
    if (with_path) {
        frames[0].keys = PyTuple_Pack(1, Py_None);
        if (frames[0].keys == NULL) goto done;
    }
    /* As the pure walker: look for a cycle when the work (children of stacked nodes plus
     * nodes done) has doubled since the last scan, and hand a tree deeper than
     * treekit._traverse.MAX_DEPTH to Python, which raises (see _traverse._look). */
    Py_ssize_t max_depth = tk_max_depth();
    if (max_depth < 0) goto defer;
    Py_ssize_t made = 0; /* records made (counted only, without `nodes`) */
    Py_ssize_t work = 0, scan_at = 1000, look_at = max_depth < 1000 ? max_depth : 1000;
    for (;;) {
        Frame *f = &frames[depth - 1];
        if (f->i >= f->n) {
            if (depth == 1) break;
            if (nodes != NULL && add_record(nodes, made_records, f->ntype, f->data, f->n,
                                            PyList_GET_SIZE(leaves) - f->leaf_start, made - f->node_start + 1) < 0)
                goto done;
            made++;
            frame_clear(f);
            depth--;
            continue;
        }
        PyObject *child;
        if (PyList_CheckExact(f->children) && f->i >= PyList_GET_SIZE(f->children)) {
            /* a list user code shortened: the pure walker's error (_traverse.changed_error) */
            changed_error(frames, depth, f);
            goto done;
        }
        child = PySequence_Fast_GET_ITEM(f->children, f->i);
        f->i++;
        Py_INCREF(child);
        PyObject *owned = NULL, *ntype = NULL, *kids = NULL, *data = NULL, *keys = NULL;
        if (is_leaf != NULL) {
            PyObject *r;
            if (takes_path) {
                PyObject *path = child_path(frames, depth);
                r = path == NULL ? NULL : PyObject_CallFunctionObjArgs(is_leaf, path, child, NULL);
                Py_XDECREF(path);
            } else {
                r = PyObject_CallOneArg(is_leaf, child);
            }
            /* -2: an answer other than True, False or None; the pure walker raises jax's error */
            int stop = r == NULL ? -1 : r == Py_True ? 1 : (r == Py_False || r == Py_None) ? 0 : -2;
            Py_XDECREF(r);
            tk_forget(&ctx);
            if (stop < 0) {
                Py_DECREF(child);
                if (stop == -2 || tk_defer_error()) goto defer;
                goto done;
            }
            if (stop) ntype = Py_None;
        }
        if (ntype == NULL) {
            ntype = tk_ctx_lookup(&ctx, child, &owned);
            if (ntype == NULL) {
                Py_DECREF(child);
                if (tk_defer_error()) goto defer;
                goto done;
            }
        }
        if (ntype == Py_None) {
            Py_XDECREF(owned);
            int bad = PyList_Append(leaves, child) < 0 || (nodes != NULL && buf_push(nodes, S.LEAF) < 0);
            made++;
            if (!bad && with_path) {
                PyObject *path = child_path(frames, depth);
                bad = path == NULL || PyList_Append(paths, path) < 0;
                Py_XDECREF(path);
            }
            Py_DECREF(child);
            if (bad) goto done;
            continue;
        }
        int how = tk_flatten_node(&ctx, child, ntype, with_path, &kids, &data, &keys);
        if (how != 0) {
            DROP_CHILD();
            if (how == DEFER) goto defer;
            goto done;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
        if (n == 0) {
            int bad = nodes != NULL && add_record(nodes, made_records, ntype, data, 0, 0, 1) < 0;
            made++;
            DROP_CHILD();
            if (bad) goto done;
            continue;
        }
        if (is_leaf == NULL) {
            /* A node whose children are all leaves (most nodes of a parameter tree) is done
             * here, without a frame: its leaves are copied in one go. */
            Py_ssize_t j = 0;
            for (; j < n; j++) {
                if (tk_ctx_leaf_type(&ctx, Py_TYPE(PySequence_Fast_GET_ITEM(kids, j))) != 1) break;
            }
            if (j == n) {
                Py_ssize_t at = PyList_GET_SIZE(leaves);
                int bad = PyList_SetSlice(leaves, at, at, kids) < 0;
                for (j = 0; !bad && nodes != NULL && j < n; j++) bad = buf_push(nodes, S.LEAF) < 0;
                bad = bad || (nodes != NULL && add_record(nodes, made_records, ntype, data, n, n, n + 1) < 0);
                made += n + 1;
                if (!bad && with_path) {
                    PyObject *here = child_path(frames, depth);
                    bad = here == NULL;
                    for (j = 0; !bad && j < n; j++) {
                        PyObject *path = tk_extend(here, PySequence_Fast_GET_ITEM(keys, j));
                        bad = path == NULL || PyList_Append(paths, path) < 0;
                        Py_XDECREF(path);
                    }
                    Py_XDECREF(here);
                }
                DROP_CHILD();
                if (bad) goto done;
                continue;
            }
        }
        work += n;
        Py_ssize_t done_so_far = work + made;
        if (done_so_far >= look_at) {
            /* depth - 1: the pure walker's len(stack) (frames[0] is the virtual root) */
            int cycle = depth - 1 >= max_depth;
            if (!cycle && done_so_far >= scan_at) {
                scan_at = 2 * done_so_far + 1000;
                cycle = has_cycle(frames, depth, child);
            }
            look_at = done_so_far + max_depth - (depth - 1);
            if (look_at > scan_at) look_at = scan_at;
            if (cycle != 0) { /* a cycle, or too deep: Python walks again and raises */
                DROP_CHILD();
                if (cycle < 0) goto done;
                goto defer;
            }
        }
        if (depth == cap) {
            Frame *more = frames == first ? PyMem_Malloc(sizeof(Frame) * (size_t)(cap * 2))
                                          : PyMem_Realloc(frames, sizeof(Frame) * (size_t)(cap * 2));
            if (more == NULL) {
                PyErr_NoMemory();
                DROP_CHILD();
                goto done;
            }
            if (frames == first) memcpy(more, first, sizeof(first));
            memset(more + cap, 0, sizeof(Frame) * (size_t)cap);
            frames = more;
            cap *= 2;
        }
        Frame *g = &frames[depth++];
        g->node = child; /* the references taken above */
        g->ntype = owned != NULL ? owned : ntype;
        if (owned == NULL) Py_INCREF(ntype);
        g->data = data;
        g->children = kids;
        g->keys = keys;
        g->prefix = NULL;
        g->asked = 0;
        g->n = n;
        g->i = 0;
        g->leaf_start = PyList_GET_SIZE(leaves);
        g->node_start = made;
    }
    rc = 0;
    if (records != NULL && (*records = buf_tuple(&buf)) == NULL) rc = -1;
    goto done;
defer:
    rc = DEFER;
done:
    for (Py_ssize_t k = 0; k < depth; k++) frame_clear(&frames[k]);
    if (frames != first) PyMem_Free(frames);
    records_clear(made_records);
    buf_clear(&buf);
    tk_ctx_close(&ctx);
    return rc;
}
