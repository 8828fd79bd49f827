"""treekit.testing: the strategies, check_node_type, and the law suite over every built-in node type."""

from __future__ import annotations

import dataclasses
import itertools
import operator
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

pytest.importorskip("hypothesis")
np = pytest.importorskip("numpy")

from hypothesis import Phase, find, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from treekit import (  # noqa: E402
    GetAttrKey,
    TreeDef,
    register_dataclass,
    register_pytree_node,
    register_pytree_with_keys,
    tree_flatten,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_structure,
    tree_transpose,
)
from treekit.core._registry import NodeType, add_type  # noqa: E402
from treekit.testing import (  # noqa: E402
    BUILTIN_NODE_TYPES,
    LAWS,
    NodeTypeLawError,
    array_trees,
    check_node_type,
    key_paths,
    param_trees,
    same_structure_trees,
    trees,
    trees_like,
)

FIND = settings(database=None, derandomize=True, max_examples=1000)
EXISTS = settings(FIND, phases=[Phase.generate])  # find without shrinking: is there one at all?


def depth(treedef: TreeDef) -> int:
    """Nodes on the longest root-to-leaf path (a leaf: 0; ``[]`` and ``None``: 1)."""
    stack: list[int] = []
    for ntype, _, arity, _, _ in treedef._nodes:
        if ntype is None:
            stack.append(0)
            continue
        children = stack[len(stack) - arity :]
        del stack[len(stack) - arity :]
        stack.append(1 + max(children, default=0))
    return stack[0]


def node_classes(treedef: TreeDef) -> set[type]:
    return {ntype.node_class(data) for ntype, data, *_ in treedef._nodes if ntype is not None}


def as_type(node_type: Any) -> type:
    return type(None) if node_type is None else node_type  # type: ignore[no-any-return]


# -- trees ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_leaves, max_depth", [(0, 3), (1, 0), (3, 2), (10, 4), (2, 7)])
@given(data=st.data())
def test_trees_respect_max_leaves_and_max_depth(data: st.DataObject, max_leaves: int, max_depth: int) -> None:
    treedef = tree_structure(data.draw(trees(max_leaves=max_leaves, max_depth=max_depth)))
    assert treedef.num_leaves <= max_leaves
    assert depth(treedef) <= max_depth


def test_trees_reach_max_depth_with_one_leaf() -> None:
    # Depth does not depend on max_leaves (st.recursive ties it to log2(max_leaves)).
    tree = find(trees(max_leaves=1, max_depth=4), lambda t: depth(tree_structure(t)) == 4, settings=EXISTS)
    assert depth(tree_structure(tree)) == 4


@pytest.mark.parametrize("node_type", BUILTIN_NODE_TYPES, ids=lambda t: as_type(t).__name__)
def test_trees_build_every_builtin_node_type(node_type: Any) -> None:
    cls = as_type(node_type)
    tree = find(trees(), lambda t: cls in node_classes(tree_structure(t)), settings=EXISTS)
    assert cls in node_classes(tree_structure(tree))


@given(trees(st.text(max_size=2), [tuple, None]))
def test_trees_use_only_the_given_leaves_and_node_types(tree: Any) -> None:
    assert all(type(leaf) is str for leaf in tree_leaves(tree))
    assert node_classes(tree_structure(tree)) <= {tuple, type(None)}


class Box:
    def __init__(self, value: Any, tag: str = "") -> None:
        self.value, self.tag = value, tag

    def __repr__(self) -> str:
        return f"Box({self.value!r}, {self.tag!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is Box and (self.value, self.tag) == (other.value, other.tag)

    __hash__ = None  # type: ignore[assignment]


def box_flatten(box: Box) -> tuple[tuple[Any], str]:
    return (box.value,), box.tag


def box_unflatten(tag: str, children: Any) -> Box:
    return Box(*children, tag)


def boxes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Box]:
    return st.builds(Box, children, st.sampled_from(["", "t"]))


