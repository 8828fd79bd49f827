"""treekit.files: where a path or URL points (a URL is never a local path), and the calls the
checkpoint and data layers make, on the local disk, fsspec's memory:// and an S3-compatible
server the tests start (tests/object_store.py)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from treekit.files import (
    MissingExtra,
    find,
    glob,
    listdir,
    local_copy,
    locate,
    makedirs,
    matches,
    open_read,
    read_bytes,
    read_into,
    remove,
    remove_tree,
    write_bytes,
    writing,
)

fsspec = pytest.importorskip("fsspec")


@pytest.fixture(params=["local", "memory", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh folder: local, on fsspec's memory://, or in a bucket of the tests' S3 server."""
    if request.param == "local":
        return str(tmp_path)
    if request.param == "memory":
        return f"memory://treekit-{uuid.uuid4().hex[:12]}"
    return str(request.getfixturevalue("bucket")) + "/run"


@pytest.mark.parametrize("url", ["nosuchscheme://bucket/run", "S4://bucket/ckpt.safetensors"])
def test_a_url_nothing_opens_is_a_value_error_naming_its_scheme(url: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=f"{url}: expected a local path or a URL fsspec opens, got scheme") as info:
        locate(url)
    assert "jax-treekit[remote]" in str(info.value)
    assert os.listdir(tmp_path) == []  # (never a local folder named 'nosuchscheme:')


def test_a_missing_package_is_an_import_error_and_a_value_error() -> None:
    # oci:// needs ocifs (fsspec knows the scheme): where it is not installed, the error names it
    try:
        import ocifs  # noqa: F401
    except ImportError:
        with pytest.raises(MissingExtra, match=r"oci://b/x: opening oci:// URLs needs a package not installed \("):
            locate("oci://b/x")
    assert issubclass(MissingExtra, ImportError) and issubclass(MissingExtra, ValueError)


def test_local_paths_and_file_urls_stay_local(tmp_path: Path) -> None:
    assert locate(tmp_path).local and locate(str(tmp_path)).path == str(tmp_path)
    assert locate(f"file://{tmp_path}").path == str(tmp_path)
    assert locate("relative/dir").path == "relative/dir"
    with pytest.raises(ValueError, match="storage_options: expected a URL"):
        locate("relative/dir", storage_options={"anon": True})
    with pytest.raises(TypeError, match="filesystem: expected a pyarrow or fsspec filesystem, got int"):
        locate("x", filesystem=3)


def test_a_filesystem_given_is_used_and_a_url_of_another_scheme_refused() -> None:
    memory = fsspec.filesystem("memory")
    where = locate("/given/x.bin", filesystem=memory)
    write_bytes(where, b"abc")
    assert read_bytes(locate("memory://given/x.bin"), 10) == b"abc"
    with pytest.raises(ValueError, match="expected a path on filesystem MemoryFileSystem, got URL 's3://b/x'"):
        locate("s3://b/x", filesystem=memory)


def test_a_pyarrow_filesystem_given_is_read_through_fsspec(tmp_path: Path) -> None:
    pafs = pytest.importorskip("pyarrow.fs")
    (tmp_path / "f.bin").write_bytes(b"0123456789")
    where = locate(str(tmp_path / "f.bin"), filesystem=pafs.SubTreeFileSystem("/", pafs.LocalFileSystem()))
    assert not where.local and where.arrow is not None
    with open_read(where) as f:
        f.seek(3)
        assert f.read(4) == b"3456"


def test_write_read_list_and_delete(root: str) -> None:
    top = locate(root)
    makedirs(top.join("a", "c"))  # (remote: nothing; a key's prefix is its folder)
    with writing(top.join("a", "x.bin")) as f:
        f.write(b"x" * 100_000)
    write_bytes(top.join("a", "_SUCCESS"), b"")
    write_bytes(top.join("b.bin"), b"b")
    write_bytes(top.join("a", "c", "y.bin"), b"y")
    assert read_bytes(top.join("a", "x.bin"), 100_000) == b"x" * 100_000
    with pytest.raises(ValueError, match="expected at most 10 bytes, got 100,000"):
        read_bytes(top.join("a", "x.bin"), 10)
    assert sorted(listdir(top)) == ["a", "b.bin"]
    assert glob(top, "a/*.bin") == ["a/x.bin"]
    # os.walk's order: a folder's files, then its folders', depth first; names skipped are not entered
    found = find(top, lambda name: name.startswith("_"))
    assert [f.path[len(top.path) + 1 :] for f in found] == ["b.bin", "a/x.bin", "a/c/y.bin"]
    assert [f.size for f in found] == ([None] * 3 if top.local else [1, 100_000, 1])  # (remote: from the listing)
    assert [(m.name, is_file) for m, is_file in matches(top.join("*"))] == [("a", False), ("b.bin", True)]
    assert matches(top.join("nothing")) == []
    with local_copy(top.join("b.bin"), 10) as copy:
        assert Path(copy).read_bytes() == b"b"
    remove(top.join("b.bin"))
    remove(top.join("b.bin"))  # (gone already: nothing)
    remove_tree(top.join("a"))
    assert listdir(top) == []


def test_ranges_are_read_concurrently_into_their_places(root: str, monkeypatch) -> None:
    from treekit.files import _remote

    top = locate(root)
    makedirs(top)
    data = os.urandom(300_000)
    write_bytes(top.join("r.bin"), data)
    if top.join("r.bin").local:
        pytest.skip("ranged reads are for remote files")
    monkeypatch.setattr(_remote, "PIECE", 7_000)  # (many pieces in flight)
    out = bytearray(200_000)
    read_into(top.join("r.bin"), [(50_000, 250_000, out)])
    assert bytes(out) == data[50_000:250_000]
    with open_read(top.join("r.bin")) as f:  # short reads served from one request ahead
        f.seek(10)
        assert f.read(5) + f.read(5) == data[10:20]
        f.seek(-3, os.SEEK_END)
        assert f.read() == data[-3:]
    short = bytearray(20)
    with pytest.raises(ValueError, match="expected bytes \\[299990, 300010\\), got 10 of them"):
        read_into(top.join("r.bin"), [(299_990, 300_010, short)])


def test_a_failed_write_leaves_the_old_file(root: str) -> None:
    makedirs(locate(root))
    where = locate(root).join("f.bin")
    write_bytes(where, b"old")
    with pytest.raises(RuntimeError, match="midway"), writing(where) as f:
        f.write(b"new, half written")
        raise RuntimeError("midway")
    assert read_bytes(where, 100) == b"old"
    assert listdir(locate(root)) == ["f.bin"]


def test_a_big_upload_that_fails_midway_is_never_shown(bucket: str) -> None:
    where = locate(f"{bucket}/big.bin")
    write_bytes(where, b"old")
    part = bytes(range(256)) * (1 << 18)  # 64 MB: more than one part (s3fs's 50 MB blocks)
    with pytest.raises(RuntimeError, match="after a part"), writing(where) as f:
        f.write(part)
        f.write(part[:1000])
        raise RuntimeError("after a part")
    assert read_bytes(where, 100) == b"old"
    with writing(where) as f:
        f.write(part)
    assert read_bytes(where, len(part)) == part
