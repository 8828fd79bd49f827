/* walk.h: the building walker (walk.c), treekit.core._traverse.flatten in C. */
#ifndef TREEKIT_WALK_H
#define TREEKIT_WALK_H

#include "errors.h"
#include "node.h"

/* A tree to its leaves (appended to the list `leaves`; NULL: not kept, the structure only),
 * its post-order node records (a new tuple in *records; `records` NULL: the leaves only, no
 * records made) and, with_path (never without `leaves`), each
 * leaf's key path (appended to the list `paths`); takes_path: is_leaf(path, x). `label`
 * (NULL: 'tree') names the tree in errors. TK_OK, TK_DEFER (a mismatch, a cycle, a tree too
 * deep: nothing raised; the lists hold what was found so far), TK_ERROR (a user function's
 * exception noted with its key path, as the pure walker raises it). */
TK_API tk_status tk_walk(PyObject *tree, PyObject *is_leaf, int with_path, int takes_path, PyObject *leaves,
                         PyObject **records, PyObject *paths, PyObject *label);

#endif