def test_trees_build_registered_types_from_a_node_maker(registered: Any) -> None:
    registered(Box, lambda c: register_pytree_node(c, box_flatten, box_unflatten))
    tree = find(trees(node_types=[list, boxes]), lambda t: isinstance(t, Box) and t.tag == "t", settings=FIND)
    # Shrunk to a small Box (which one is the shrinker's pick: never pin it); its tag is node data.
    assert type(tree) is Box and tree.tag == "t"
    assert depth(tree_structure(tree)) <= 2 and tree_structure(tree).num_leaves <= 1
    assert tree_structure(tree) != tree_structure(Box(tree.value, ""))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: trees(node_types=[Box]), TypeError,
         "node_types[0]: expected a built-in node type, a namedtuple class or a function children -> strategy, "
         "got Box (a class that is not a node: pass lambda children: st.builds(Box, ...))"),
        (lambda: trees(node_types=[list, 3]), TypeError,
         "node_types[1]: expected a built-in node type, a namedtuple class or a function children -> strategy, "
         "got int 3"),
        (lambda: trees(max_depth=-1), ValueError, "max_depth: expected an int >= 0, got -1"),
        (lambda: trees(max_leaves=2.0), ValueError, "max_leaves: expected an int >= 0, got 2.0"),
        (lambda: trees_like([0]), TypeError, "treedef: expected a TreeDef, got list [0]"),
        (lambda: param_trees([3]), ValueError, "layer_widths: expected at least 2 ints >= 1, got [3]"),
    ],
    ids=["class", "not-callable", "depth", "leaves", "treedef", "widths"],
)
def test_bad_arguments(call: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


# -- shrinking --------------------------------------------------------------------------------------
# Which minimal tree the shrinker picks changes between hypothesis releases (and with its time
# budget): these tests assert properties every small counterexample has, never one tree. The
# bounds are about twice the smallest possible; unshrunk examples reach 4 deep, 7 containers.
def containers(treedef: TreeDef) -> int:
    return treedef.num_nodes - treedef.num_leaves


@pytest.mark.parametrize("count", [3, 5])
def test_failing_examples_shrink_to_small_trees(count: int) -> None:
    # "Every tree has fewer than `count` leaves" fails: the example found is small (bounds with
    # room, not the shrinker's exact result, which depends on hypothesis's version and history).
    tree = find(trees(), lambda t: len(tree_leaves(t)) >= count, settings=FIND)
    treedef = tree_structure(tree)
    assert count <= treedef.num_leaves <= 2 * count
    assert containers(treedef) <= 2 * count


def test_failing_examples_shrink_to_shallow_trees() -> None:
    # "Every tree is less than 3 deep" fails: exactly 3 deep ([[[]]], [{'a': None}], ...), with
    # few containers and leaves.
    treedef = tree_structure(find(trees(), lambda t: depth(tree_structure(t)) >= 3, settings=FIND))
    assert depth(treedef) == 3
    assert containers(treedef) <= 6
    assert treedef.num_leaves <= 2


# -- trees_like, same_structure_trees, key_paths -----------------------------------------------
@given(st.data())
def test_trees_like_has_the_structure(data: st.DataObject) -> None:
    treedef = tree_structure(data.draw(trees()))
    assert tree_structure(data.draw(trees_like(treedef, st.text()))) == treedef


@pytest.mark.parametrize("n", [1, 3])
@given(data=st.data())
def test_same_structure_trees_share_a_structure(data: st.DataObject, n: int) -> None:
    group = data.draw(same_structure_trees(n))
    assert len(group) == n
    # Same structure, and the same dict key order, node types and node data everywhere.
    assert len({repr(tree_map(lambda _: 0, t)) for t in group}) <= 1
    if group:
        assert tree_structure(tree_map(lambda *xs: len(xs), *group)) == tree_structure(group[0])


def test_same_structure_trees_vary_their_leaves() -> None:
    a, b = find(same_structure_trees(2), lambda ab: ab[0] != ab[1], settings=FIND)
    assert tree_structure(a) == tree_structure(b)
    assert sum(x != y for x, y in zip(tree_leaves(a), tree_leaves(b))) >= 1
    assert tree_structure(a).num_leaves <= 2  # shrunk: the difference needs one leaf
    assert find(same_structure_trees(0), lambda _: True, settings=FIND) == ()


@given(trees().filter(lambda t: tree_leaves(t)).flatmap(lambda t: st.tuples(st.just(t), key_paths(t))))
def test_key_paths_are_paths_of_leaves(tree_and_path: tuple[Any, Any]) -> None:
    tree, path = tree_and_path
    assert path in [p for p, _ in tree_leaves_with_path(tree)]


def test_key_paths_of_a_tree_without_leaves_is_empty() -> None:
    assert key_paths([None, {}]).is_empty and not key_paths([[1]]).is_empty


# -- arrays ----------------------------------------------------------------------------------------
@given(array_trees([(2,), (1, 3)], ["float32", "int8"]))
def test_array_trees_have_the_given_shapes_and_dtypes(tree: Any) -> None:
    for leaf in tree_leaves(tree):
        assert isinstance(leaf, np.ndarray)
        assert leaf.shape in [(2,), (1, 3)]
        assert leaf.dtype in [np.float32, np.int8]
        assert np.all(np.isfinite(leaf)) and np.all(np.abs(leaf) <= 1000)


@given(array_trees())
def test_array_trees_default_to_small_finite_arrays(tree: Any) -> None:
    for leaf in tree_leaves(tree):
        assert leaf.ndim <= 2 and all(side <= 3 for side in leaf.shape)
        assert np.all(np.isfinite(leaf))


@given(param_trees())
def test_param_trees_are_mlp_layers(params: list[dict[str, Any]]) -> None:
    assert 1 <= len(params) <= 3
    for layer, following in itertools.pairwise([*params, None]):
        assert sorted(layer) == ["biases", "weights"]
        n_out = layer["weights"].shape[1]
        assert layer["biases"].shape == (n_out,) and layer["weights"].dtype == np.float32
        if following is not None:
            assert following["weights"].shape[0] == n_out


@given(param_trees(st.just([1, 5, 1]), dtype="float64"))
def test_param_trees_take_fixed_widths_and_a_dtype(params: list[dict[str, Any]]) -> None:
    assert [(layer["weights"].shape, layer["biases"].dtype) for layer in params] == [
        ((1, 5), np.float64),
        ((5, 1), np.float64),
    ]


# -- the law suite over every built-in node type ----------------------------------------------------
# Leaves are ints and node types built-ins, so repr shows types, dict order and values exactly.
@given(trees())
def test_law_unflatten_inverts_flatten(tree: Any) -> None:
    leaves, treedef = tree_flatten(tree)
    assert repr(treedef.unflatten(leaves)) == repr(tree)


@given(trees())
def test_law_map_identity(tree: Any) -> None:
    assert repr(tree_map(lambda x: x, tree)) == repr(tree)


@given(trees())
def test_law_map_composition(tree: Any) -> None:
    def f(x: int) -> int:
        return 2 * x + 1

    def g(x: int) -> str:
        return str(x)

    assert repr(tree_map(g, tree_map(f, tree))) == repr(tree_map(lambda x: g(f(x)), tree))
    assert tree_leaves(tree_map(f, tree)) == [f(x) for x in tree_leaves(tree)]


@settings(max_examples=30)
@given(st.data())
def test_law_transpose_twice_is_identity(data: st.DataObject) -> None:
    outer = tree_structure(data.draw(trees(max_leaves=4).filter(tree_leaves), label="outer"))
    inner = tree_structure(data.draw(trees(max_leaves=4).filter(tree_leaves), label="inner"))
    tree = data.draw(trees_like(outer.compose(inner)), label="tree")
    transposed = tree_transpose(outer, inner, tree)
    assert tree_structure(transposed) == inner.compose(outer)
    assert repr(tree_transpose(inner, outer, transposed)) == repr(tree)


@given(trees())
def test_law_each_key_path_reaches_its_leaf(tree: Any) -> None:
    for path, leaf in tree_leaves_with_path(tree):
        node = tree
        for entry in path:
            node = entry.get(node)
        assert node is leaf


@given(trees(), trees())
def test_law_structure_equality_is_reflexive_and_symmetric(a: Any, b: Any) -> None:
    assert tree_structure(a) == tree_structure(a)
    assert (tree_structure(a) == tree_structure(b)) == (tree_structure(b) == tree_structure(a))
    if tree_structure(a) == tree_structure(b):
        assert hash(tree_structure(a)) == hash(tree_structure(b))


@given(same_structure_trees(2))
def test_law_structure_equality_holds_for_the_same_structure(ab: tuple[Any, Any]) -> None:
    a, b = ab
    assert tree_structure(a) == tree_structure(b) and hash(tree_structure(a)) == hash(tree_structure(b))


# -- check_node_type --------------------------------------------------------------------------------
NOT_JIT = tuple(law for law in LAWS if law != "jit")


@pytest.mark.parametrize("node_type", BUILTIN_NODE_TYPES, ids=lambda t: as_type(t).__name__)
def test_check_node_type_passes_the_builtin_node_types(node_type: Any) -> None:
    cls = as_type(node_type)
    instances = trees(node_types=[node_type], max_leaves=4, max_depth=2).filter(lambda t: type(t) is cls)
    report = check_node_type(cls, instances, jit=False, max_examples=20)
    assert report.held == NOT_JIT and report.skipped == (("jit", "jit=False"),)


class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def __repr__(self) -> str:
        return f"Point({self.x!r}, {self.y!r})"


def points(children: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Point]:
    children = st.integers() if children is None else children
    return st.builds(Point, children, children)


def point_keys(p: Point) -> tuple[Any, None]:
    return ((GetAttrKey("x"), p.x), (GetAttrKey("y"), p.y)), None


def test_check_node_type_passes_a_correct_registration(registered: Any) -> None:
    registered(Point, lambda c: register_pytree_with_keys(c, point_keys, lambda _, kids: Point(*kids),
                                                          lambda p: ((p.x, p.y), None)))
    report = check_node_type(Point, points(trees(max_leaves=3)), jit=False, max_examples=30)
    assert report.cls is Point and report.held == NOT_JIT


def test_check_node_type_passes_a_dataclass(registered: Any) -> None:
    @dataclasses.dataclass
    class Layer:
        w: Any
        act: str = dataclasses.field(default="relu", metadata={"static": True})

    registered(Layer, register_dataclass)
    instances = st.builds(Layer, trees(max_leaves=3), st.sampled_from(["relu", "tanh"]))
    assert check_node_type(Layer, instances, jit=False, max_examples=30).held == NOT_JIT


def _counter_data() -> Callable[[Point], tuple[Any, int]]:
    counter = itertools.count()
    return lambda p: ((p.x, p.y), next(counter))


# Each broken registration of Point: how it registers, and the laws it breaks.
@dataclasses.dataclass(frozen=True)
class Broken:
    name: str
    register: Callable[[type], Any]
    laws: tuple[str, ...]


BROKEN = [
    Broken("swaps-children", lambda c: register_pytree_node(c, lambda p: ((p.y, p.x), None), lambda _, k: Point(*k)),
           ("round_trip", "survives_map")),
    Broken("one-key-short", lambda c: add_type(NodeType(
        c, lambda p, with_path: ([p.x, p.y], None, [GetAttrKey("x")] if with_path else None),
        lambda _, k: Point(*k))), ("keys_count", "survives_map")),
    Broken("keys-disagree", lambda c: register_pytree_with_keys(
        c, lambda p: (((GetAttrKey("y"), p.y), (GetAttrKey("x"), p.x)), None), lambda _, k: Point(*k),
        lambda p: ((p.x, p.y), None)), ("keys_agree", "survives_map")),
    Broken("counter-node-data", lambda c: register_pytree_node(c, _counter_data(), lambda _, k: Point(*k)),
           ("round_trip", "keys_agree", "deterministic", "survives_map")),
    Broken("list-node-data", lambda c: register_pytree_node(
        c, lambda p: ((p.x,), [p.y]), lambda d, k: Point(k[0], d[0])), ("node_data_hashable",)),
    Broken("unflatten-raises", lambda c: register_pytree_node(c, lambda p: ((p.x, p.y), None), lambda _, k: Point(k)),
           ("round_trip", "survives_map")),
]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.name)
def test_check_node_type_catches_each_broken_law(case: Broken, registered: Any) -> None:
    registered(Point, case.register)
    with pytest.raises(NodeTypeLawError) as caught:
        check_node_type(Point, points(), jit=False, max_examples=30)
    assert tuple(b.law for b in caught.value.broken) == case.laws
    assert all(type(b.example) is Point for b in caught.value.broken)


