"""The JAX bridge: treekit nodes inside jit/grad/vmap/scan, JAX-only types in treekit, import orders."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import jax.tree_util as jtu  # noqa: E402
import numpy as np  # noqa: E402

import treekit as tk  # noqa: E402
from treekit import _registry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def tree_flatten_with_keys(self) -> Any:
        return ((tk.GetAttrKey("x"), self.x), (tk.GetAttrKey("y"), self.y)), None

    @classmethod
    def tree_unflatten(cls, data: Any, children: Any) -> Point:
        return cls(*children)


@dataclasses.dataclass
class Layer:
    w: Any
    b: Any
    act: str = tk.static(default="relu")


class Tag(str):
    pass


@pytest.fixture
def nodes(registered: Callable[[type, Callable[[type], Any]], Any]) -> None:
    registered(Point, tk.register_pytree_with_keys_class)
    registered(Layer, tk.register_dataclass)
    registered(Tag, tk.register_static)


def test_jax_sees_treekit_nodes_with_the_same_paths(nodes: None) -> None:
    tree = {"p": Point(1, [2]), "l": Layer(3, 4, "tanh"), "t": Tag("s")}
    ours = [(tk.keystr(p), x) for p, x in tk.tree_leaves_with_path(tree)]
    theirs = [(jtu.keystr(p), x) for p, x in jtu.tree_leaves_with_path(tree)]
    assert ours == theirs == [("['l'].w", 3), ("['l'].b", 4), ("['p'].x", 1), ("['p'].y[0]", 2)]
    # JAX gets its own key classes, so its simple keystr and pattern matching work.
    path = jtu.tree_leaves_with_path(tree)[0][0]
    assert path == (jtu.DictKey("l"), jtu.GetAttrKey("w"))
    assert jtu.keystr(path, simple=True, separator="/") == "l/w"
    assert repr(jtu.tree_structure(tree)) == repr(tk.tree_structure(tree))


def test_jit_grad_vmap_scan_with_treekit_nodes(nodes: None) -> None:
    traces = []

    @jax.jit
    def step(layer: Layer, p: Point) -> Any:
        traces.append(1)
        return tk.tree_map(lambda a, b: a * 2 + b, layer, Layer(p.x, p.y, layer.act))

    layer = Layer(jnp.ones(3), jnp.zeros(3), "relu")
    out = step(layer, Point(jnp.ones(3), jnp.ones(3)))
    step(layer, Point(jnp.zeros(3), jnp.ones(3)))
    assert isinstance(out, Layer) and out.act == "relu"
    np.testing.assert_allclose(out.w, 3.0)
    assert len(traces) == 1

    def loss(layer: Layer) -> Any:
        return jnp.sum(tk.tree_reduce(lambda a, b: a + b, tk.tree_map(lambda v: v**2, layer)))

    grads = jax.grad(loss)(layer)
    assert isinstance(grads, Layer) and grads.act == "relu"
    np.testing.assert_allclose(grads.w, 2.0)

    batched = jax.vmap(lambda p: tk.tree_map(jnp.sum, p))(Point(jnp.ones((4, 2)), jnp.ones((4, 3))))
    assert batched.x.shape == (4,) and float(batched.y[0]) == 3.0

    def body(carry: Point, x: Any) -> tuple[Point, Any]:
        return tk.tree_map(lambda c: c + x, carry), x

    final, _ = jax.lax.scan(body, Point(0.0, jnp.zeros(2)), jnp.arange(4.0))
    assert float(final.x) == 6.0


def test_static_nodes_change_the_trace(nodes: None) -> None:
    traces = []

    @jax.jit
    def f(x: Any, tag: Tag) -> Any:
        traces.append(tag)
        return x + 1 if tag == "add" else x - 1

    assert float(f(1.0, Tag("add"))) == 2.0
    assert float(f(5.0, Tag("add"))) == 6.0
    assert float(f(1.0, Tag("sub"))) == 0.0
    assert traces == ["add", "sub"]


def test_treedef_is_a_static_argument_without_retrace() -> None:
    traces = []

    @jax.jit(static_argnums=0)
    def build(treedef: tk.PyTreeDef, x: Any) -> Any:
        traces.append(1)
        return treedef.unflatten([x] * treedef.num_leaves)

    out = build(tk.tree_structure({"a": 0, "b": [0, None]}), jnp.ones(2))
    build(tk.tree_structure({"a": 1, "b": [2, None]}), jnp.zeros(2))
    assert list(out) == ["a", "b"] and out["b"][1] is None
    assert len(traces) == 1


def test_none_and_empty_containers_round_trip_through_jit() -> None:
    tree = {"a": None, "b": [], "c": (), "d": {}, "e": jnp.ones(1)}
    out = jax.jit(lambda t: t)(tree)
    assert tk.tree_structure(out) == tk.tree_structure(tree)
    assert out["a"] is None and out["b"] == [] and out["c"] == () and out["d"] == {}


def test_checks_and_maps_work_on_tracers() -> None:
    def f(x: Any) -> Any:
        tree = {"w": x, "b": [x * 2]}
        leaves = tk.tree_leaves(tree)
        assert all(isinstance(leaf, jax.core.Tracer) for leaf in leaves)
        doubled = tk.tree_map_with_path(lambda p, v: v * len(p), tree)
        return tk.tree_reduce(lambda a, b: a + b, tk.tree_map(jnp.sum, doubled))

    assert float(jax.jit(f)(jnp.ones(2))) == 2.0 + 8.0
    assert float(jax.grad(f)(1.0)) == 1.0 + 4.0


class OnlyJax:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


jtu.register_pytree_with_keys(
    OnlyJax,
    lambda o: (((jtu.GetAttrKey("a"), o.a), (jtu.GetAttrKey("b"), o.b)), "aux"),
    lambda data, children: OnlyJax(*children),
)


@pytest.mark.parametrize(
    "tree",
    [
        OnlyJax(1, {"z": 2}),
        [OnlyJax(OnlyJax(1, None), (2, 3))],
        jtu.Partial(print, 1, k=[2]),
        {"partial": jtu.Partial(max, 1)},
    ],
    ids=["only-jax", "nested-only-jax", "jax-partial", "jax-partial-in-dict"],
)
def test_types_only_jax_knows_are_traversed_as_jax_does(tree: Any) -> None:
    assert tk.tree_leaves(tree) == jtu.tree_leaves(tree)
    assert [tk.keystr(p) for p, _ in tk.tree_leaves_with_path(tree)] == [
        jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)
    ]
    assert repr(tk.tree_structure(tree)) == repr(jtu.tree_structure(tree))
    assert tk.tree_structure(tree).num_nodes == jtu.tree_structure(tree).num_nodes
    rebuilt = tk.tree_map(lambda x: x, tree)
    assert jtu.tree_structure(rebuilt) == jtu.tree_structure(tree)
    assert jtu.tree_leaves(rebuilt) == jtu.tree_leaves(tree)


def test_jax_only_nodes_keep_equal_treedefs_after_treekit_forgets_its_answers() -> None:
    before = tk.tree_structure(jtu.Partial(max, 1))
    _registry.forget_answers()  # as when the type cache is cleared
    assert tk.tree_structure(jtu.Partial(max, 1)) == before


def test_check_node_type_leaves_the_bridge_working() -> None:
    # check_node_type looks for jax with find_spec before importing it.
    out = _run(
        REGISTER
        + "from treekit.testing import check_node_type\n"
        + "print(check_node_type(Point, [Point(1.0, 2.0)]).skipped)\n"
        + CHECK
    )
    assert out.split() == ["()", ".y", "2.0"]


def test_jax_only_node_data_is_compared() -> None:
    assert tk.tree_structure(OnlyJax(1, 2)) == tk.tree_structure(OnlyJax(3, 4))
    assert tk.tree_structure(jtu.Partial(max, 1)) != tk.tree_structure(jtu.Partial(min, 1))


def test_treekit_partial_is_a_jax_pytree() -> None:
    add = tk.Partial(jnp.add, 1.0)
    assert float(jax.jit(lambda f, x: f(x))(add, 2.0)) == 3.0


def test_jax_error_messages_name_treekit_paths(nodes: None) -> None:
    with pytest.raises(TypeError, match=r"path p\.y"):
        jax.jit(lambda p: p)(Point(1.0, "not an array"))


_IMPORT_RACE = "NameError: name 'sys' is not defined"


def _run(code: str, *, block_jax: bool = False) -> str:
    prelude = ""
    if block_jax:
        prelude = textwrap.dedent(
            """
            import sys
            class _NoJax:
                def find_spec(self, name, path=None, target=None):
                    if name == "jax" or name.startswith("jax.") or name.startswith("jaxlib"):
                        raise ImportError(f"No module named {name!r} (blocked by the test)")
                    return None
            sys.meta_path.insert(0, _NoJax())
            """
        )
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for _ in range(3):
        result = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )
        # CPython 3.13's importlib race (gh-130094, fixed in later 3.13 releases): a thread may
        # see a module another thread is still initializing; only that failure runs again
        if result.returncode == 0 or _IMPORT_RACE not in result.stderr:
            break
    assert result.returncode == 0, result.stderr
    return result.stdout


REGISTER = textwrap.dedent("""
    import treekit as tk
    class Point:
        def __init__(self, x, y): self.x, self.y = x, y
    tk.register_pytree_with_keys(
        Point,
        lambda p: (((tk.GetAttrKey('x'), p.x), (tk.GetAttrKey('y'), p.y)), None),
        lambda _, c: Point(*c))
