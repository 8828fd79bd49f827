/* map.h: tree_map in C (map.c), and flatten_pairs (pairs.c). */
#ifndef TREEKIT_MAP_H
#define TREEKIT_MAP_H

#include "build.h"
#include "guide.h"
#include "walk.h"

/* treekit.ops._ops.tree_map / tree_map_with_path, fused: TK_OK (*out: the mapped tree, a new
 * reference), TK_DEFER (before f was first called: let Python map it), TK_ERROR (f's
 * exception as `failed`, treekit.ops._ops._map_failed, raises it; a flatten function's as the
 * pure core words it). `rest`: an exact tuple of the other trees. */
TK_API tk_status tk_map(PyObject *f, PyObject *tree, PyObject *rest, PyObject *is_leaf, int with_path, int takes_path,
                        PyObject *failed, PyObject **out);

/* treekit.core._traverse.flatten_pairs: TK_OK (*out: (pairs, TreeDef), a new reference),
 * TK_DEFER (treekit.core._traverse.pure_flatten_pairs raises or finishes it), TK_ERROR. */
TK_API tk_status tk_pairs(PyObject *tree, PyObject *is_leaf, int takes_path, PyObject **out);

#endif