def test_check_node_type_message_lists_each_broken_law_with_its_example(registered: Any) -> None:
    registered(Point, BROKEN[3].register)
    message = (
        "Point breaks 4 of the pytree node laws:\n"
        "  round_trip: expected unflatten(flatten(x)) == x, got Point(0, 0); x = Point(0, 0)\n"
        "  keys_agree: expected the same children and node data with and without keys, got node data "
    )
    with pytest.raises(NodeTypeLawError, match=re.escape(message)):
        check_node_type(Point, [Point(0, 0)], jit=False)


def test_check_node_type_shrinks_the_examples_it_draws(registered: Any) -> None:
    registered(Point, BROKEN[3].register)
    with pytest.raises(NodeTypeLawError) as caught:
        check_node_type(Point, points(), jit=False, max_examples=30)
    for line, broken in zip(str(caught.value).splitlines()[1:], caught.value.broken, strict=True):
        assert line.endswith(f"; x = {broken.example!r}")
        # Shrunk: both children are small integers (the exact pick is the shrinker's).
        assert all(abs(v) <= 1 for v in (broken.example.x, broken.example.y)), broken


def test_check_node_type_reports_a_raising_law(registered: Any) -> None:
    registered(Point, BROKEN[5].register)
    with pytest.raises(NodeTypeLawError) as caught:
        check_node_type(Point, [Point(1, 2)], jit=False)
    assert str(caught.value.broken[0]) == (
        "round_trip: raised TypeError: Point.__init__() missing 1 required positional argument: 'y'; x = Point(1, 2)"
    )


