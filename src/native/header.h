/* header.h: a safetensors header's tensor entries as writers write them, read in C (header.c). */
#ifndef TREEKIT_HEADER_H
#define TREEKIT_HEADER_H

#include "state.h"

/* treekit.checkpoint._header's fast path: from `pos` of `text` (an exact str), each entry that
 * its _ENTRY expression and _canonical take (the keys dtype, shape, data_offsets in that order,
 * no escapes in its strings, a dtype code of `sizes` ({code: item size}), offsets within
 * `data_size` that hold exactly its shape's bytes, no zero dimension), whose name is not
 * "__metadata__" nor already a key of `tensors`, and whose cost (256 + 4 * len(name) + 8 * ndim
 * bytes) fits in `*left`, goes into `tensors` as name: cls(code, shape, begin, end) (`cls` a
 * tuple subclass, made as tuple.__new__(cls, ...); the offsets from the file's start, the
 * data's plus `data_start`), its cost off `*left`; `*at` becomes its end if it began at `*at`,
 * else -1 (the entries so far are not one run in file order). It stops at the first entry it
 * does not take, which Python reads (and refuses, if it must): `*pos` is then that entry's
 * start, else after the `}` that closed the header, with `*last` set. Runs no Python code but
 * a collection's (tuples are made). 0, or -1 with an exception (memory). */
TK_API int tk_scan_entries(PyObject *text, Py_ssize_t *pos, int *last, long long data_start, long long data_size,
                           PyObject *sizes, PyObject *cls, PyObject *tensors, Py_ssize_t *left, long long *at);

#endif
