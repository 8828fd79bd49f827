/* treekit's native core: shared declarations.
 *
 * C walks, Python speaks: these functions read the registry that treekit._registry keeps
 * (its TYPES dict and NodeType entries) and fill the same post-order records as the
 * pure-Python core. They never word an error. A walk that meets anything unusual (a
 * structure mismatch, a suspected cycle, an exception from user code, a flatten function
 * returning something other than a list or tuple) returns DEFER, and the caller hands the
 * whole call to the Python function it mirrors, which raises the one message.
 *
 * References: functions returning PyObject * return a new reference (NULL on error);
 * "borrowed" is said where it is not so.
 */
#ifndef TREEKIT_NATIVE_H
#define TREEKIT_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef Py_GIL_DISABLED
#error "treekit's native core needs the GIL; the free-threaded build uses the pure-Python core"
#endif

/* What a walk returns when the Python function it mirrors must take the call over. */
#define DEFER 1

/* Objects read from the Python modules at first use (strong references, kept for the
 * life of the process). The registry's TYPES and ORDERS dicts are read from the module
 * at every call instead, so that a rebinding there is seen here. */
typedef struct {
    int ready;
    PyObject *registry;   /* treekit._registry */
    PyObject *treedef_mod;/* treekit._treedef */
    PyObject *traverse;   /* treekit._traverse */
    PyObject *LIST, *TUPLE, *DICT, *NONE, *NAMEDTUPLE; /* built-in NodeType entries */
    PyObject *TreeDef;    /* treekit._treedef.TreeDef */
    PyObject *LEAF;       /* treekit._treedef.LEAF, the record every leaf shares */
    PyObject *resolve;    /* treekit._registry.resolve */
    PyObject *unflatten;  /* treekit._treedef._unflatten(ntype, data, children) */
    PyObject *s_flatten, *s_original, *s_positions, *s_TYPES, *s_ORDERS, *s_nodes;
    PyObject *empty_tuple;
    PyObject *deferred;   /* _native.DEFER: what build returns to hand a call back */
    PyObject *small[8];   /* 0..7 as ints */
} State;

extern State S;

int tk_ready(void);
/* TYPES[type(x)], resolved like treekit._registry.lookup: a NodeType, Py_None for a leaf
 * type; NULL with an exception on failure. *owned gets a reference to release; *resolved
 * is set to 1 if treekit._registry.resolve (Python code) was called. */
PyObject *tk_lookup(PyObject *types, PyObject *x, PyObject **owned, int *resolved);
PyObject *tk_int(Py_ssize_t v);

/* walk.c: treekit._traverse.flatten (plain and with_path). 0 done, DEFER, -1 error. */
int tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, PyObject *leaves, PyObject *nodes, PyObject *paths);

/* build.c: treekit._treedef.TreeDef._build. The tree, or NULL with an exception (user
 * unflatten errors come from treekit._treedef._unflatten, as in the pure core); DEFER is
 * signalled by setting *defer. */
PyObject *tk_build(PyObject *nodes, PyObject *leaves, int *defer);

#endif