""")
IN_A_THREAD = "import threading\nt = threading.Thread(target=__import__, args=('jax',))\nt.start()\n"
CHECK = textwrap.dedent("""
    import jax, jax.numpy as jnp, jax.tree_util as jtu
    out = jax.jit(lambda p: p.x + p.y)(Point(jnp.ones(2), 1.0))
    print(jtu.keystr(jtu.tree_leaves_with_path(Point(1, 2))[1][0]), float(out[0]))
""")


@pytest.mark.parametrize(
    "code",
    [
        REGISTER + CHECK,  # registered before jax is imported
        "import jax\n" + REGISTER + CHECK,  # jax imported before treekit
        REGISTER + "import json\ndef later():\n" + textwrap.indent(CHECK, "    ") + "later()\n",
        "import treekit\nimport jax\n" + REGISTER + CHECK,  # treekit, then jax, then registration
        # the import machinery used before `import jax` (libraries test for jax this way)
        REGISTER + "import importlib.util\nassert importlib.util.find_spec('jax')\n" + CHECK,
        "import importlib.util, treekit\nimportlib.util.find_spec('jax')\n" + REGISTER + CHECK,
        REGISTER + "import importlib\nimportlib.import_module('jax')\n" + CHECK,
        REGISTER + IN_A_THREAD + "t.join()\n" + CHECK,
        IN_A_THREAD + REGISTER + "t.join()\n" + CHECK,  # jax imported in a thread while treekit is

    ],
    ids=[
        "register-then-import-jax",
        "jax-first",
        "jax-imported-lazily-later",
        "treekit-jax-register",
        "find-spec-first",
        "find-spec-then-register",
        "import-module",
        "jax-imported-in-a-thread",
        "jax-and-treekit-imported-at-once",
    ],
)
def test_every_import_order_bridges(code: str) -> None:
    assert _run(code).split() == [".y", "2.0"]


def test_import_treekit_does_not_import_jax() -> None:
    out = _run("import sys, treekit\nprint('jax' in sys.modules, 'numpy' in sys.modules)")
    assert out.split() == ["False", "False"]


def test_treekit_works_without_jax_installed() -> None:
    out = _run(
        REGISTER
        + textwrap.dedent("""
        print(tk.tree_leaves({'p': Point(1, [2])}), tk.keystr(tk.tree_leaves_with_path(Point(1, 2))[1][0]))
        try:
            import jax
        except ImportError:
            print('no-jax')
        """),
        block_jax=True,
    )
    assert out.split() == ["[1,", "2]", ".y", "no-jax"]


def test_structure_checks_work_on_tracers() -> None:
    spec = {"w": tk.ShapeDtype(("batch", 3), "float32"), "b": tk.ShapeDtype((3,), "float32")}

    @jax.jit
    def f(params: Any) -> Any:
        assert tk.same_structure(params, {"w": 0, "b": 0})
        tk.assert_same_structure(params, {"w": 1, "b": 2})
        assert tk.check_spec(params, spec) == {"batch": 2}
        assert not tk.tree_diff(params, params)
        assert "f32[2,3]" in tk.format_tree(params)
        return tk.tree_map(lambda x: x * 2, params)

    out = f({"w": jnp.ones((2, 3)), "b": jnp.ones(3)})
    assert float(out["w"][0, 0]) == 2.0
    with pytest.raises(ValueError, match=r"\['b'\]"):
        jax.jit(lambda p: tk.check_spec(p, spec))({"w": jnp.ones((2, 3)), "b": jnp.ones(4)})


def test_optax_states_are_traversed_as_jax_does() -> None:
    optax = pytest.importorskip("optax")
    params = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
    for state in (optax.adam(1e-3).init(params), optax.chain(optax.clip(1.0), optax.sgd(0.1, 0.9)).init(params)):
        assert [tk.keystr(p) for p, _ in tk.tree_leaves_with_path(state)] == [
            jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(state)
        ]
        assert all(a is b for a, b in zip(tk.tree_leaves(state), jtu.tree_leaves(state)))
        assert repr(tk.tree_structure(state)) == repr(jtu.tree_structure(state))
        rebuilt = tk.tree_map(lambda x: x, state)
        assert jtu.tree_structure(rebuilt) == jtu.tree_structure(state)


# -- JAX's PyTreeDef wherever treekit takes a treedef; converting both ways -------------------
def test_treedefs_convert_both_ways_for_every_case(case_types: None) -> None:
    from cases import CASES

    for case in CASES:
        try:
            theirs = jtu.tree_structure(case.tree)
        except ValueError:  # dict keys of mixed types: jax cannot sort them
            continue
        ours = tk.tree_structure(case.tree)
        assert tk.treedef_from_jax(theirs) == ours, case.name
        assert tk.treedef_to_jax(ours) == theirs, case.name
        assert tk.treedef_from_jax(ours) is ours and tk.treedef_to_jax(theirs) is theirs
        assert ours != theirs  # docs/jax.md: never equal across libraries; convert first


def test_proto_serialization_goes_through_treedef_to_jax() -> None:
    # docs/migration.md: treekit has no serialize_using_proto; convert first. The proto round
    # trip must give back the structure (jaxlib serializes lists, tuples, dicts and None only).
    tree = {"layers": [{"w": 1, "b": (2, None)}], "state": {"step": 3}}
    ours = tk.tree_structure(tree)
    proto = tk.treedef_to_jax(ours).serialize_using_proto()
    assert isinstance(proto, bytes) and proto
    theirs = jtu.PyTreeDef.deserialize_using_proto(jtu.default_registry, proto)
    assert tk.treedef_from_jax(theirs) == ours
    assert tk.tree_unflatten(tk.treedef_from_jax(theirs), [2, 1, 3]) == tree


def test_a_treedef_too_deep_for_jax_is_a_value_error_before_jax_recurses() -> None:
    # JAX's flattener recurses a C++ level per tree level and fails past the recursion limit
    # (a SystemError, leaving the interpreter's depth count broken): treekit says so first.
    code = (
        "import sys, treekit as tk\n"
        "deep = 0\n"
        "for _ in range(3 * sys.getrecursionlimit()): deep = [deep]\n"
        "try:\n"
        "    tk.treedef_to_jax(tk.tree_structure(deep))\n"
        "except ValueError as e:\n"
        "    assert 'levels deep' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
        "print(tk.treedef_to_jax(tk.tree_structure([[0] * 2] * 3)).num_leaves)\n"  # still works after
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # (stderr may hold the platform's own warnings; none of treekit's or Python's errors)
    assert out.returncode == 0 and out.stdout == "6\n" and "Error" not in out.stderr, out.stderr


def test_jax_treedefs_are_accepted_wherever_treedefs_are(nodes: None) -> None:
    tree = {"p": Point(1, [2, None]), "l": Layer(3, 4, "tanh")}
    theirs = jtu.tree_structure(tree)
    rebuilt = tk.tree_unflatten(theirs, [5, 6, 7, 8])
    assert jtu.tree_leaves(rebuilt) == [5, 6, 7, 8] and jtu.tree_structure(rebuilt) == theirs
    assert tk.tree.unflatten(theirs, [5, 6, 7, 8]).keys() == rebuilt.keys()
    assert tk.treedef_children(theirs) == tk.tree_structure(tree).children()
    assert tk.treedef_is_leaf(jtu.tree_structure(None)) and not tk.treedef_is_leaf(theirs)
    assert tk.treedef_is_strict_leaf(jtu.tree_structure(1))
    assert tk.treedef_tuple([theirs, tk.tree_structure(1)]) == tk.tree_structure((tree, 1))
    inner = jtu.tree_structure((0, None))
    assert tk.tree_structure([0, 0]).compose(inner) == tk.tree_structure([(0, None), (0, None)])
    outer, inner = jtu.tree_structure([0, 0]), jtu.tree_structure({"a": 0, "b": 0})
    rows = [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert tk.tree_transpose(outer, inner, rows) == jtu.tree_transpose(outer, inner, rows)
    assert tk.tree_transpose(outer, None, rows) == {"a": [1, 3], "b": [2, 4]}
    assert tk.tree_transpose(outer, tk.tree_structure({"a": 0, "b": 0}), rows) == {"a": [1, 3], "b": [2, 4]}


def test_trees_like_takes_a_jax_treedef() -> None:
    hypothesis = pytest.importorskip("hypothesis")
    from treekit.testing import trees_like

    quick = hypothesis.settings(max_examples=20, database=None, derandomize=True)
    found = hypothesis.find(trees_like(jtu.tree_structure({"w": [0, 0], "b": None})), lambda t: True, settings=quick)
    assert tk.tree_structure(found) == tk.tree_structure({"b": None, "w": [0, 0]})


def test_jax_treedefs_of_types_only_jax_knows_convert() -> None:
    tree = [OnlyJax(1, {"z": None}), jtu.Partial(max, 2)]
    ours = tk.treedef_from_jax(jtu.tree_structure(tree))
    assert ours == tk.tree_structure(tree)
    assert tk.tree_leaves(ours.unflatten([7, 8])) == [7, 8]


class Fussy:
    """Registered with JAX only; its unflatten rejects anything but numbers."""

    def __init__(self, x: Any) -> None:
        if not isinstance(x, (int, float)):
            raise TypeError("Fussy wants a number")
        self.x = x


jtu.register_pytree_node(Fussy, lambda f: ((f.x,), None), lambda _, c: Fussy(*c))


def test_jax_treedefs_that_cannot_be_rebuilt_raise_naming_the_argument() -> None:
    theirs = jtu.tree_structure([Fussy(1)])
    with pytest.raises(ValueError, match=r"^treedef: expected a treedef treekit can rebuild, got PyTreeDef\(\[Custom"):
        tk.tree_unflatten(theirs, [1])
    with pytest.raises(ValueError, match=r"^outer_treedef: "):
        tk.tree_transpose(theirs, None, [Fussy(1)])


# -- one class registered with both libraries; JAX registrations made later ------------------
class Both:
    def __init__(self, x: Any, y: Any = 0) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (self.x, self.y) == (other.x, other.y)  # type: ignore[attr-defined]


def _tk_register(cls: type) -> None:
    tk.register_pytree_with_keys(
        cls, lambda b: (((tk.GetAttrKey("x"), b.x), (tk.GetAttrKey("y"), b.y)), "tk"), lambda _, c: cls(*c)
    )


def _fresh(name: str) -> type:
    return type(name, (Both,), {})


def test_registered_with_jax_then_treekit_each_uses_its_own(registered: Callable[..., Any]) -> None:
    cls = _fresh("JaxFirst")
    jtu.register_pytree_node(cls, lambda b: ((b.x,), "jax"), lambda _, c: cls(c[0]))
    registered(cls, _tk_register)  # no error: JAX keeps its entry, treekit uses its own
    assert repr(tk.tree_structure(cls(1, 2))) == "PyTreeDef(CustomNode(JaxFirst[tk], [*, *]))"
    assert repr(jtu.tree_structure(cls(1, 2))) == "PyTreeDef(CustomNode(JaxFirst[jax], [*]))"
    assert jax.jit(lambda b: b.x + 1)(cls(jnp.ones(1), 5))[0] == 2.0


REGISTER_WITH_JAX = {
    "register_pytree_node": lambda cls: jtu.register_pytree_node(cls, lambda b: ((b.x,), b.y), lambda y, c: cls(*c, y)),
    "register_pytree_with_keys": lambda cls: jtu.register_pytree_with_keys(
        cls, lambda b: (((jtu.GetAttrKey("x"), b.x),), b.y), lambda y, c: cls(*c, y)
    ),
    "register_dataclass": lambda cls: jtu.register_dataclass(cls, data_fields=["x"], meta_fields=["y"]),
}


@pytest.mark.parametrize("how", sorted(REGISTER_WITH_JAX))
def test_registered_with_treekit_then_jax_each_uses_its_own(how: str, registered: Callable[..., Any]) -> None:
    cls = _fresh("TreekitFirst")
    registered(cls, _tk_register)
    REGISTER_WITH_JAX[how](cls)  # JAX alone would raise "Duplicate custom PyTreeDef type registration"
    node = cls(1, 7)
    assert tk.tree_leaves(node) == [1, 7] and tk.tree_structure(node).node_data() == (cls, "tk")
    assert jtu.tree_leaves(node) == [1]  # JAX's registration: y is node data there
    assert jtu.tree_map(lambda v: v * 10, node) == cls(10, 7)
    assert jax.jit(lambda b: b.x * 2)(cls(jnp.ones(1), 7))[0] == 2.0
    path = jtu.tree_leaves_with_path(node)[0][0]
    assert path == ((jtu.FlattenedIndexKey(0),) if how == "register_pytree_node" else (jtu.GetAttrKey("x"),))
    with pytest.raises(ValueError):  # registering it with JAX twice is still JAX's error
        REGISTER_WITH_JAX[how](cls)


def test_registered_with_jax_after_treekit_saw_it_as_a_leaf() -> None:
    cls = _fresh("SeenFirst")
    node = cls(1, 2)
    assert tk.tree_leaves([node]) == [node]
    jtu.register_pytree_node(cls, lambda b: ((b.x, b.y), None), lambda _, c: cls(*c))
    assert tk.tree_leaves([node]) == [1, 2]
    assert [tk.keystr(p) for p, _ in tk.tree_leaves_with_path([node])] == ["[0][<flat index 0>]", "[0][<flat index 1>]"]
    dc = dataclasses.make_dataclass("SeenDataclass", ["a", "b"])
    assert tk.tree_leaves(dc(1, 2)) == [dc(1, 2)]
    jtu.register_dataclass(dc, data_fields=["a"], meta_fields=["b"])
    assert tk.tree_leaves(dc(1, 2)) == [1]


def test_jax_registrations_are_watched_in_every_import_order() -> None:
    code = REGISTER + textwrap.dedent("""
        import jax.tree_util as jtu
        jtu.register_pytree_node(Point, lambda p: ((p.x,), p.y), lambda y, c: Point(c[0], y))
        class Late:
            def __init__(self, v): self.v = v
        print(tk.tree_leaves(Late(1)) != [1])
        jtu.register_pytree_node(Late, lambda o: ((o.v,), None), lambda _, c: Late(*c))
        print(tk.tree_leaves(Late(1)), tk.tree_leaves(Point(1, 2)), jtu.tree_leaves(Point(1, 2)))
    """)
    expected = ["True", "[1]", "[1,", "2]", "[1]"]
    assert _run(code).split() == expected  # treekit, then jax imported (through the import hook)
    assert _run("import jax\n" + code).split() == expected  # jax imported first


KNOWN_BEFORE = textwrap.dedent("""
    import dataclasses, sys
    import jax, jax.tree_util as jtu
    class Keyed:
        def __init__(self, a, b): self.a, self.b = a, b
    jtu.register_pytree_with_keys(
        Keyed, lambda k: (((jtu.GetAttrKey('a'), k.a), (jtu.DictKey('b'), k.b)), 'meta'),
        lambda meta, c: Keyed(*c))
    class Plain:
        def __init__(self, items): self.items = items
    jtu.register_pytree_node(Plain, lambda p: (p.items, len(p.items)), lambda n, c: Plain(list(c)))
    @dataclasses.dataclass
    class Data:
        x: object
        tag: str = 't'
    jtu.register_dataclass(Data, data_fields=['x'], meta_fields=['tag'])
    if FALLBACK:  # a jax without the registry treekit reads (not a dict): JAX asked one node at a time
        import collections
        module = sys.modules['jax._src.tree_util']
        module._registry = collections.UserDict(module._registry)
    import treekit as tk
    from treekit.core import _jax
    tree = {'k': Keyed([1, Plain([2, 3])], Data(4, 'u')), 'p': Plain([Keyed(5, 6)])}
    leaves, treedef = tk.tree_flatten(tree)
    paths = [tk.keystr(p) for p, _ in tk.tree_leaves_with_path(tree)]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)], paths
    assert leaves == jtu.tree_leaves(tree) and str(treedef) == str(jtu.tree_structure(tree))
    again = treedef.unflatten([x * 10 for x in leaves])
    assert jtu.tree_leaves(again) == [x * 10 for x in leaves]
    assert type(again['k'].b) is Data and again['k'].b.tag == 'u' and type(again['p']) is Plain
    print(sorted(e.flatten.keyed.__name__ for e in _jax._JAX_ONLY.values() if hasattr(e.flatten, 'keyed')))
