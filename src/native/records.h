/* records.h: the post-order node records a walk makes, (node type, node data, arity,
 * num_leaves, num_nodes) as treekit.core._treedef's TreeDef holds them, and the TreeDef made of
 * them (records.c). */
#ifndef TREEKIT_RECORDS_H
#define TREEKIT_RECORDS_H

#include "cache.h"

/* The records made in one walk, by (node type, node data, arity, num_leaves, num_nodes): an
 * equal record is shared (records are immutable tuples; the layers of a parameter tree, the
 * items of a dataset give equal ones, node data included). Direct-mapped, so a miss costs
 * one comparison. Those of lists, tuples and Nones are shared from walk to walk (cache.h). */
#define RECORDS 64
typedef struct {
    uint64_t used; /* bit k: slot k holds a record (the slots are not cleared beforehand) */
    tk_made slot[RECORDS];
} Records;

/* The walk's records, in post-order (owned references), made into the TreeDef's tuple at
 * the end without a list in between. */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
} Buf;

/* Append x: 0, or -1 with an exception. Does not steal x: takes a new reference. */
TK_API int tk_buf_push(Buf *b, PyObject *x);
/* Drop the buffer's references and release its array. */
TK_API void tk_buf_clear(Buf *b);
/* The records as a tuple; the buffer is emptied. Return value: New reference. */
TK_API PyObject *tk_buf_tuple(Buf *b);

/* Append the record (ntype, data, arity, num_leaves, num_nodes), an equal one if `made` (or
 * the process-wide records) holds one: 0, or -1 with an exception. Does not steal ntype or data. */
TK_API int tk_add_record(Buf *nodes, Records *made, PyObject *ntype, PyObject *data, Py_ssize_t arity,
                         Py_ssize_t num_leaves, Py_ssize_t num_nodes);
/* Drop the walk's shared records. */
TK_API void tk_records_clear(Records *r);

/* A dataclass node's node data: the tuple of its meta fields' values (fields: the entry's
 * dataclass_fields, at most TK_KEPT_META meta names), the very tuple of the walk before where
 * those values are the same objects, each a small value that refers to nothing (cache.h); a new
 * tuple is kept there too if `keep`. TK_OK (*data a new reference), TK_RAISED (a getattr
 * raised) or TK_ERROR. */
#define TK_KEPT_META 8
TK_API tk_status tk_kept_data(PyObject *node, PyObject *fields, int keep, PyObject **data);

/* TreeDef(records), records a tuple of node records. Return value: New reference. */
TK_API PyObject *tk_treedef(PyObject *records);

#endif
