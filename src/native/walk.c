/* walk.c mirrors treekit.core._traverse.flatten (the one building walker): a tree to its leaves,
 * its post-order node records and, with paths, each leaf's key path. Iterative: the
 * ancestors of the current node live in a growable array of frames, never on the C stack.
 * Lists, tuples, dicts, namedtuples and None are read by node.c; every other node type
 * through its NodeType's flatten function, as the pure core does. Anything unusual returns
 * TK_DEFER (see state.h). */
#include "walk.h"

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

/* The walk: its call, its context, its stack. The stack holds the frames of the current
 * node's ancestors and, with paths, the key path leading to each (path[k]: the key entry
 * from frames[k - 1] to frames[k], owned, for k >= 2; frames[1] is the root, frames[0] a
 * virtual node whose one child is the root). The first FIRST_FRAMES live in the struct (on
 * the C stack); deeper walks move to the heap, and the arrays are kept for the next walk
 * (cache.h). */
#define FIRST_FRAMES 32
typedef struct {
    PyObject *is_leaf, *leaves, *paths, *label; /* borrowed: the call's */
    int with_path, takes_path;
    Ctx ctx;
    Buf buf, *nodes;      /* nodes: &buf, or NULL where no records are made */
    Records made_records; /* records shared within this walk */
    Frame *frames;
    PyObject **path;
    Py_ssize_t cap, depth;
    /* As the pure walker: look for a cycle when the work (children of stacked nodes plus
     * nodes done) has doubled since the last scan, and hand a tree deeper than
     * treekit.core._traverse.MAX_DEPTH to Python, which raises (see _traverse._look). */
    Py_ssize_t made, leaves_made; /* records made (counted only, without `nodes`); leaves met */
    Py_ssize_t work, scan_at, look_at, max_depth;
    Frame first[FIRST_FRAMES]; /* (fields set as frames are pushed) */
    PyObject *first_path[FIRST_FRAMES];
} Walk;

/* The child being looked at (the walk's locals): references owned, NULL where not set. */
typedef struct {
    PyObject *child, *key, *owned, *kids, *data, *keys;
    PyObject *ntype; /* borrowed (owned holds it, or the module) */
} Child;

static void child_drop(Child *ch) {
    Py_XDECREF(ch->kids);
    Py_XDECREF(ch->data);
    Py_XDECREF(ch->keys);
    Py_XDECREF(ch->owned);
    Py_XDECREF(ch->key);
    Py_XDECREF(ch->child);
}

/* -- the stack ----------------------------------------------------------------------------------- */
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

