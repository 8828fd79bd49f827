"""treekit.data.write_parquet with real pyarrow: the write-then-read law over specs, dims, rows,
row groups and input forms; the commit (an overwrite never mixes rows, a failed write commits
nothing, an unfinished one is refused); bad rows and specs named; hostile manifests."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from treekit import ShapeDtype, data  # noqa: E402
from treekit.checks import check_spec  # noqa: E402

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64"]
try:  # (jax's extra dtypes, stored as their bits)
    import ml_dtypes

    DTYPES += ["bfloat16", "float8_e4m3fn"]
except ImportError:  # pragma: no cover
    ml_dtypes = None


def _dtype(name: str) -> Any:
    return np.dtype(getattr(ml_dtypes, name)) if name in ("bfloat16", "float8_e4m3fn") else np.dtype(name)


def _values(rng: Any, shape: tuple[int, ...], name: str) -> Any:
    """Random values of ``name``'s dtype: any bit pattern (NaN payloads too) for the floats."""
    dtype = _dtype(name)
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    raw = rng.integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    """Specs of 1-3 leaves, some in a nested dict: fixed dims, a named one, a ragged one."""
    spec: dict[str, Any] = {}
    for i in range(draw(st.integers(1, 3))):
        dims: list[Any] = ["batch"]
        if draw(st.booleans()):
            dims.append(None)
        dims += draw(st.lists(st.sampled_from([1, 2, 3, "d"]), max_size=2))
        leaf = ShapeDtype(tuple(dims), draw(st.sampled_from(DTYPES)))
        if draw(st.booleans()):
            spec.setdefault("inner", {})[f"x{i}"] = leaf
        else:
            spec[f"x{i}"] = leaf
    return spec


def _leaves(spec: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], ShapeDtype]]:
    out = []
    for key in sorted(spec):
        value = spec[key]
        out += _leaves(value, (*prefix, key)) if isinstance(value, dict) else [((*prefix, key), value)]
    return out


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _examples(spec: dict[str, Any], rows: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    named = {"d": 2}
    out = []
    for _ in range(rows):
        example: dict[str, Any] = {}
        for path, leaf in _leaves(spec):
            shape = tuple(int(rng.integers(0, 4)) if d is None else named.get(d, d) for d in leaf.shape[1:])
            _put(example, path, _values(rng, shape, leaf.dtype))
        out.append(example)
    return out


def _as_chunks(spec: dict[str, Any], examples: list[Any], size: int) -> list[dict[str, Any]]:
    """The examples in chunks of ``size`` rows: arrays of rows, a ragged leaf a list of rows."""
    chunks = []
    for start in range(0, len(examples), size):
        part = examples[start : start + size]
        chunk: dict[str, Any] = {}
        for path, leaf in _leaves(spec):
            rows = [_get(e, path) for e in part]
            _put(chunk, path, rows if None in leaf.shape[1:] else np.stack(rows))
        chunks.append(chunk)
    return chunks


@given(spec=specs(), rows=st.integers(0, 25), group=st.one_of(st.none(), st.integers(1, 8)),
       chunked=st.sampled_from([0, 1, 7]), seed=st.integers(0, 2**16))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_write_then_read_gives_the_rows_back_bit_for_bit(
    tmp_path: Path, spec: dict[str, Any], rows: int, group: int | None, chunked: int, seed: int
) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path)) / "ds"
    examples = _examples(spec, rows, seed)
    source = _as_chunks(spec, examples, chunked) if chunked else examples
    assert data.write_parquet(folder, source, spec=spec, chunks=bool(chunked), row_group_size=group) == rows
    read = data.parquet(folder)
    chunks = list(read)
    assert sum(len(_get(c, _leaves(spec)[0][0])) for c in chunks) == rows
    for chunk in chunks:
        check_spec(chunk, read.spec)  # (every chunk is what the spec read back says)
    if group is not None:
        assert all(len(_get(c, _leaves(spec)[0][0])) <= group for c in chunks)
    for path, leaf in _leaves(spec):
        got = [row for c in chunks for row in _get(c, path)]
        assert all(row.dtype == _dtype(leaf.dtype) for row in got)
        if None not in leaf.shape[1:]:
            for row, example in zip(got, examples):
                assert row.tobytes() == _get(example, path).tobytes() and row.shape == _get(example, path).shape
            continue
        lengths = [n for c in chunks for n in _get(c, (*path[:-1], f"{path[-1]}_len"))]
        longest = max((len(_get(e, path)) for e in examples), default=0)
        for row, n, example in zip(got, lengths, examples):
            want = _get(example, path)
            assert n == len(want) and row.shape[0] == longest
            assert row[:n].tobytes() == want.tobytes() and not row[n:].view(np.uint8).any()


