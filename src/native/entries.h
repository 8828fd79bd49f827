/* entries.h: the built-in key entry classes' __init__ in C, and JAX's entries made treekit's (entries.c). */
#ifndef TREEKIT_ENTRIES_H
#define TREEKIT_ENTRIES_H

#include "state.h"

/* cls's __init__ for the k-th entry class (SequenceKey, DictKey, GetAttrKey,
 * FlattenedIndexKey: its field idx, key, name, key), a method descriptor; Py_None where cls's
 * field is not a __slots__ field of its own or its __init__ is not a Python function (it
 * keeps its own). Return value: New reference; NULL with an exception. */
TK_API PyObject *tk_entry_init(int k, PyObject *cls);

/* Makes calls to the k-th entry class (after its __init__ from tk_entry_init is set) make its
 * instances in C: sets the class's tp_vectorcall (entries.c says why). 0, or -1 with an
 * exception (cls is not the class tk_entry_init was given). */
TK_API int tk_entry_call(int k, PyObject *cls);

/* The key entries in `keys` (a new tuple nothing else holds) made treekit's, in place, as a
 * JAX-registered entry's `convert_key` makes them (treekit.core._jax): read from `kinds`
 * ({entry class: (field name, {value: treekit's entry})}, or NULL) where it holds one, else
 * `convert(entry)`. May run code (a field's getter, a class's hash): the caller forgets after.
 * 0, or -1 with an exception (`keys` then holds some entries of each kind). */
TK_API int tk_convert_keys(PyObject *keys, PyObject *kinds, PyObject *convert);

#endif