static int stack_grow(Walk *w) {
    Py_ssize_t cap = w->cap * 2;
    int first = w->frames == w->first;
    Frame *frames = first ? PyMem_Malloc(sizeof(Frame) * (size_t)cap) : PyMem_Realloc(w->frames, sizeof(Frame) * (size_t)cap);
    if (frames == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (first) memcpy(frames, w->first, sizeof(Frame) * (size_t)w->cap);
    w->frames = frames; /* the old arrays are the new ones' start from here on */
    PyObject **path = first ? PyMem_Malloc(sizeof(PyObject *) * (size_t)cap)
                            : PyMem_Realloc(w->path, sizeof(PyObject *) * (size_t)cap);
    if (path == NULL) {
        if (first) { /* the first arrays stay the walk's: its frames are still there */
            PyMem_Free(frames);
            w->frames = w->first;
        }
        PyErr_NoMemory();
        return -1;
    }
    if (first) memcpy(path, w->first_path, sizeof(PyObject *) * (size_t)w->cap);
    w->path = path;
    w->cap = cap;
    return 0;
}

static void stack_release(Walk *w) {
    if (w->frames == w->first || tk_spare_stack_give(w->frames, w->path, w->cap)) return;
    PyMem_Free(w->frames);
    PyMem_Free(w->path);
}

/* -- key paths ----------------------------------------------------------------------------------- */
/* out[0..] = path[2..depth - 1], each a new reference. */
static inline void copy_path(PyObject *out, PyObject **path, Py_ssize_t depth) {
    for (Py_ssize_t k = 2; k < depth; k++) {
        Py_INCREF(path[k]);
        PyTuple_SET_ITEM(out, k - 2, path[k]);
    }
}

/* (path[2], ..., path[depth - 1], key): the key path of the top frame's child `key` leads
 * to (depth 1: the root's, ()), untracked if `tracked` (the top frame's) is 0 and `key` is
 * not tracked. Return value: New reference. */
static PyObject *path_to(PyObject **path, Py_ssize_t depth, PyObject *key, Py_ssize_t tracked) {
    if (depth == 1) {
        Py_INCREF(tk_state.empty_tuple);
        return tk_state.empty_tuple;
    }
    PyObject *out = PyTuple_New(depth - 1);
    if (out == NULL) return NULL;
    copy_path(out, path, depth);
    Py_INCREF(key);
    PyTuple_SET_ITEM(out, depth - 2, key);
    if (tracked == 0 && !PyObject_GC_IsTracked(key)) PyObject_GC_UnTrack(out);
    return out;
}

/* frames[1..upto - 1] as the pure walker's frames (node, ntype, data, children, n, i), for
 * its functions that find a key path from them. Return value: New reference, a list. */
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
 * paths, else found from the frames as the pure walker finds it. Return value: New reference. */
static PyObject *error_path(Walk *w, PyObject *key) {
    if (w->with_path) return path_to(w->path, w->depth, key, 1);
    PyObject *list = frames_list(w->frames, w->depth);
    PyObject *out = list == NULL ? NULL : tk_frame_path(list);
    Py_XDECREF(list);
    return out;
}

/* The user's exception (set), raised by the flatten function of ch's node: noted with the
 * node's key path, as the pure walker notes it. */
static void note_raised(Walk *w, Child *ch) {
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb); /* (finding the path runs Python code) */
    PyObject *at = error_path(w, ch->key);
    if (at != NULL) {
        PyErr_Restore(type, exc, tb);
        tk_raise_noted(w->label, at, (PyObject *)Py_TYPE(ch->child));
        Py_DECREF(at);
    } else { /* that failed: its error goes on, the user's as its context */
        tk_raise_in_context(type, exc, tb);
    }
}

/* -- one child ----------------------------------------------------------------------------------- */
/* The top frame's next child into ch (references taken: the key entry too, with paths, as
 * user code may drop the keys'). TK_OK, TK_DEFER (the keys' list shortened), TK_ERROR (the
 * children's list shortened by user code: the pure walker's error, _traverse.changed_error). */
static tk_status next_child(Walk *w, Frame *f, Child *ch) {
    if (PyList_CheckExact(f->children) && f->i >= PyList_GET_SIZE(f->children)) {
        PyObject *ancestors = frames_list(w->frames, w->depth - 1);
        if (ancestors != NULL)
            tk_changed_error(w->label, ancestors, f->node, f->n, PySequence_Fast_GET_SIZE(f->children));
        Py_XDECREF(ancestors);
        return TK_ERROR;
    }
    if (w->with_path) {
        if (PyList_CheckExact(f->keys) && f->i >= PyList_GET_SIZE(f->keys)) return TK_DEFER; /* shortened */
        ch->key = PySequence_Fast_GET_ITEM(f->keys, f->i);
        Py_INCREF(ch->key);
    }
    ch->child = PySequence_Fast_GET_ITEM(f->children, f->i);
    f->i++;
    Py_INCREF(ch->child);
    return TK_OK;
}

/* What ch's child is, into ch->ntype (Py_None: a leaf), is_leaf asked first: 0, or -1 with
 * an exception (is_leaf's own, as it is; the registry's; jax's error for an answer other
 * than True, False or None). */
static int classify(Walk *w, Frame *f, Child *ch) {
    if (w->is_leaf != NULL) {
        PyObject *r;
        if (w->takes_path) {
            PyObject *at = path_to(w->path, w->depth, ch->key, f->tracked);
            r = at == NULL ? NULL : PyObject_CallFunctionObjArgs(w->is_leaf, at, ch->child, NULL);
            Py_XDECREF(at);
        } else {
            r = PyObject_CallOneArg(w->is_leaf, ch->child);
        }
        int stop = r == NULL ? -1 : r == Py_True ? 1 : (r == Py_False || r == Py_None) ? 0 : -2;
        tk_forget(&w->ctx);
        if (stop == -2) {
            PyObject *at = error_path(w, ch->key);
            if (at != NULL) tk_not_a_bool(w->label, at, r);
            Py_XDECREF(at);
        }
        Py_XDECREF(r);
        if (stop < 0) return -1;
        if (stop) ch->ntype = Py_None;
    }
    if (ch->ntype == NULL) {
        ch->ntype = tk_memo_lookup(&w->ctx, ch->child, &ch->owned); /* (an error here is the registry's, or a hash's) */
        if (ch->ntype == NULL) return -1;
    }
    return 0;
}

