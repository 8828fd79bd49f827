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
    Py_ssize_t n, i, leaf_start, node_start;
    Py_ssize_t tracked; /* with paths: how many entries of the key path to this node the collector tracks */
} Frame;

static void frame_clear(Frame *f) {
    Py_CLEAR(f->node);
    Py_CLEAR(f->ntype);
    Py_CLEAR(f->data);
    Py_CLEAR(f->children);
    Py_CLEAR(f->keys);
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

/* The walk's stack: the frames of the current node's ancestors and, with paths, the key
 * path leading to each (path[k]: the key entry from frames[k - 1] to frames[k], owned, for
 * k >= 2; frames[1] is the root). The first FIRST_FRAMES live on the C stack; deeper walks
 * move to the heap, and the last heap arrays freed are kept for the next walk (taken, so a
 * walk started by user code inside a walk gets its own). */
#define FIRST_FRAMES 32
#define SPARE_LIMIT 4096 /* frames: a deeper walk's arrays are freed, not kept */
typedef struct {
    Frame *frames;
    PyObject **path;
    Py_ssize_t cap;
} Stack;
static Stack spare;

static int stack_grow(Stack *st, Frame *first_frames, PyObject **first_path) {
    Py_ssize_t cap = st->cap * 2;
    int on_c_stack = st->frames == first_frames;
    Frame *frames = on_c_stack ? PyMem_Malloc(sizeof(Frame) * (size_t)cap)
                               : PyMem_Realloc(st->frames, sizeof(Frame) * (size_t)cap);
    if (frames == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (on_c_stack) memcpy(frames, first_frames, sizeof(Frame) * (size_t)st->cap);
    st->frames = frames; /* the old arrays are the new ones' start from here on */
    PyObject **path = on_c_stack ? PyMem_Malloc(sizeof(PyObject *) * (size_t)cap)
                                 : PyMem_Realloc(st->path, sizeof(PyObject *) * (size_t)cap);
    if (path == NULL) {
        if (on_c_stack) { /* the C stack's arrays stay the walk's: its frames are still there */
            PyMem_Free(frames);
            st->frames = first_frames;
        }
        PyErr_NoMemory();
        return -1;
    }
    if (on_c_stack) memcpy(path, first_path, sizeof(PyObject *) * (size_t)st->cap);
    st->path = path;
    st->cap = cap;
    return 0;
}

static void stack_release(Stack *st, Frame *first_frames) {
    if (st->frames == first_frames) return;
    if (spare.frames == NULL && st->cap <= SPARE_LIMIT) {
        spare = *st;
        return;
    }
    PyMem_Free(st->frames);
    PyMem_Free(st->path);
}

/* out[0..] = path[2..depth - 1], each a new reference. */
static inline void copy_path(PyObject *out, PyObject **path, Py_ssize_t depth) {
    for (Py_ssize_t k = 2; k < depth; k++) {
        Py_INCREF(path[k]);
        PyTuple_SET_ITEM(out, k - 2, path[k]);
    }
}

/* Equal copies of the shared SequenceKey(i) (treekit._registry._SEQ_KEYS), i < SPREAD_INDEXES:
 * set r (1 <= r < SPREAD) serves key paths at positions r, r + SPREAD, ...; positions 0,
 * SPREAD, ... keep the shared entry. A deep path of lists repeats one entry ([1][1][1]...):
 * with one object, each reference a path's tuple takes (and drops, when it is freed) waits
 * for the one before it on the same count; with SPREAD objects they go side by side. Made at
 * first use and kept. */
#define SPREAD 8
#define SPREAD_INDEXES 64
static PyObject *spread[SPREAD - 1][SPREAD_INDEXES];

/* The entry to keep at `position` of a key path for `key`, the shared SequenceKey(index):
 * new reference (`key` itself where no copy serves, or none can be made). */
static PyObject *spread_key(PyObject *key, Py_ssize_t position, Py_ssize_t index) {
    Py_ssize_t r = position % SPREAD;
    if (r == 0 || index >= SPREAD_INDEXES || Py_TYPE(key) != (PyTypeObject *)S.SequenceKey) {
        Py_INCREF(key);
        return key;
    }
    PyObject **slot = &spread[r - 1][index];
    if (*slot == NULL) { /* SequenceKey(idx) without the dataclass's __init__, as node.c's DictKeys */
        PyTypeObject *tp = (PyTypeObject *)S.SequenceKey;
        PyObject *idx = PyObject_GetAttr(key, S.s_idx);
        PyObject *copy = idx == NULL ? NULL : tp->tp_alloc(tp, 0);
        if (copy != NULL && PyObject_GenericSetAttr(copy, S.s_idx, idx) < 0) Py_CLEAR(copy);
        if (copy != NULL) tk_track_entry(copy, idx);
        Py_XDECREF(idx);
        if (copy == NULL) {
            PyErr_Clear();
            Py_INCREF(key);
            return key;
        }
        if (*slot == NULL) {
            *slot = copy; /* kept */
        } else {
            Py_DECREF(copy); /* made meanwhile, by a walk in code run above */
        }
    }
    Py_INCREF(*slot);
    return *slot;
}

/* (path[2], ..., path[depth - 1], key): the key path of the top frame's child `key` leads
 * to (depth 1: the root's, ()), untracked if `tracked` (the top frame's) is 0 and `key` is
 * not tracked. New reference. */
static PyObject *path_to(PyObject **path, Py_ssize_t depth, PyObject *key, Py_ssize_t tracked) {
    if (depth == 1) {
        Py_INCREF(S.empty_tuple);
        return S.empty_tuple;
    }
    PyObject *out = PyTuple_New(depth - 1);
    if (out == NULL) return NULL;
    copy_path(out, path, depth);
    Py_INCREF(key);
    PyTuple_SET_ITEM(out, depth - 2, key);
    if (tracked == 0 && !PyObject_GC_IsTracked(key)) PyObject_GC_UnTrack(out);
    return out;
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
    uint64_t used; /* bit k: slot k holds a record (the slots are not cleared beforehand) */
    Made slot[RECORDS];
} Records;

/* The walk's records, in post-order (owned references), made into the TreeDef's tuple at
 * the end without a list in between. The last array freed is kept for the next walk (as the
 * stack's arrays). */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
} Buf;
static Buf spare_buf;
#define SPARE_BUF_LIMIT (1 << 16)

static int buf_push(Buf *b, PyObject *x) { /* takes a new reference to x */
    if (b->n == b->cap) {
        if (b->items == NULL && spare_buf.items != NULL) {
            *b = spare_buf;
            spare_buf.items = NULL;
            spare_buf.cap = 0;
            goto push;
        }
        Py_ssize_t cap = b->cap ? 2 * b->cap : 256;
        PyObject **more = PyMem_Realloc(b->items, sizeof(PyObject *) * (size_t)cap);
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->items = more;
        b->cap = cap;
    }
push:
    Py_INCREF(x);
    b->items[b->n++] = x;
    return 0;
}

static void buf_clear(Buf *b) {
    for (Py_ssize_t k = 0; k < b->n; k++) Py_DECREF(b->items[k]);
    if (b->items != NULL && spare_buf.items == NULL && b->cap <= SPARE_BUF_LIMIT) {
        spare_buf.items = b->items;
        spare_buf.cap = b->cap;
        spare_buf.n = 0;
    } else {
        PyMem_Free(b->items);
    }
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
    for (int k = 0; k < RECORDS; k++)
        if (r->used >> k & 1) Py_DECREF(r->slot[k].record);
    r->used = 0;
}

/* v as an int, for the records' counts: new reference. The counts below COUNTS are made
 * once and kept (a tree's records repeat them). */
#define COUNTS 1024
static PyObject *counts[COUNTS];
static PyObject *count_of(Py_ssize_t v) {
    if (v < 0 || v >= COUNTS) return PyLong_FromSsize_t(v);
    if (counts[v] == NULL && (counts[v] = PyLong_FromSsize_t(v)) == NULL) return NULL;
    Py_INCREF(counts[v]);
    return counts[v];
}

/* The records of lists, tuples and Nones (node data None), kept from walk to walk: they
 * hold nothing of the user's, and a tree's shape repeats from call to call (a deep list
 * has as many distinct records as levels). Direct-mapped, as `Records`. */
#define KEPT 512
static Made kept[KEPT];

static int add_record(Buf *nodes, Records *made, PyObject *ntype, PyObject *data, Py_ssize_t arity,
                      Py_ssize_t num_leaves, Py_ssize_t num_nodes) {
    uintptr_t h = ((uintptr_t)ntype >> 4) * 31u + ((uintptr_t)data >> 4) * 17u + (uintptr_t)arity * 7u +
                  (uintptr_t)num_leaves * 3u + (uintptr_t)num_nodes;
    unsigned at = 0;
    Made *m;
    int held, keep = data == Py_None && (ntype == S.LIST || ntype == S.TUPLE || ntype == S.NONE);
    if (keep) {
        m = &kept[(h ^ (h >> 9)) % KEPT];
        held = m->record != NULL;
    } else {
        at = (unsigned)((h ^ (h >> 7)) % RECORDS);
        m = &made->slot[at];
        held = (int)(made->used >> at & 1);
    }
    if (held && PyTuple_GET_ITEM(m->record, 0) == ntype && PyTuple_GET_ITEM(m->record, 1) == data &&
        m->arity == arity && m->num_leaves == num_leaves && m->num_nodes == num_nodes)
        return buf_push(nodes, m->record);
    PyObject *record = PyTuple_New(5);
    if (record == NULL) return -1;
    Py_INCREF(ntype);
    PyTuple_SET_ITEM(record, 0, ntype);
    Py_INCREF(data);
    PyTuple_SET_ITEM(record, 1, data);
    PyObject *a = count_of(arity), *l = a ? count_of(num_leaves) : NULL, *n = l ? count_of(num_nodes) : NULL;
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
    /* the slot as it is now: a walk in code run while the record was made may have filled it */
    PyObject *old = keep || made->used >> at & 1 ? m->record : NULL;
    if (!keep) made->used |= (uint64_t)1 << at;
    m->record = record; /* the reference made above */
    m->arity = arity;
    m->num_leaves = num_leaves;
    m->num_nodes = num_nodes;
    Py_XDECREF(old); /* the walk's own are in `nodes` too; a kept one holds no user object */
    return rc;
}

/* Drop the references a child being looked at holds (the walk's locals). */
#define DROP_CHILD()          \
    do {                      \
        Py_XDECREF(kids);     \
        Py_XDECREF(data);     \
        Py_XDECREF(keys);     \
        Py_XDECREF(owned);    \
        Py_XDECREF(key);      \
        Py_DECREF(child);     \
    } while (0)

/* frames[1..upto - 1] as the pure walker's frames (node, ntype, data, children, n, i), for
 * its functions that find a key path from them: a new list. */
static PyObject *frames_list(Frame *frames, Py_ssize_t upto) {
    PyObject *out = PyList_New(0);
    for (Py_ssize_t k = 1; out != NULL && k < upto; k++) {
        PyObject *frame = Py_BuildValue("(OOOOnn)", frames[k].node, frames[k].ntype, Py_None, Py_None,
                                        frames[k].n, frames[k].i);
        if (frame == NULL || PyList_Append(out, frame) < 0) Py_CLEAR(out);
        Py_XDECREF(frame);
    }
    return out;
}

/* The key path of the top frame's child `key` leads to, for an error: the walk's own with
 * paths, else found from the frames as the pure walker finds it. New reference. */
static PyObject *error_path(Frame *frames, Py_ssize_t depth, PyObject **path, PyObject *key, int with_path) {
    if (with_path) return path_to(path, depth, key, 1);
    PyObject *list = frames_list(frames, depth);
    PyObject *out = list == NULL ? NULL : tk_frame_path(list);
    Py_XDECREF(list);
    return out;
}

/* Set the error for frame f's list, shortened by user code: _traverse.changed_error's,
 * given frames 1..depth-2 (its ancestors) as the pure walker's frames. */
static void changed_error(PyObject *label, Frame *frames, Py_ssize_t depth, Frame *f) {
    PyObject *ancestors = frames_list(frames, depth - 1), *exc = NULL;
    if (ancestors != NULL)
        exc = PyObject_CallMethod(S.traverse, "changed_error", "OOOnn", label, ancestors, f->node, f->n,
                                  PySequence_Fast_GET_SIZE(f->children));
    Py_XDECREF(ancestors);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* The error for an is_leaf that answered `answer` (not True, False or None) at the top
 * frame's child: treekit._errors.not_a_bool's. */
static void not_a_bool(PyObject *label, Frame *frames, Py_ssize_t depth, PyObject **path, PyObject *key,
                       int with_path, PyObject *answer) {
    PyObject *at = error_path(frames, depth, path, key, with_path);
    PyObject *exc = at == NULL ? NULL : PyObject_CallMethod(S.errors, "not_a_bool", "OOO", label, at, answer);
    Py_XDECREF(at);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

int tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, int takes_path, PyObject *leaves, PyObject **records,
            PyObject *paths, PyObject *label) {
    if (label == NULL) label = S.s_tree;
    Buf buf = {NULL, 0, 0}, *nodes = records != NULL ? &buf : NULL;
    Ctx ctx;
    if (tk_ctx_open(&ctx, with_path) < 0) return -1;
    Py_ssize_t depth = 1;
    Frame first[FIRST_FRAMES]; /* the heap takes over past this depth (fields set as frames are pushed) */
    PyObject *first_path[FIRST_FRAMES];
    Stack st = {first, first_path, FIRST_FRAMES};
    if (spare.frames != NULL) { /* the last deep walk's arrays */
        st = spare;
        spare.frames = NULL;
    }
    Frame *frames = st.frames;
    PyObject **path = st.path;
    Records made_s, *made_records = &made_s; /* records shared within this walk */
    made_s.used = 0;
    int rc = -1;
    /* The root is the one child of a virtual node, so it goes through the same code. */
    memset(&frames[0], 0, sizeof(Frame));
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
            if (with_path) Py_DECREF(path[depth]);
            continue;
        }
        PyObject *child;
        if (PyList_CheckExact(f->children) && f->i >= PyList_GET_SIZE(f->children)) {
            /* a list user code shortened: the pure walker's error (_traverse.changed_error) */
            changed_error(label, frames, depth, f);
            goto done;
        }
        /* the key entry leading to the child (with paths): held, as user code may drop the keys' */
        PyObject *key = NULL;
        if (with_path) {
            if (PyList_CheckExact(f->keys) && f->i >= PyList_GET_SIZE(f->keys)) goto defer; /* shortened */
            key = PySequence_Fast_GET_ITEM(f->keys, f->i);
            Py_INCREF(key);
        }
        child = PySequence_Fast_GET_ITEM(f->children, f->i);
        f->i++;
        Py_INCREF(child);
        PyObject *owned = NULL, *ntype = NULL, *kids = NULL, *data = NULL, *keys = NULL;
        if (is_leaf != NULL) {
            PyObject *r;
            if (takes_path) {
                PyObject *at = path_to(path, depth, key, f->tracked);
                r = at == NULL ? NULL : PyObject_CallFunctionObjArgs(is_leaf, at, child, NULL);
                Py_XDECREF(at);
            } else {
                r = PyObject_CallOneArg(is_leaf, child);
            }
            /* -2: an answer other than True, False or None (jax's error); -1: it raised, and
             * its exception goes on as it is, as in the pure walker */
            int stop = r == NULL ? -1 : r == Py_True ? 1 : (r == Py_False || r == Py_None) ? 0 : -2;
            tk_forget(&ctx);
            if (stop == -2) not_a_bool(label, frames, depth, path, key, with_path, r);
            Py_XDECREF(r);
            if (stop < 0) {
                DROP_CHILD();
                goto done;
            }
            if (stop) ntype = Py_None;
        }
        if (ntype == NULL) {
            ntype = tk_memo_lookup(&ctx, child, &owned); /* (an error here is the registry's, or a hash's: as it is) */
            if (ntype == NULL) {
                DROP_CHILD();
                goto done;
            }
        }
        if (ntype == Py_None) {
            int bad = PyList_Append(leaves, child) < 0 || (nodes != NULL && buf_push(nodes, S.LEAF) < 0);
            made++;
            if (!bad && with_path) {
                PyObject *at = path_to(path, depth, key, f->tracked);
                bad = at == NULL || PyList_Append(paths, at) < 0;
                Py_XDECREF(at);
            }
            DROP_CHILD();
            if (bad) goto done;
            continue;
        }
        int how = tk_flatten_node(&ctx, child, ntype, with_path, &kids, &data, &keys);
        if (how == RAISED) { /* noted with the node's key path, as the pure walker notes it */
            PyObject *type, *exc, *tb;
            PyErr_Fetch(&type, &exc, &tb); /* (finding the path runs Python code) */
            PyObject *at = error_path(frames, depth, path, key, with_path);
            if (at != NULL) {
                PyErr_Restore(type, exc, tb);
                tk_raise_noted(label, at, (PyObject *)Py_TYPE(child));
                Py_DECREF(at);
            } else { /* that failed: its error goes on, the user's as its context */
                PyErr_NormalizeException(&type, &exc, &tb);
                PyObject *t2, *e2, *tb2;
                PyErr_Fetch(&t2, &e2, &tb2);
                PyErr_NormalizeException(&t2, &e2, &tb2);
                if (e2 != NULL && exc != NULL) PyException_SetContext(e2, exc); /* (steals) */
                else Py_XDECREF(exc);
                PyErr_Restore(t2, e2, tb2);
                Py_XDECREF(type);
                Py_XDECREF(tb);
            }
        }
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
            /* (a type's look-up may run a metaclass's __hash__, which may change a list: its
             * size is read at each step, and the node takes a frame if it changed) */
            for (; j < n && j < PySequence_Fast_GET_SIZE(kids); j++) {
                if (tk_memo_leaf_type(&ctx, Py_TYPE(PySequence_Fast_GET_ITEM(kids, j))) != 1) break;
            }
            if (j == n && PySequence_Fast_GET_SIZE(kids) == n) {
                Py_ssize_t at = PyList_GET_SIZE(leaves);
                int bad = PyList_SetSlice(leaves, at, at, kids) < 0;
                for (j = 0; !bad && nodes != NULL && j < n; j++) bad = buf_push(nodes, S.LEAF) < 0;
                bad = bad || (nodes != NULL && add_record(nodes, made_records, ntype, data, n, n, n + 1) < 0);
                made += n + 1;
                if (!bad && with_path) {
                    /* each leaf's path: the node's, then the leaf's key, made in one go */
                    Py_ssize_t size = depth == 1 ? 1 : depth; /* the root's path is () */
                    Py_ssize_t tracked = f->tracked + (depth > 1 && PyObject_GC_IsTracked(key));
                    /* a big dict at the root: its leaves' paths are kept with its entries */
                    PyObject *root = depth == 1 && ntype == S.DICT && PyTuple_CheckExact(keys) && n > LAST_KEYS
                                         ? tk_root_paths(data, keys)
                                         : NULL;
                    if (root != NULL) {
                        Py_ssize_t at = PyList_GET_SIZE(paths);
                        bad = PyList_SetSlice(paths, at, at, root) < 0;
                        Py_DECREF(root);
                    }
                    for (j = root != NULL ? n : 0; !bad && j < n; j++) {
                        if (j >= PySequence_Fast_GET_SIZE(keys)) { /* the keys' list, changed meanwhile */
                            bad = 1;
                            PyErr_SetString(PyExc_RuntimeError, "treekit: a node's key entries changed while it was walked");
                            break;
                        }
                        PyObject *out = PyTuple_New(size);
                        if (out == NULL) {
                            bad = 1;
                            break;
                        }
                        copy_path(out, path, depth);
                        if (depth > 1) {
                            Py_INCREF(key);
                            PyTuple_SET_ITEM(out, depth - 2, key);
                        }
                        PyObject *leaf_key = PySequence_Fast_GET_ITEM(keys, j);
                        Py_INCREF(leaf_key);
                        PyTuple_SET_ITEM(out, size - 1, leaf_key);
                        if (tracked == 0 && !PyObject_GC_IsTracked(leaf_key)) PyObject_GC_UnTrack(out);
                        bad = PyList_Append(paths, out) < 0;
                        Py_DECREF(out);
                    }
                }
                DROP_CHILD();
                if (bad) goto done;
                continue;
            }
        }
        n = PySequence_Fast_GET_SIZE(kids); /* as it is now */
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
        if (depth == st.cap) {
            if (stack_grow(&st, first, first_path) < 0) {
                DROP_CHILD();
                goto done;
            }
            frames = st.frames;
            path = st.path;
            f = &frames[depth - 1]; /* moved */
        }
        Frame *g = &frames[depth];
        g->node = child; /* the references taken above */
        g->ntype = owned != NULL ? owned : ntype;
        if (owned == NULL) Py_INCREF(ntype);
        g->data = data;
        g->children = kids;
        g->keys = keys;
        g->n = n;
        g->i = 0;
        g->leaf_start = PyList_GET_SIZE(leaves);
        g->node_start = made;
        if (with_path) {
            if (f->keys == ctx.seq_keys && depth >= 2) { /* key is SequenceKey(f->i - 1) */
                PyObject *copy = spread_key(key, depth - 2, f->i - 1);
                Py_DECREF(key);
                key = copy;
            }
            path[depth] = key; /* the reference taken above */
            g->tracked = depth == 1 ? 0 : f->tracked + PyObject_GC_IsTracked(key);
        }
        depth++;
    }
    rc = 0;
    if (records != NULL && (*records = buf_tuple(&buf)) == NULL) rc = -1;
    goto done;
defer:
    rc = DEFER;
done:
    for (Py_ssize_t k = 0; k < depth; k++) {
        frame_clear(&frames[k]);
        if (with_path && k > 0) Py_DECREF(path[k]);
    }
    stack_release(&st, first);
    records_clear(made_records);
    buf_clear(&buf);
    tk_ctx_close(&ctx);
    return rc;
}
