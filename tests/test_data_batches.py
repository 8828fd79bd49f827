"""treekit.data.batches: laws of rebatching over any chunk and batch sizes, exact resumption from
a JSON round-tripped state (shuffle windows and skipped rows included), casts, spec errors."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

np = pytest.importorskip("numpy")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from treekit import ShapeDtype, SpecMismatchError, data  # noqa: E402


def chunked(sizes: list[int]) -> data.Source:
    """Chunks of ``sizes`` rows: ``{'i': row number, 'x': [row, -row]}``."""
    starts = np.cumsum([0, *sizes])
    rows = [np.arange(a, b) for a, b in itertools.pairwise(starts)]
    chunks = [{"i": i, "x": np.stack([i, -i], 1)} for i in rows]
    return data.from_iterable(chunks, chunks=True)


sizes = st.lists(st.integers(1, 9), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(sizes=sizes, batch=st.integers(1, 12), drop=st.booleans())
def test_rebatching_keeps_every_row_in_order_in_batches_of_the_size(sizes: list[int], batch: int, drop: bool) -> None:
    out = list(data.batches(chunked(sizes), batch, drop_remainder=drop))
    total = sum(sizes)
    rows = [int(i) for b in out for i in b["i"]]
    kept = total - total % batch if drop else total
    assert rows == list(range(kept))
    assert all(len(b["i"]) == batch for b in out[: total // batch])
    assert all((b["x"][:, 0] == b["i"]).all() for b in out)


@settings(max_examples=40, deadline=None)
@given(sizes=sizes, batch=st.integers(1, 12))
def test_pad_remainder_pads_the_last_batch_and_masks_it(sizes: list[int], batch: int) -> None:
    out = list(data.batches(chunked(sizes), batch, pad_remainder=True))
    total = sum(sizes)
    assert all(len(b["i"]) == batch and b["mask"].dtype == bool for b in out)
    assert [int(i) for b in out for i, m in zip(b["i"], b["mask"]) if m] == list(range(total))
    assert sum(int(b["mask"].sum()) for b in out) == total


@settings(max_examples=40, deadline=None)
@given(sizes=sizes, batch=st.integers(1, 6), cut=st.integers(0, 20), window=st.sampled_from([0, 5, 13]))
def test_a_state_resumes_with_exactly_the_next_batch(sizes: list[int], batch: int, cut: int, window: int) -> None:
    whole = [b["i"].tolist() for b in data.batches(chunked(sizes), batch, shuffle_buffer=window, seed=4)]
    first = data.batches(chunked(sizes), batch, shuffle_buffer=window, seed=4)
    taken = [next(first)["i"].tolist() for _ in range(min(cut, len(whole)))]
    state = json.loads(json.dumps(first.get_state()))
    assert state["batches"] == len(taken)
    again = data.batches(chunked(sizes), batch, shuffle_buffer=window, seed=4)
    again.set_state(state)
    assert taken + [b["i"].tolist() for b in again] == whole


def test_shuffle_windows_mix_rows_deterministically() -> None:
    rows = [b["i"].tolist() for b in data.batches(chunked([10] * 10), 10, shuffle_buffer=50, seed=1)]
    assert rows == [b["i"].tolist() for b in data.batches(chunked([10] * 10), 10, shuffle_buffer=50, seed=1)]
    assert rows != [b["i"].tolist() for b in data.batches(chunked([10] * 10), 10, shuffle_buffer=50, seed=2)]
    flat = [i for b in rows for i in b]
    assert sorted(flat[:50]) == list(range(50)) and sorted(flat[50:]) == list(range(50, 100)) and flat != sorted(flat)


def test_safe_casts_cast_where_values_fit() -> None:
    chunks = [{"u": np.arange(4, dtype=np.uint8), "w": np.arange(4, dtype=np.int64), "f": np.linspace(0, 1, 4)}]
    spec = {"u": ShapeDtype(("b",), "i32"), "w": ShapeDtype(("b",), "i32"), "f": ShapeDtype(("b",), "f32")}
    (out,) = data.batches(data.from_iterable(chunks, chunks=True), 4, spec=spec)
    assert (out["u"].dtype, out["w"].dtype, out["f"].dtype) == (np.int32, np.int32, np.float32)
    assert out["w"].tolist() == [0, 1, 2, 3]


def test_a_value_that_does_not_fit_is_a_bad_row_raised_or_skipped() -> None:
    chunks = [{"w": np.array([1, 2**40, 3, -(2**40)], np.int64), "i": np.arange(4)}]
    spec = {"w": ShapeDtype(("b",), "i32"), "i": ShapeDtype(("b",), "i64")}
    with pytest.raises(ValueError, match=r"chunk\['w'\] \(chunk 0 rows 0-3\): expected values that fit int32, got rows "
                                         r"1 \(1099511627776\), 3 \(-1099511627776\) that do not"):
        list(data.batches(data.from_iterable(chunks, chunks=True), 2, spec=spec))
    it = data.batches(data.from_iterable(chunks, chunks=True), 2, spec=spec, on_bad_row="skip")
    (out,) = list(it)
    assert out["w"].tolist() == [1, 3] and out["i"].tolist() == [0, 2] and it.get_state()["skipped"] == 2
    unsafe = list(data.batches(data.from_iterable(chunks, chunks=True), 4, spec=spec, cast="unsafe"))
    assert unsafe[0]["w"].dtype == np.int32


def test_skipped_rows_are_counted_once_across_a_resume() -> None:
    chunks = [{"w": np.array([1, 2**40, 3, 4, 5, 2**40], np.int64)}, {"w": np.array([7, 2**40, 9, 10])}]
    spec = {"w": ShapeDtype(("b",), "i32")}

    def make() -> data.Batches:
        return data.batches(data.from_iterable(chunks, chunks=True), 2, spec=spec, on_bad_row="skip")

    whole = make()
    rows = [b["w"].tolist() for b in whole]
    assert rows == [[1, 3], [4, 5], [7, 9]] and whole.get_state()["skipped"] == 3
    first = make()
    next(first)
    again = make()
    again.set_state(json.loads(json.dumps(first.get_state())))
    assert [b["w"].tolist() for b in again] == rows[1:] and again.get_state()["skipped"] == 3


def test_a_batch_that_misses_the_spec_names_its_number_rows_and_key_path() -> None:
    chunks = [{"x": np.zeros((4, 3), np.float32)}, {"x": np.zeros((4, 3), np.float64) + 1e300}]
    spec = {"x": ShapeDtype(("batch", 3), "f32")}
    it = data.batches(data.from_iterable(chunks, chunks=True), 3, spec=spec, cast="none")
    next(it)
    with pytest.raises(SpecMismatchError) as err:
        next(it)
    assert str(err.value).startswith("batch 1 (rows from chunk 0 row 3; chunk 1 rows 0-1): ")
    assert "tree['x']: expected f32[batch,3], got f64[3,3] (dtype float64, not float32)" in str(err.value)


def test_chunks_with_rows_of_another_shape_are_named() -> None:
    chunks = [{"x": np.zeros((4, 3))}, {"x": np.zeros((4, 2))}]
    with pytest.raises(ValueError, match=r"chunk\['x'\] \(chunk 1\): expected rows of shape \(3,\), as in chunk 0, "):
        list(data.batches(data.from_iterable(chunks, chunks=True), 3))


@pytest.mark.parametrize("window", [0, 10])
def test_chunks_of_another_structure_are_named(window: int) -> None:
    chunks = [{"x": np.zeros(2)}, {"y": np.zeros(2)}]
    with pytest.raises(ValueError, match=r"chunk \(chunk 1\): expected the structure of the chunks before"):
        list(data.batches(data.from_iterable(chunks, chunks=True), 3, shuffle_buffer=window))


def test_bad_arguments_are_named() -> None:
    source = chunked([3])
    for kwargs, message in [
        ({"batch_size": 0}, "batch_size: expected an int >= 1, got 0"),
        ({"batch_size": 2, "cast": "maybe"}, "cast: expected one of"),
        ({"batch_size": 2, "on_bad_row": "ignore"}, "on_bad_row: expected 'raise' or 'skip'"),
        ({"batch_size": 2, "shuffle_buffer": -1}, "shuffle_buffer: expected an int >= 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            data.batches(source, **kwargs)
    with pytest.raises(TypeError, match=r"source: expected a treekit\.data source, got list"):
        data.batches([1, 2], 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pad_remainder: expected batches that are dicts without a 'mask' key"):
        list(data.batches(data.from_iterable([(np.zeros(3),)], chunks=True), 2, pad_remainder=True))


def _parquet_resume(tmp_path: Any, seed: int, cut: int) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"i": np.arange(300)}), tmp_path / "a.parquet", row_group_size=37)

    def make() -> data.Batches:
        return data.batches(data.parquet(tmp_path, seed=seed, num_epochs=2), 32, shuffle_buffer=70, seed=seed)

    whole = [b["i"].tolist() for b in make()]
    counts = np.bincount([i for b in whole for i in b], minlength=300)
    assert len(whole) == 600 // 32 and counts.max() == 2 and counts.sum() == 600 - 600 % 32
    first = make()
    for _ in range(cut):
        next(first)
    again = make()
    again.set_state(json.loads(json.dumps(first.get_state())))
    assert [b["i"].tolist() for b in again] == whole[cut:]


@pytest.mark.parametrize("cut", [0, 4, 9, 17])
def test_parquet_batches_resume_exactly_across_epochs(tmp_path: Any, cut: int) -> None:
    _parquet_resume(tmp_path, seed=7, cut=cut)


class _Examples:
    """Examples ``{'i': k, 'w': k % 100}``, re-iterable; example ``bad`` holds 1000 in ``w``
    (``how='value'``: int8 cannot hold it) or makes the iteration raise (``how='source'``)."""

    def __init__(self, n: int, bad: int | None, how: str) -> None:
        self.n, self.bad, self.how = n, bad, how

    def __iter__(self) -> Any:
        for k in range(self.n):
            if k == self.bad and self.how == "source":
                raise OSError(f"the source broke at example {k}")
            yield {"i": np.int64(k), "w": np.int64(1000 if k == self.bad else k % 100)}


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 700), where=st.floats(0, 1, exclude_max=True), batch=st.integers(1, 300),
    window=st.sampled_from([0, 7, 100, 300]), how=st.sampled_from(["value", "source"]),
)  # fmt: skip
def test_an_error_is_raised_at_the_batch_that_holds_it(n: int, where: float, batch: int, window: int, how: str) -> None:
    # every batch before it comes whole and in order; the state then resumes at that batch
    bad = int(where * n)
    spec = {"i": ShapeDtype(("b",), "i64"), "w": ShapeDtype(("b",), "i8")}

    def pipeline(examples: _Examples) -> data.Batches:
        return data.batches(data.from_iterable(examples), batch, spec=spec, shuffle_buffer=window, seed=3)

    reference = [b["i"].tolist() for b in pipeline(_Examples(n, None, how))]
    good = (bad // window * window if window else bad) // batch  # batches of rows before the bad one's window
    it = pipeline(_Examples(n, bad, how))
    got = [next(it)["i"].tolist() for _ in range(good)]
    assert got == reference[:good]
    with pytest.raises((ValueError, OSError), match=r"expected values that fit int8|the source broke at example"):
        next(it)
    state = it.get_state()
    assert state["batches"] == good
    again = pipeline(_Examples(n, None, how))  # (the row fixed)
    again.set_state(json.loads(json.dumps(state)))
    assert [b["i"].tolist() for b in again] == reference[good:]


def test_a_bad_parquet_row_is_raised_at_its_batch_not_at_its_row_group(tmp_path: Any) -> None:
    # the case: row 4400 of 10,000 holds 1000 under an int8 spec, row groups of 1000,
    # batches of 256: batches 0-16 come (17 holds rows 4352-4607), then the error
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    values = np.arange(10_000) % 100
    values[4400] = 1000
    pq.write_table(pa.table({"i": np.arange(10_000), "v": values}), tmp_path / "part-0.parquet", row_group_size=1000)
    spec = {"i": ShapeDtype(("b",), "i64"), "v": ShapeDtype(("b",), "i8")}
    it = data.batches(data.parquet(tmp_path), 256, spec=spec)
    got = [next(it)["i"][0] for _ in range(17)]
    assert got == [256 * k for k in range(17)]
    with pytest.raises(ValueError, match=r"got rows 400 \(1000\)"):
        next(it)
    assert it.get_state()["batches"] == 17