def test_a_treekit_source_is_written_and_an_unknown_dim_padded_as_asked(tmp_path: Path) -> None:
    pq.write_table(pa.table({"i": np.arange(10), "t": [list(range(k % 4)) for k in range(10)]}), tmp_path / "a.parquet")
    spec = {"i": ShapeDtype((None,), "int32"), "t": ShapeDtype((None, 3), "int64"), "t_len": ShapeDtype((None,), "i32")}
    assert data.write_parquet(tmp_path / "out", data.parquet(tmp_path / "a.parquet", pad={"t": 3}), spec=spec) == 10
    (chunk,) = data.parquet(tmp_path / "out")
    assert chunk["i"].dtype == np.int32 and chunk["i"].tolist() == list(range(10))
    assert chunk["t"].shape == (10, 3) and chunk["t"][3].tolist() == [0, 1, 2] and chunk["t_len"][3] == 3
    ragged = {"t": ShapeDtype(("batch", None), "int64")}
    data.write_parquet(tmp_path / "r", [{"t": np.arange(k)} for k in range(6)], spec=ragged)
    (chunk,) = data.parquet(tmp_path / "r", pad={"t": 2})  # (pad= over the longest row written)
    assert chunk["t"].tolist()[3] == [0, 1] and chunk["t_len"].tolist() == [0, 1, 2, 2, 2, 2]


def test_an_overwrite_shows_the_new_rows_alone_and_refuses_a_folder_of_other_files(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("batch",), "int64")}
    folder = tmp_path / "ds"
    data.write_parquet(folder, [{"x": i} for i in range(100)], spec=spec, row_group_size=10)
    with pytest.raises(FileExistsError, match=r"(?s)expected a folder that is missing or empty.*overwrite=True"):
        data.write_parquet(folder, [{"x": -1}], spec=spec)
    data.write_parquet(folder, [{"x": 1000 + i} for i in range(3)], spec=spec, overwrite=True)
    assert [int(v) for c in data.parquet(folder) for v in c["x"]] == [1000, 1001, 1002]
    assert len([n for n in os.listdir(folder) if n.endswith(".parquet")]) == 1  # (the old parts deleted)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"expected a folder of Parquet data to replace.*'notes.txt'"):
        data.write_parquet(mine, [{"x": 1}], spec=spec, overwrite=True)
    assert (mine / "notes.txt").read_text() == "keep me"


def test_a_failed_write_commits_nothing_and_keeps_the_dataset_it_would_replace(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("batch",), "int8")}
    folder = tmp_path / "ds"
    data.write_parquet(folder, [{"x": i} for i in range(5)], spec=spec)

    def rows() -> Any:
        for i in range(50):
            if i == 37:
                raise OSError("the source broke")
            yield {"x": i}

    with pytest.raises(OSError, match="the source broke"):
        data.write_parquet(folder, rows(), spec=spec, row_group_size=4, overwrite=True)
    assert [int(v) for c in data.parquet(folder) for v in c["x"]] == list(range(5))
    assert len([n for n in os.listdir(folder) if not n.startswith("_")]) == 1  # (its parts deleted)
    with pytest.raises(ValueError, match=r"example\['x'\] \(row 3\): expected values that fit int8, got 300"):
        data.write_parquet(tmp_path / "bad", [{"x": v} for v in (1, 2, 3, 300, 4)], spec=spec)
    assert not [n for n in os.listdir(tmp_path / "bad") if not n.startswith("_")]
    with pytest.raises(ValueError, match=r"example\['x'\] \(row 2\): expected the shape of row 0 \(\[\]\), got \[2\]"):
        data.write_parquet(tmp_path / "shape", [{"x": 1}, {"x": 2}, {"x": [1, 2]}], spec=spec)