def test_check_node_type_tries_a_list_of_instances_in_order(registered: Any) -> None:
    # Swapping x and y only shows on instances with x != y: the first such one is the example.
    registered(Point, BROKEN[0].register)
    with pytest.raises(NodeTypeLawError) as caught:
        check_node_type(Point, [Point(1, 1), Point(1, 2), Point(3, 4)], jit=False)
    assert [(b.law, repr(b.example)) for b in caught.value.broken] == [
        ("round_trip", "Point(1, 2)"),
        ("survives_map", "Point(1, 2)"),
    ]


def test_check_node_type_with_eq_sees_attributes_the_registration_drops(registered: Any) -> None:
    # Box's tag is left out of the registration: equal trees, unequal objects.
    registered(Box, lambda c: register_pytree_node(c, lambda b: ((b.value,), None), lambda _, k: Box(*k)))
    instances = st.builds(Box, st.integers(), st.sampled_from(["", "t"]))
    check_node_type(Box, instances, jit=False, max_examples=30)
    with pytest.raises(NodeTypeLawError) as caught:
        check_node_type(Box, instances, eq=operator.eq, jit=False, max_examples=30)
    [broken] = [b for b in caught.value.broken if b.law == "round_trip"]
    assert broken.example.tag == "t"  # only a tagged Box loses something
    assert broken.message.startswith(f"expected unflatten(flatten(x)) == x, got Box({broken.example.value!r}, '')")


