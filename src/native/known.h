/* known.h: what some model libraries' registered functions do, done here for a class that
 * treekit.core._known proved registered with exactly those (known.c): equinox's generated
 * flatten and unflatten of a Module class, flax nnx's flatten of a Variable and of a State and
 * its unflatten of a Variable. On the node layer: state.h only. */
#ifndef TREEKIT_KNOWN_H
#define TREEKIT_KNOWN_H

#include "state.h"

/* Whether k is a proof as treekit.core._known.known_functions makes it, by its first item:
 * (0, class, dynamic names, static names, wrapper names, MISSING, keys): an equinox Module;
 * (1, class, _raw_value's and _var_metadata's member descriptors, keys, made): an nnx Variable,
 *     made None (its unflatten not proved) or (the class it makes, Variable._new's function);
 * (2, class): an nnx State. Exact tuples of exact str names, a key per child where fixed. */
TK_API int tk_known_check(PyObject *k);

/* The proved flatten function on node: TK_OK (*kids, *data, with_path *keys set, as the
 * function and the entry's conversion of its key entries give them), TK_DEFER (node or what
 * it holds of another kind: call the function; nothing set), TK_ERROR. No Python code runs. */
TK_API tk_status tk_known_flatten(PyObject *k, PyObject *node, int with_path, PyObject **kids, PyObject **data,
                                  PyObject **keys);

/* The proved unflatten function with node data `data` and the n children `kids`: an equinox
 * Module's (object's __new__, then object.__setattr__ for each child and static field not
 * MISSING, the wrapper fields into __dict__) or an nnx Variable's (cls._new(kids[0],
 * dict(data)), _new done here where it is still the proved one). *called 0 (NULL, no
 * exception): not done here (another kind, or node data or children of another shape): the
 * function is to be called. Return value: New reference; NULL with an exception (a
 * descriptor's __set__ raised, or code the function runs: TraceState(), another _new). */
TK_API PyObject *tk_known_make(PyObject *k, PyObject *data, PyObject *const *kids, Py_ssize_t n, int *called);

#endif