def test_an_unfinished_write_is_refused_when_read(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("batch",), "int64")}
    data.write_parquet(tmp_path / "ds", [{"x": i} for i in range(5)], spec=spec)
    (tmp_path / "ds" / "_treekit_dataset.json").unlink()  # (as a write killed before its commit leaves it)
    with pytest.raises(ValueError, match=r"expected the folder of a committed dataset .*did not finish"):
        data.parquet(tmp_path / "ds")


@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        (b"\x1b]0;PWNED\x07", r"expected treekit's dataset manifest .*\\x1b\]0;PWNED\\x07"),
        (json.dumps({"format": "treekit.data", "version": 1, "files": [{"name": "../../etc/passwd", "rows": 1}],
                     "longest": {}, "sizes": {}}).encode(), r"expected treekit's dataset manifest"),
        (json.dumps({"format": "treekit.data", "version": 1, "files": [{"name": "gone.parquet", "rows": 1}],
                     "longest": {}, "sizes": {}}).encode(), r"lists 'gone.parquet', which is missing"),
    ],
)
def test_a_hostile_or_stale_manifest_is_refused_naming_it(tmp_path: Path, manifest: bytes, match: str) -> None:
    data.write_parquet(tmp_path / "ds", [{"x": 1}], spec={"x": ShapeDtype(("batch",), "int64")})
    (tmp_path / "ds" / "_treekit_dataset.json").write_bytes(manifest)
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        data.parquet(tmp_path / "ds")


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"x": ShapeDtype(("batch",), "complex64")}, r"spec\['x'\]: expected a dtype Parquet can hold"),
        ({"x": ShapeDtype(("batch", 2, None), "f32")}, r"spec\['x'\]: expected dims after the rows .*None at axis 2"),
        ({"x": ShapeDtype(("batch", 0), "f32")}, r"spec\['x'\]: expected dims after the rows that are ints >= 1"),
        ({"x": ShapeDtype((3,), "f32")}, r"spec\['x'\]: expected a shape whose first dim is the rows"),
        ({"a.b": ShapeDtype(("batch",), "f32")}, r"expected keys without '.'"),
        ({"t": ShapeDtype(("batch", None), "f32"), "t_len": ShapeDtype(("batch",), "i32")}, r"\['t_len'\] twice"),
    ],
)
def test_a_spec_parquet_cannot_hold_so_is_refused_naming_the_leaf(tmp_path: Path, spec: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        data.write_parquet(tmp_path / "ds", [], spec=spec)
    assert not (tmp_path / "ds").exists()


def test_pyarrow_and_spark_style_readers_see_plain_columns(tmp_path: Path) -> None:
    spec = {"image": ShapeDtype(("batch", 2, 3), "uint8"), "tokens": ShapeDtype(("batch", None), "int32")}
    examples = [{"image": np.full((2, 3), i, np.uint8), "tokens": np.arange(i)} for i in range(4)]
    data.write_parquet(tmp_path / "ds", examples, spec=spec)
    table = pq.read_table(tmp_path / "ds")  # (the manifest is a _-prefixed file: not read)
    assert table.column("image").to_pylist()[1] == [1] * 6  # (fixed dims: one flat list a row)
    assert table.column("tokens").to_pylist()[3] == [0, 1, 2]
    assert json.loads(table.schema.metadata[b"treekit.spec"])["columns"][0]["shape"] == ["batch", 2, 3]


def test_parts_outside_a_manifest_are_refused_even_beside_plain_parquet(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("batch",), "int64")}
    data.write_parquet(tmp_path / "ds", [{"x": 100}], spec=spec)
    (part,) = (tmp_path / "ds").glob("part-*.parquet")
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"x": np.arange(3)}), plain / "a.parquet")
    os.replace(part, plain / part.name)  # (as an overwrite killed before its commit leaves it)
    with pytest.raises(ValueError, match=r"expected the folder of a committed dataset"):
        data.parquet(plain)


def test_an_overwrite_keeps_another_writes_uncommitted_parts_and_refuses_hidden_files(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("batch",), "int64")}
    data.write_parquet(tmp_path / "other", [{"x": 7}], spec=spec)
    (foreign,) = (tmp_path / "other").glob("part-*.parquet")
    folder = tmp_path / "ds"
    data.write_parquet(folder, [{"x": i} for i in range(4)], spec=spec, row_group_size=2)
    (folder / foreign.name).write_bytes(foreign.read_bytes())  # (a write beside this one, not yet committed)
    data.write_parquet(folder, [{"x": 9}], spec=spec, overwrite=True)
    assert (folder / foreign.name).exists() and [int(v) for c in data.parquet(folder) for v in c["x"]] == [9]
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / ".env").write_text("SECRET=1")
    (notes / "_draft.md").write_text("keep")
    with pytest.raises(FileExistsError, match=r"expected a folder of Parquet data to replace"):
        data.write_parquet(notes, [{"x": 1}], spec=spec, overwrite=True)
    assert (notes / ".env").exists() and (notes / "_draft.md").exists()