@pytest.mark.parametrize(
    "cls, instances, message",
    [
        (Box, [Box(1)], "cls: expected a registered node type, got Box (a leaf type)"),
        (list, [[1], (1,)], "instances: expected instances of list, got tuple (1,)"),
    ],
    ids=["unregistered", "wrong-instance"],
)
def test_check_node_type_bad_arguments(cls: type, instances: Any, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        check_node_type(cls, instances, jit=False)


# -- the jit law (needs jax) ----------------------------------------------------------------------------
class JaxPoint(NamedTuple):
    x: Any
    y: Any


def test_check_node_type_jit_law_holds_for_types_registered_with_treekit(registered: Any) -> None:
    pytest.importorskip("jax")
    # treekit mirrors its registrations into JAX's registry, so the jit law applies and holds.
    registered(Point, lambda c: register_pytree_node(c, lambda p: ((p.x, p.y), None), lambda _, k: Point(*k)))
    report = check_node_type(Point, [Point(1, 2)])
    assert report.held == LAWS and report.skipped == ()


def test_check_node_type_jit_law_holds_for_namedtuples() -> None:
    pytest.importorskip("jax")
    report = check_node_type(JaxPoint, st.builds(JaxPoint, trees(max_leaves=2, max_depth=1), st.integers()),
                             max_examples=5)
    assert report.held == LAWS


def test_check_node_type_jit_law_catches_an_unflatten_that_needs_concrete_leaves(registered: Any) -> None:
    jax = pytest.importorskip("jax")

    class Meters:  # unflatten calls float() on its child: fails on a tracer
        def __init__(self, value: Any) -> None:
            self.value = value

        def __repr__(self) -> str:
            return f"Meters({self.value!r})"

    def flatten(m: Meters) -> tuple[tuple[Any], None]:
        return (m.value,), None

    def unflatten(_: None, children: Any) -> Meters:
        return Meters(float(children[0]))

    jax.tree_util.register_pytree_node(Meters, flatten, unflatten)
    registered(Meters, lambda c: register_pytree_node(c, flatten, unflatten))
    with pytest.raises(NodeTypeLawError) as caught:
        check_node_type(Meters, st.builds(Meters, st.integers(0, 3)), max_examples=5)
    assert [b.law for b in caught.value.broken] == ["jit"]
    assert caught.value.broken[0].message.startswith("raised ConcretizationTypeError: ")


def test_import_treekit_does_not_import_the_testing_module() -> None:
    code = "import sys, treekit; print(sorted(m for m in ('hypothesis', 'treekit.testing') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
