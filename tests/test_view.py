"""treekit.view: foldable HTML of a tree, checked as text and, where Chromium is installed, as a
browser renders it (``chromium --headless --dump-dom``; skipped where it is missing)."""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import trees

import treekit
from treekit import keystr, tree_leaves_with_path, view

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _Text(HTMLParser):
    """The page's text and its tags, as a browser would read them (no script runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

        self.styling = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.styling = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self.styling = False

    def handle_data(self, data: str) -> None:
        if not self.styling:  # (the style sheet is no text a reader sees)
            self.text.append(data)


def _read(fragment: str) -> _Text:
    parser = _Text()
    parser.feed(fragment)
    return parser


def _model() -> dict[str, Any]:
    return {
        "params": {"dense": {"kernel": np.ones((4, 3), np.float32), "bias": np.zeros(3, np.float32)}},
        "opt": {"step": 7, "mu": [np.array([np.nan, 1.0, np.inf], np.float32)]},
        "name": "mlp",
    }


def test_every_path_shape_and_total_is_in_the_text() -> None:
    tree = _model()
    page = _read(view(tree)._repr_html_())
    text = "".join(page.text)
    for path, _ in tree_leaves_with_path(tree):
        assert keystr(path) in text
    assert "f32[4,3]" in text and "f32[3]" in text
    assert "total: 3 arrays · 18 params · 72 B" in text
    assert "not counted (not arrays): ['name'] (str), ['opt']['step'] (int)" in text
    assert "1 NaN" in text and "1 inf" in text
    assert page.tags.count("details") == 5  # the root, params, dense, opt, mu: the nodes
    assert "script" not in page.tags


def test_hostile_keys_and_leaves_render_as_text() -> None:
    evil = "<script>alert('x')</script> & \"quotes\""
    tree = {evil: evil * 20, "ok": [evil]}
    fragment = view(tree)._repr_html_()
    page = _read(fragment)
    assert "script" not in page.tags
    text = "".join(page.text)
    assert html.unescape(repr(evil)[:20]) in text
    assert "<script>" not in fragment


def test_big_trees_fold_into_more_rows_and_stay_small() -> None:
    tree = {"layers": [{"w": np.ones(2, np.float32)} for _ in range(100_000)]}
    start = time.perf_counter()
    fragment = view(tree, stats=False)._repr_html_()
    seconds = time.perf_counter() - start
    assert len(fragment.encode("utf-8")) < 5_000_000
    assert "... 99,900 more: 99,900 arrays · 199,800 params" in fragment
    print(f"100,000 leaves: {seconds:.2f} s, {len(fragment):,} bytes")  # (measured, not asserted)


def test_max_rows_leaves_later_nodes_folded_with_their_subtotals() -> None:
    tree = [{"w": [np.ones(1)] * 3} for _ in range(20)]
    fragment = view(tree, max_rows=10)._repr_html_()
    assert "(not drawn: view() this subtree)" in fragment
    assert fragment.count("<details") >= 21  # every node of the first level still has its row


def test_depth_opens_only_the_top_levels() -> None:
    tree = {"a": {"b": {"c": np.ones(2)}}}
    assert view(tree, depth=1)._repr_html_().count("<details open>") == 1
    assert view(tree)._repr_html_().count("<details open>") == 3


def test_a_deep_tree_renders_without_recursion() -> None:
    tree: Any = 1.0
    for _ in range(3 * sys.getrecursionlimit()):
        tree = [tree]
    fragment = view(tree, max_rows=100_000)._repr_html_()
    assert fragment.count("<details") == 3 * sys.getrecursionlimit()


def test_str_is_the_summary_and_bad_arguments_raise() -> None:
    tree = _model()
    assert str(view(tree)) == treekit.summary(tree, stats=True)
    for kwargs in ({"depth": -1}, {"max_children": 0}, {"max_rows": 1.5}):
        with pytest.raises(ValueError, match="expected"):
            view(tree, **kwargs)


def test_a_sharded_tree_shows_specs_and_bytes_per_device() -> None:
    pytest.importorskip("jax")
    from jax.sharding import PartitionSpec as P

    tree = {"w": treekit.ShapeDtype((8, 4), "f32")}
    text = "".join(_read(view(tree, shardings={"w": P("model")}, mesh={"model": 4})._repr_html_()).text)
    assert "P('model')" in text and "32 B per device" in text


def test_ipython_shows_the_html() -> None:
    formatters = pytest.importorskip("IPython.core.formatters")
    shown = formatters.HTMLFormatter()(view(_model()))
    assert shown is not None and "<details" in shown


def _dump_dom(name: str) -> str:
    """The DOM headless Chromium builds from the page ``name``."""
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"file://{name}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120).stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_saved_page_and_a_diff(tmp_path: Any) -> None:
    evil = "<img src=x onerror=alert(1)>"
    tree = {**_model(), evil: "&amp; " + evil}
    name = os.path.join(str(tmp_path), "tree.html")
    view(tree).save_html(name)
    dom = _dump_dom(name)
    page = _read(dom)
    text = "".join(page.text)
    assert "img" not in page.tags and "script" not in page.tags  # the keys stayed text
    assert evil in text and "&amp; " in text
    for path, _ in tree_leaves_with_path(tree):
        assert keystr(path) in text
    assert page.tags.count("details") >= 5 and "summary" in page.tags
    diff = treekit.tree_diff(*_diff_pair())
    with open(name, "w", encoding="utf-8") as f:
        f.write(f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{diff._repr_html_()}</body></html>')
    dom = _dump_dom(name)
    text = "".join(_read(dom).text)
    for d in diff:
        assert keystr(d.path) in text and d.line("b").split(": ", 1)[1] in text


def test_summary_and_format_tree_are_their_strings_and_show_as_html() -> None:
    import pickle

    tree = {"<b>": np.ones((2, 2), np.float32), "w": [1, 2]}
    for made in (treekit.summary(tree), treekit.summary(tree, format="markdown"), treekit.format_tree(tree)):
        assert isinstance(made, str) and str(made) == made and pickle.loads(pickle.dumps(made)) == made
        page = _read(made._repr_html_())
        assert "b" not in page.tags  # the key stayed text
        assert "<b>" in "".join(page.text)
    table = _read(treekit.summary(tree)._repr_html_())
    assert table.tags.count("tr") == 5 and table.tags.count("th") == 5  # header, 3 leaves, total
    assert "".join(_read(treekit.format_tree(tree)._repr_html_()).text).strip() == treekit.format_tree(tree)


def _diff_pair() -> tuple[Any, Any]:
    a = {"dense": {"w": np.zeros((3, 4)), "b": np.zeros(4)}, "out": [np.zeros(2)], "step": 1}
    a["layers"] = [{"k": np.ones(3)} for _ in range(30)]
    b = {"dense": {"w": np.zeros((4, 4)), "bias": np.zeros(4)}, "out": (np.zeros(2),), "step": 2.0}
    b["layers"] = [{"k": np.ones(3)} for _ in range(30)]
    b["layers"][3]["k"] = np.ones(3, np.float32)
    return a, b


def test_a_diff_shows_both_trees_opened_along_the_differences() -> None:
    a, b = _diff_pair()
    diff = treekit.tree_diff(a, b)
    fragment = diff._repr_html_()
    page = _read(fragment)
    text = "".join(page.text)
    for d in diff:
        assert keystr(d.path) in text
        assert d.line("b").split(": ", 1)[1] in text  # its own words, both sides
    assert "f64[3,4]" in text and "f64[4,4]" in text and "f32[3]" in text
    assert "no such key" in text and "float 2.0" in text
    assert "... 24 more the same" in text  # the layers that do not differ, folded into one row
    assert fragment.count("tk-half tk-changed") == 8 and "tk-half tk-gone" in fragment and "tk-half tk-new" in fragment
    assert fragment.count("<details open>") == 4  # the root, dense, layers, layers[3]: nothing else opens
    assert page.tags.count("details") == 4 and "script" not in page.tags


def test_a_diff_without_trees_draws_its_records_and_no_differences_says_so() -> None:
    a, b = _diff_pair()
    diff = treekit.tree_diff(a, b)
    alone = treekit.TreeDiff(diff)
    text = "".join(_read(alone._repr_html_()).text)
    for d in diff:
        assert keystr(d.path) in text and d.line("b").split(": ", 1)[1] in text
    assert "no differences" in treekit.tree_diff(a, a)._repr_html_()
    import pickle

    again = pickle.loads(pickle.dumps(diff))
    assert str(again) == str(diff) and again._trees is None  # (the trees stay behind)


def test_a_diff_escapes_keys_and_leaves_and_caps_its_rows() -> None:
    evil = "<script>alert('x')</script>"
    fragment = treekit.tree_diff({evil: 1, "x": evil}, {evil: 2.0, "x": "&"}, values=True)._repr_html_()
    page = _read(fragment)
    assert "script" not in page.tags and "<script>" not in fragment
    assert evil in "".join(page.text)
    many = treekit.tree_diff(list(range(5000)), [float(i) for i in range(5000)])
    capped = many._repr_html_()
    assert "... 3,001 more differing paths not drawn" in capped  # (the root's row is one of 2,000)
    assert len(capped) < 2_000_000


def test_a_deep_diff_renders_without_recursion() -> None:
    a: Any = 1
    b: Any = 2.0
    deep = 1500  # (within the 2,000 rows drawn) deeper than the recursion limit set below
    for _ in range(deep):
        a, b = [a], [b]
    limit = sys.getrecursionlimit()  # platforms set their own (a TPU machine's is 3,000)
    sys.setrecursionlimit(1000)
    try:
        fragment = treekit.tree_diff(a, b)._repr_html_()
    finally:
        sys.setrecursionlimit(limit)
    assert fragment.count("<details open>") == deep


@settings(max_examples=60, deadline=None)
@given(trees(custom=False), trees(custom=False))
def test_every_difference_is_drawn_with_its_words(a: Any, b: Any) -> None:
    diff = treekit.tree_diff(a, b, values=True)
    fragment = diff._repr_html_()
    page = _read(fragment)
    text = "".join(page.text)
    for d in diff:
        assert keystr(d.path) in text
        assert html.unescape(html.escape(d.line("b").split(": ", 1)[1])) in text
    assert fragment.count("<details") == fragment.count("</details>")
    rows = sum(fragment.count(f"tk-half {c}") for c in ("tk-changed", "tk-gone", "tk-new")) // 2
    assert len({d.path for d in diff}) == rows


def test_a_mismatch_error_shows_the_path_and_both_sides() -> None:
    evil = "<b>"
    with pytest.raises(treekit.StructureMismatchError) as info:
        treekit.tree_map(lambda x, y: x, {evil: {"w": 1, "b": 2}}, {evil: {"w": 1, "bias": 2}})
    fragment = info.value._repr_html_()
    page = _read(fragment)
    text = "".join(page.text)
    assert "b" not in page.tags and f"['{evil}']" in text
    assert info.value.expected in text and info.value.got in text and "missing 'b'; extra 'bias'" in text
    assert "rest[0]" in text and fragment.count("tk-half tk-changed") == 2