def test_two_writers_into_one_new_folder_commit_one_and_refuse_the_other(tmp_path: Path) -> None:
    import threading

    spec = {"x": ShapeDtype(("batch",), "int64")}
    folder = tmp_path / "ds"
    go, started, errors = threading.Event(), threading.Event(), []

    def late() -> Any:
        started.set()
        go.wait(30)
        yield {"x": 1}

    def first() -> None:
        try:
            data.write_parquet(folder, late(), spec=spec)
        except FileExistsError as exc:
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    started.wait(30)
    assert data.write_parquet(folder, [{"x": 2}, {"x": 3}], spec=spec) == 2
    go.set()
    thread.join(30)
    assert len(errors) == 1 and "got one committed first" in str(errors[0])
    assert [int(v) for c in data.parquet(folder) for v in c["x"]] == [2, 3]
    assert len(list(folder.glob("part-*.parquet"))) == 1  # (the loser's part deleted)


def test_a_crafted_manifest_or_spec_is_refused_before_a_row_is_read(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("batch",), "int64"), "t": ShapeDtype(("batch", None), "int32")}
    data.write_parquet(tmp_path / "ds", [{"x": i, "t": np.arange(i)} for i in range(4)], spec=spec)
    manifest = tmp_path / "ds" / "_treekit_dataset.json"
    body = json.loads(manifest.read_text())
    for longest, match in ((10**12, r"expected the longest row of 't' among the values"), (1, r"at most 1")):
        manifest.write_text(json.dumps({**body, "longest": {"t": longest}}))
        with pytest.raises(ValueError, match=match):
            list(data.parquet(tmp_path / "ds"))
    manifest.write_text(json.dumps(body))
    (part,) = (tmp_path / "ds").glob("part-*.parquet")
    table = pq.read_table(part)
    lying = table.schema.metadata[b"treekit.spec"].replace(b'"dtype": "int64"', b'"dtype": "bfloat16"')
    pq.write_table(table.replace_schema_metadata({b"treekit.spec": lying}), part)
    with pytest.raises(ValueError, match=r"column 'x': expected the type a write gives bfloat16"):
        data.parquet(tmp_path / "ds")


def test_columns_of_a_written_dataset_are_read_apart(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("b", 2, 2), "f32"), "t": ShapeDtype(("b", None), "i32"), "y": ShapeDtype(("b",), "u8")}
    rows = [{"x": np.full((2, 2), i, np.float32), "t": np.arange(i), "y": i} for i in range(3)]
    data.write_parquet(tmp_path / "ds", rows, spec=spec)
    (chunk,) = data.parquet(tmp_path / "ds", columns=["y"])
    assert list(chunk) == ["y"] and chunk["y"].tolist() == [0, 1, 2]
    source = data.parquet(tmp_path / "ds", columns=["t"])
    assert sorted(source.spec) == ["t", "t_len"] and next(iter(source))["t"].shape == (3, 2)


def test_rows_are_named_and_inexact_casts_refused(tmp_path: Path) -> None:
    spec = {"x": ShapeDtype(("b",), "float64"), "y": ShapeDtype(("b",), "int64")}
    with pytest.raises(ValueError, match=r"example\['x'\] \(row 1\): expected values that fit float64"):
        data.write_parquet(tmp_path / "a", [{"x": 1, "y": 1}, {"x": 2**53 + 1, "y": 1}], spec=spec)
    with pytest.raises(ValueError, match=r"example \(row 1\): .*missing 'y'"):
        data.write_parquet(tmp_path / "b", [{"x": 1.0, "y": 1}, {"x": 2.0}], spec=spec)
    with pytest.raises(TypeError, match=r"expected a dict of ShapeDtype .*got one ShapeDtype"):
        data.write_parquet(tmp_path / "c", [1], spec=ShapeDtype(("b",), "i64"))