/* ch's child, a leaf: appended, with its record and key path. 0, or -1 with an exception. */
static int add_leaf(Walk *w, Frame *f, Child *ch) {
    int bad = (w->leaves != NULL && PyList_Append(w->leaves, ch->child) < 0) ||
              (w->nodes != NULL && tk_buf_push(w->nodes, tk_state.LEAF) < 0);
    w->made++, w->leaves_made++;
    if (!bad && w->with_path) {
        PyObject *at = path_to(w->path, w->depth, ch->key, f->tracked);
        bad = at == NULL || PyList_Append(w->paths, at) < 0;
        Py_XDECREF(at);
    }
    return bad ? -1 : 0;
}

/* The key paths of ch's n children, all leaves: the node's path, then each leaf's key, made
 * in one go (a big dict at the root: its leaves' paths are kept with its entries). 0, or -1
 * with an exception. */
static int leaf_paths(Walk *w, Frame *f, Child *ch, Py_ssize_t n) {
    Py_ssize_t depth = w->depth, size = depth == 1 ? 1 : depth; /* the root's path is () */
    Py_ssize_t tracked = f->tracked + (depth > 1 && PyObject_GC_IsTracked(ch->key));
    PyObject *root = depth == 1 && ch->ntype == tk_state.DICT && PyTuple_CheckExact(ch->keys) && n > TK_SMALL_DICT
                         ? tk_root_paths(ch->data, ch->keys)
                         : NULL;
    if (root != NULL) {
        Py_ssize_t at = PyList_GET_SIZE(w->paths);
        int bad = PyList_SetSlice(w->paths, at, at, root) < 0;
        Py_DECREF(root);
        return bad ? -1 : 0;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (j >= PySequence_Fast_GET_SIZE(ch->keys)) { /* the keys' list, changed meanwhile */
            PyErr_SetString(PyExc_RuntimeError, "treekit: a node's key entries changed while it was walked");
            return -1;
        }
        PyObject *out = PyTuple_New(size);
        if (out == NULL) return -1;
        copy_path(out, w->path, depth);
        if (depth > 1) {
            Py_INCREF(ch->key);
            PyTuple_SET_ITEM(out, depth - 2, ch->key);
        }
        PyObject *leaf_key = PySequence_Fast_GET_ITEM(ch->keys, j);
        Py_INCREF(leaf_key);
        PyTuple_SET_ITEM(out, size - 1, leaf_key);
        if (tracked == 0 && !PyObject_GC_IsTracked(leaf_key)) PyObject_GC_UnTrack(out);
        int bad = PyList_Append(w->paths, out) < 0;
        Py_DECREF(out);
        if (bad) return -1;
    }
    return 0;
}

#define FEW_LEAVES 8

/* A node whose children are all leaves (most nodes of a parameter tree) is done here,
 * without a frame: its leaves are copied in one go. 1 (done), 0 (not all leaves: it takes a
 * frame), -1 with an exception. (A type's look-up may run a metaclass's __hash__, which may
 * change a list: its size is read at each step, and the node takes a frame if it changed.) */
static int take_leaves(Walk *w, Frame *f, Child *ch, Py_ssize_t n) {
    Py_ssize_t j = 0;
    for (; j < n && j < PySequence_Fast_GET_SIZE(ch->kids); j++) {
        if (tk_memo_leaf_type(&w->ctx, Py_TYPE(PySequence_Fast_GET_ITEM(ch->kids, j))) != 1) break;
    }
    if (j != n || PySequence_Fast_GET_SIZE(ch->kids) != n) return 0;
    Py_ssize_t at = w->leaves == NULL ? 0 : PyList_GET_SIZE(w->leaves);
    int bad = 0;
    if (w->leaves != NULL && n <= FEW_LEAVES) /* (appends cost less than a slice assignment's set-up for a few) */
        for (j = 0; !bad && j < n; j++) bad = PyList_Append(w->leaves, PySequence_Fast_GET_ITEM(ch->kids, j)) < 0;
    else if (w->leaves != NULL)
        bad = PyList_SetSlice(w->leaves, at, at, ch->kids) < 0;
    w->leaves_made += n;
    for (j = 0; !bad && w->nodes != NULL && j < n; j++) bad = tk_buf_push(w->nodes, tk_state.LEAF) < 0;
    bad = bad || (w->nodes != NULL && tk_add_record(w->nodes, &w->made_records, ch->ntype, ch->data, n, n, n + 1) < 0);
    w->made += n + 1;
    if (!bad && w->with_path) bad = leaf_paths(w, f, ch, n) < 0;
    return bad ? -1 : 1;
}

