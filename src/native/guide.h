/* guide.h: the guided walker (guide.c), treekit.core._guide.guide without keys in C. */
#ifndef TREEKIT_GUIDE_H
#define TREEKIT_GUIDE_H

#include "errors.h"
#include "node.h"

/* The subtrees of `tree` at the leaves of the structure `records` (a tuple of node records,
 * post-order; the caller holds it): TK_OK (*out: a new list of the subtrees, in leaf order),
 * TK_DEFER (a mismatch, or anything unusual: treekit.core._guide.guide walks again and raises), TK_ERROR,
 * or TK_RAISED: the flatten function of the subtree at record j raised exc, and *out is
 * (j, exc) (a new tuple; no exception set), for treekit.core._guide.guide to word without calling that
 * function again. `strict`: a leaf of the structure needs a leaf there too. */
TK_API tk_status tk_guide(PyObject *records, PyObject *tree, int strict, PyObject *is_leaf, PyObject **out);

#endif
