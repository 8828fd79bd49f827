/* build.h: the builder (build.c), treekit.core._build.interpret in C. */
#ifndef TREEKIT_BUILD_H
#define TREEKIT_BUILD_H

#include "errors.h"

/* The tree of the structure `nodes` (a tuple of node records, post-order) from `leaves` (a
 * list): TK_OK (*out: a new reference), TK_DEFER (node data the C builder does not read, or
 * arguments of another kind: nothing raised; TreeDef._build builds it), TK_ERROR (user
 * unflatten errors noted as treekit.core._build.unflatten_node notes them, as in the pure core). */
TK_API tk_status tk_build(PyObject *nodes, PyObject *leaves, PyObject **out);

#endif
