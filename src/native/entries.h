/* entries.h: the built-in key entry classes' __init__ in C (entries.c). */
#ifndef TREEKIT_ENTRIES_H
#define TREEKIT_ENTRIES_H

#include "state.h"

/* cls's __init__ for the k-th entry class (SequenceKey, DictKey, GetAttrKey,
 * FlattenedIndexKey: its field idx, key, name, key), a method descriptor; Py_None where cls's
 * field is not a __slots__ field of its own or its __init__ is not a Python function (it
 * keeps its own). Return value: New reference; NULL with an exception. */
TK_API PyObject *tk_entry_init(int k, PyObject *cls);

#endif