""")


@pytest.mark.parametrize("fallback", [False, True], ids=["jax-registry", "one-node-at-a-time"])
def test_a_class_jax_knew_before_treekit_is_walked_as_jax_walks_it(fallback: bool) -> None:
    out = _run(f"FALLBACK = {fallback}\n" + KNOWN_BEFORE)
    # with jax's kept registry, each class's key paths come from jax's one-level flatten
    expected = ["['flatten_one_level_with_keys',", "'flatten_one_level_with_keys',", "'flatten_one_level_with_keys']"]
    assert out.split() == (["[]"] if fallback else expected)


def test_a_raising_flatten_function_under_jit_is_noted_with_its_class(registered: Any) -> None:
    # JAX's own walk (jit's) gives no key path; the note names the class and where to find the path
    class Broken:
        def __init__(self, x: Any) -> None:
            self.x = x

    def flatten(node: Broken) -> Any:
        raise KeyError("a field went missing")

    registered(Broken, lambda c: tk.register_pytree_node(c, flatten, lambda data, children: Broken(*children)))
    with pytest.raises(KeyError, match="a field went missing") as info:
        jax.jit(lambda tree: tree)({"params": [Broken(jnp.ones(2))]})
    name = Broken.__qualname__
    assert info.value.__notes__ == [
        f"raised while JAX flattened a {name} (registered with treekit; "
        "treekit.tree_flatten_with_path(tree) outside jit names its key path)"
    ]
    with pytest.raises(KeyError) as outside:
        tk.tree_flatten_with_path({"params": [Broken(1)]})
    assert outside.value.__notes__ == [f"tree['params'][0]: raised while flattening {name}"]