/* Before a node of n children takes a frame: a cycle, or too deep? TK_OK, TK_DEFER (Python
 * walks again and raises), TK_ERROR. */
static tk_status look(Walk *w, PyObject *child, Py_ssize_t n) {
    w->work += n;
    Py_ssize_t done_so_far = w->work + w->made;
    if (done_so_far < w->look_at) return TK_OK;
    /* depth - 1: the pure walker's len(stack) (frames[0] is the virtual root) */
    int cycle = w->depth - 1 >= w->max_depth;
    if (!cycle && done_so_far >= w->scan_at) {
        w->scan_at = 2 * done_so_far + 1000;
        cycle = has_cycle(w->frames, w->depth, child);
    }
    w->look_at = done_so_far + w->max_depth - (w->depth - 1);
    if (w->look_at > w->scan_at) w->look_at = w->scan_at;
    return cycle == 0 ? TK_OK : cycle < 0 ? TK_ERROR : TK_DEFER;
}

/* ch's node, of n children, takes a frame: ch's references go to it. 0, or -1 with an
 * exception (ch as it was). */
static int push_frame(Walk *w, Child *ch, Py_ssize_t n) {
    if (w->depth == w->cap && stack_grow(w) < 0) return -1;
    Frame *f = &w->frames[w->depth - 1], *g = &w->frames[w->depth];
    g->node = ch->child;
    g->ntype = ch->owned != NULL ? ch->owned : ch->ntype;
    if (ch->owned == NULL) Py_INCREF(ch->ntype);
    g->data = ch->data;
    g->children = ch->kids;
    g->keys = ch->keys;
    g->n = n;
    g->i = 0;
    g->leaf_start = w->leaves_made;
    g->node_start = w->made;
    if (w->with_path) {
        PyObject *key = ch->key;
        if (f->keys == w->ctx.seq_keys && w->depth >= 2) { /* key is SequenceKey(f->i - 1) */
            key = tk_spread_key(ch->key, w->depth - 2, f->i - 1);
            Py_DECREF(ch->key);
        }
        w->path[w->depth] = key;
        g->tracked = w->depth == 1 ? 0 : f->tracked + PyObject_GC_IsTracked(key);
    } else {
        Py_XDECREF(ch->key);
    }
    memset(ch, 0, sizeof(*ch)); /* the frame's now */
    w->depth++;
    return 0;
}

/* The top frame's next child, walked: as a leaf, as a node done here, or pushed. */
static tk_status visit(Walk *w, Frame *f) {
    Child ch = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    tk_status how = next_child(w, f, &ch);
    if (how != TK_OK) return how;
    if (classify(w, f, &ch) < 0) {
        how = TK_ERROR;
    } else if (ch.ntype == Py_None) {
        how = add_leaf(w, f, &ch) < 0 ? TK_ERROR : TK_OK;
    } else {
        how = tk_flatten_node(&w->ctx, ch.child, ch.ntype, w->with_path, &ch.kids, &ch.data, &ch.keys);
        if (how == TK_RAISED) {
            note_raised(w, &ch);
            how = TK_ERROR;
        }
    }
    if (how != TK_OK || ch.ntype == Py_None) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ch.kids);
    if (n == 0) {
        if (w->nodes != NULL && tk_add_record(w->nodes, &w->made_records, ch.ntype, ch.data, 0, 0, 1) < 0) how = TK_ERROR;
        w->made++;
        goto done;
    }
    int taken = w->is_leaf == NULL ? take_leaves(w, f, &ch, n) : 0;
    if (taken != 0) {
        how = taken < 0 ? TK_ERROR : TK_OK;
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(ch.kids); /* as it is now */
    how = look(w, ch.child, n);
    if (how == TK_OK && push_frame(w, &ch, n) < 0) how = TK_ERROR;
done:
    child_drop(&ch);
    return how;
}

