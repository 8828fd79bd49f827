/* keystr.h: treekit.core._keys.keystr in C (keystr.c). */
#ifndef TREEKIT_KEYSTR_H
#define TREEKIT_KEYSTR_H

#include "cache.h"

/* The joined text of `keys`, simple and separator given as the pure function's checks let
 * them through (a bool, an exact str). Return value: New reference; NULL with an exception. */
TK_API PyObject *tk_keystr(PyObject *keys, int simple, PyObject *separator);

/* treekit.keystr: a built-in function of `module` with pure's name and docstring (and its
 * signature, for inspect) whose usual calls run tk_keystr, and whose every other call goes
 * to `pure` (keystr as written in Python, kept), which checks its arguments and raises.
 * Return value: New reference; NULL with an exception. */
TK_API PyObject *tk_keystr_function(PyObject *pure, PyObject *module);

#endif