/* Close the top frame (its node is done): its record, then the frame popped. 0, or -1 with
 * an exception. */
static int pop_frame(Walk *w) {
    Frame *f = &w->frames[w->depth - 1];
    if (w->nodes != NULL && tk_add_record(w->nodes, &w->made_records, f->ntype, f->data, f->n,
                                          w->leaves_made - f->leaf_start, w->made - f->node_start + 1) < 0)
        return -1;
    w->made++;
    frame_clear(f);
    w->depth--;
    if (w->with_path) Py_DECREF(w->path[w->depth]);
    return 0;
}

/* -- the walk ------------------------------------------------------------------------------------ */
/* treekit.core._traverse.MAX_DEPTH (-1 if it is not a size; a very large number where it is missing). */
static Py_ssize_t max_depth(void) {
    PyObject *limit = PyDict_GetItemWithError(PyModule_GetDict(tk_state.traverse), tk_state.s_MAX_DEPTH); /* borrowed */
    if (limit == NULL || !PyLong_CheckExact(limit)) {
        PyErr_Clear();
        return PY_SSIZE_T_MAX / 4; /* no depth limit in this version of the pure core */
    }
    Py_ssize_t out = PyLong_AsSsize_t(limit);
    if (out < 0) PyErr_Clear();
    return out;
}

/* Set the walk up, the root the one child of frames[0]: TK_OK, TK_DEFER, TK_ERROR. */
static tk_status walk_open(Walk *w, PyObject *tree) {
    if (tk_ctx_open(&w->ctx, w->with_path) < 0) return TK_ERROR;
    void *frames, *path;
    if (tk_spare_stack_take(&frames, &path, &w->cap)) { /* the last deep walk's arrays */
        w->frames = frames;
        w->path = path;
    }
    memset(&w->frames[0], 0, sizeof(Frame));
    w->depth = 1;
    w->frames[0].children = PyTuple_Pack(1, tree);
    if (w->frames[0].children == NULL) return TK_ERROR;
    w->frames[0].n = 1;
    if (w->with_path && (w->frames[0].keys = PyTuple_Pack(1, Py_None)) == NULL) return TK_ERROR;
    w->max_depth = max_depth();
    if (w->max_depth < 0) return TK_DEFER;
    w->scan_at = 1000;
    w->look_at = w->max_depth < 1000 ? w->max_depth : 1000;
    return TK_OK;
}

static void walk_close(Walk *w) {
    for (Py_ssize_t k = 0; k < w->depth; k++) {
        frame_clear(&w->frames[k]);
        if (w->with_path && k > 0) Py_DECREF(w->path[k]);
    }
    stack_release(w);
    tk_records_clear(&w->made_records);
    tk_buf_clear(&w->buf);
    tk_ctx_close(&w->ctx);
}

tk_status tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, int takes_path, PyObject *leaves,
                  PyObject **records, PyObject *paths, PyObject *label) {
    Walk w;
    w.is_leaf = is_leaf;
    w.leaves = leaves;
    w.paths = paths;
    w.label = label == NULL ? tk_state.s_tree : label; /* ('tree', the default label) */
    w.with_path = with_path;
    w.takes_path = takes_path;
    w.buf.items = NULL;
    w.buf.n = w.buf.cap = 0;
    w.nodes = records != NULL ? &w.buf : NULL;
    w.made_records.used = 0;
    w.frames = w.first;
    w.path = w.first_path;
    w.cap = FIRST_FRAMES;
    w.depth = 0;
    w.made = w.leaves_made = w.work = 0;
    tk_status how = walk_open(&w, tree);
    while (how == TK_OK) {
        Frame *f = &w.frames[w.depth - 1];
        if (f->i < f->n) {
            how = visit(&w, f);
        } else if (w.depth == 1) {
            break;
        } else if (pop_frame(&w) < 0) {
            how = TK_ERROR;
        }
    }
    if (how == TK_OK && records != NULL && (*records = tk_buf_tuple(&w.buf)) == NULL) how = TK_ERROR;
    walk_close(&w);
    return how;
}
