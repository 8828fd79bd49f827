"""The header of a safetensors file, parsed and checked in memory bounded by its size.

A header is JSON of one fixed shape::

    {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ..., "__metadata__": {"k": "v"}}

so it is read by a scanner made for that shape rather than by ``json.loads``, which would build
whatever a file holds (a header of small objects or short strings takes Python 20 to 30 times its
size) before anything could be checked. An entry written as every writer writes it (those keys in
that order) is matched by one regular expression and kept as a tuple; any other is read member by
member with json's own string scanner, values nested deeper than the format allows are refused
where they start, and what is kept is counted as it grows: past :data:`_ROOM` times the header's
size the file is refused. Then every claim is checked against the file's size before anything it
claims is allocated.
"""

from __future__ import annotations

import json
import math
import os
import re
import reprlib
from typing import IO, Any, NamedTuple

from treekit.checkpoint._codes import CODES, SIZES
from treekit.core import NATIVE

__all__ = ["MAX_HEADER", "Header", "Tensor", "parse", "short"]

MAX_HEADER = 100_000_000  # bytes, safetensors' own limit
MAX_NDIM = 64  # numpy's
_ROOM = 8  # bytes of Python objects kept per byte of header (the most compact valid one takes 5)
_FOREIGN = (  # how other files start; consulted only once a header length makes no sense
    (b"PK\x03\x04", "a zip file (.npz, or a torch .pt/.bin checkpoint?)"),
    (b"PK\x05\x06", "an empty zip file"),
    (b"\x93NUMPY", "a .npy file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x1f\x8b", "a gzip file"),
    *((b"\x80" + bytes([v]), "a pickle (never unpickled)") for v in range(2, 6)),
)
_repr = reprlib.Repr()  # a lying header's values are shown cut short
_repr.maxlist, _repr.maxdict, _repr.maxstring, _repr.maxother, _repr.maxlevel = 8, 4, 40, 40, 2
short = _repr.repr
_KEYS = ["data_offsets", "dtype", "shape"]
_SCAN = getattr(NATIVE, "scan_entries", None)  # the native core's reading of entries as writers write them
_EXPECTED = {  # what each key of an entry holds
    "dtype": f"one of {', '.join(CODES)}",
    "shape": f"a list of at most {MAX_NDIM} integers >= 0",
    "data_offsets": "[begin, end], two integers",
}


class Tensor(NamedTuple):
    """Where one tensor lies: its safetensors ``dtype`` code, ``shape`` and absolute byte range."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


class Header(NamedTuple):
    """A checked header: ``tensors`` by name in file order, ``metadata``, data offset, file size."""

    tensors: dict[str, Tensor]
    metadata: dict[str, str]
    data_start: int
    size: int


def parse(f: IO[bytes], p: str) -> Header:
    """The checked header of the safetensors file ``f`` (named ``p`` in errors)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    head = f.read(8)
    n = int.from_bytes(head, "little") if len(head) == 8 else -1
    if not 0 <= n <= min(size - 8, MAX_HEADER):
        what = next((what for magic, what in _FOREIGN if head.startswith(magic)), None)
        if what is not None:
            raise ValueError(f"{p}: expected a safetensors file, got {what}")
        if n < 0:
            raise ValueError(f"{p}: expected a safetensors file (an 8-byte header length, then JSON), got {size} bytes")
        limit = f"{size - 8} (the file is {size} bytes)" if size - 8 < MAX_HEADER else f"{MAX_HEADER} (the limit)"
        raise ValueError(f"{p}: header length: expected at most {limit}, got {n} (not safetensors, or truncated?)")
    data_start, data_size = 8 + n, size - 8 - n
    tensors, metadata, at, error = _read(f.read(n), p, data_start, data_size)
    if error is not None:  # (raised here: neither the error nor its traceback holds the header's text)
        raise ValueError(error)
    if at != data_size:  # (not one run of tensors in file order, as writers write them: sorted, checked)
        order = sorted((t.begin - data_start, t.end - data_start, name) for name, t in tensors.items())
        at, previous = 0, ""
        for begin, end, name in order:
            if begin != at:
                why = f"{begin - at} bytes before it in no tensor"
                why = f"overlapping tensor {short(previous)}" if begin < at else why
                where = f"{p}: tensor {short(name)}"
                raise ValueError(f"{where}: expected data_offsets from {at}, got [{begin}, {end}] ({why})")
            at, previous = end, name
        if at != data_size:
            why = "the rest in no tensor"
            raise ValueError(f"{p}: data: expected {at} bytes (all in tensors), got {data_size} ({why})")
        tensors = {name: tensors[name] for _, _, name in order}
    return Header(tensors, metadata, data_start, size)


def _read(
    raw: bytes, p: str, data_start: int, data_size: int
) -> tuple[dict[str, Tensor], dict[str, str], int, str | None]:
    """(tensors, metadata, at, None) of a header's bytes (``at``: where the tensors end if they
    are one run in file order, else -1), or ({}, {}, -1, what is wrong with them)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return {}, {}, -1, f"{p}: header: expected UTF-8 JSON, got byte {raw[exc.start]:#04x} at {exc.start}"
    try:
        scan = _Scan(text, p, len(raw), data_start, data_size)
        return (*scan.header(), scan.at, None)
    except (json.JSONDecodeError, _Twice) as exc:
        error = "JSONDecodeError" if isinstance(exc, json.JSONDecodeError) else "ValueError"
        return {}, {}, -1, f"{p}: header: expected JSON, got {error}: {exc}"
    except ValueError as exc:
        return {}, {}, -1, str(exc)


class _Twice(ValueError):
    def __str__(self) -> str:
        return f"key {short(self.args[0])} appears twice in one object"


class _Unread:
    """A value not built: shown in errors as what it is (``<a number of 5,000 characters>``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<{self.kind}>"


_WS = "[ \t\n\r]*"
_SPACE = re.compile(_WS)
_STRING = r'"([^"\\\x00-\x1f]*)"'  # (without escapes: those go to json's scanner)
_INTS = r"\[([0-9 \t\n\r,]*)\]"
_INT = "(0|[1-9][0-9]*)"
_ENTRY = re.compile(  # an entry as writers write it; the group after it: "," or "}"
    f"{_WS}{_STRING}{_WS}:{_WS}\\{{{_WS}\"dtype\"{_WS}:{_WS}{_STRING}{_WS},{_WS}\"shape\"{_WS}:{_WS}{_INTS}{_WS},"
    f"{_WS}\"data_offsets\"{_WS}:{_WS}\\[{_WS}{_INT}{_WS},{_WS}{_INT}{_WS}\\]{_WS}}}{_WS}([,}}])"
)
_NOT_JSON_INTS = re.compile(r"(?<![0-9])0[0-9]")  # (int() takes leading zeros; JSON does not)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_KIND = {"{": "an object", "[": "an array", '"': "a string", "t": "a boolean", "f": "a boolean", "n": "null"}


def _kind_of(value: Any) -> str:
    """What a parsed JSON value is, in words."""
    if isinstance(value, _Unread):
        return value.kind
    return _KINDS.get(type(value), "an object")


_KINDS = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}


class _Scan:
    """One pass over a header's text, keeping what it checks and counting what that costs."""

    def __init__(self, text: str, p: str, size: int, data_start: int, data_size: int) -> None:
        self.text, self.p, self.data_start, self.data_size = text, p, data_start, data_size
        self.left = _ROOM * size + (64 << 10)  # (bytes of Python objects it may keep yet; small headers: all)
        self.at = 0  # where the tensors so far end, while each began where the one before it ended; else -1
        # (then sorting them would not change their order: none is empty, so no two begin together)

    def header(self) -> tuple[dict[str, Tensor], dict[str, str]]:
        text, p = self.text, self.p
        pos = self._space(0)
        if text[pos : pos + 1] != "{":
            raise ValueError(f"{p}: header: expected a JSON object, got {self._kind(pos)}")
        pos = self._space(pos + 1)
        tensors: dict[str, Tensor] = {}
        metadata: dict[str, str] | None = None
        last = text.startswith("}", pos)
        pos += last
        while not last:
            if _SCAN is not None:  # (the same entries taken in C, up to the first it leaves here)
                pos, last, self.left, self.at = _SCAN(
                    text, pos, self.left, self.at, self.data_start, self.data_size, SIZES, Tensor, tensors
                )
                if last:
                    break
            m = _ENTRY.match(text, pos)
            tensor = None
            if m is not None and m[1] != "__metadata__":
                tensor = _canonical(m[2], m[3], m[4], m[5], self.data_start, self.data_size)
            if tensor is not None:
                assert m is not None
                name, pos, last = m[1], m.end(), m[6] == "}"
            else:
                name, pos = self._key(pos)
                if name == "__metadata__":
                    if metadata is not None:
                        raise _Twice(name)
                    metadata, pos = self._metadata(pos)
                else:
                    where, kept = f"{p}: tensor {short(name)}", self.left
                    info, pos = self._entry(pos, where)
                    tensor = _tensor(where, info, self.data_start, self.data_size)
                    self.left = kept  # (the entry's values are dropped: its tensor is counted below)
                pos, last = self._after(pos, "}")
            if tensor is not None:
                if name in tensors:
                    raise _Twice(name)
                tensors[name] = tensor
                self._keep(256 + 4 * len(name) + 8 * len(tensor.shape))  # (at least its objects' size)
                run = self.at == tensor.begin - self.data_start and tensor.end > tensor.begin  # (no bytes: sorted)
                self.at = tensor.end - self.data_start if run else -1
        if self._space(pos) != len(text):
            raise json.JSONDecodeError("Extra data", text, self._space(pos))
        return tensors, metadata or {}

    def _keep(self, cost: int) -> None:
        self.left -= cost
        if self.left < 0:
            raise ValueError(
                f"{self.p}: header: expected one Python holds in at most {_ROOM} times its size, got more "
                f"(a header of many small entries or metadata)"
            )

    def _space(self, pos: int) -> int:
        return _SPACE.match(self.text, pos).end()  # type: ignore[union-attr]

    def _kind(self, pos: int) -> str:
        c = self.text[pos : pos + 1]
        if c in _KIND:
            return _KIND[c]
        if _NUMBER.match(self.text, pos):
            return "a number"
        raise json.JSONDecodeError("Expecting value", self.text, pos)

    def _after(self, pos: int, close: str) -> tuple[int, bool]:
        """Past the ``,`` or ``close`` after a member; whether it was ``close``."""
        pos = self._space(pos)
        c = self.text[pos : pos + 1]
        if c == ",":
            return self._space(pos + 1), False
        if c == close:
            return pos + 1, True
        raise json.JSONDecodeError("Expecting ',' delimiter", self.text, pos)

    def _key(self, pos: int) -> tuple[str, int]:
        """A member's key and the position after its ``:``."""
        text = self.text
        pos = self._space(pos)
        if not text.startswith('"', pos):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        pos = self._space(pos)
        if not text.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        return key, self._space(pos + 1)

    def _value(self, pos: int, where: str, expected: str, nest: bool) -> tuple[Any, int]:
        """A string, number, literal or (with ``nest``) an array of them; anything deeper refused here."""
        text = self.text
        c = text[pos : pos + 1]
        if c == '"':
            value, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            self._keep(value.__sizeof__())
            return value, pos
        if c == "[" and nest:
            items: list[Any] = []
            pos = self._space(pos + 1)
            if text.startswith("]", pos):
                return items, pos + 1
            while True:
                if len(items) > MAX_NDIM:
                    raise ValueError(f"{where}: expected {expected}, got an array of more than {MAX_NDIM + 1} values")
                item, pos = self._value(pos, where, expected, False)
                items.append(item)
                self._keep(40)
                pos, last = self._after(pos, "]")
                if last:
                    return items, pos
        if c and c in "{[":  # (nest is False: inside an array already)
            got = self._kind(pos) if nest else f"an array holding {self._kind(pos)}"
            raise ValueError(f"{where}: expected {expected}, got {got}")
        m = _NUMBER.match(text, pos)
        if m is not None:
            digits = m[0]
            if len(digits) > 40:  # (not built: a long one would take quadratic time on Python 3.10)
                return _Unread(f"a number of {len(digits):,} characters"), m.end()
            return (float(digits) if any(ch in digits for ch in ".eE") else int(digits)), m.end()
        for word, value in _LITERALS.items():
            if text.startswith(word, pos):
                return value, pos + len(word)
        raise json.JSONDecodeError("Expecting value", text, pos)

    def _entry(self, pos: int, where: str) -> tuple[dict[str, Any], int]:
        """A tensor's entry read member by member: a dict of plain values (an array one level deep)."""
        if not self.text.startswith("{", pos):  # (not read: the entry is wrong whatever it holds)
            raise ValueError(f"{where}: expected an object with keys {_KEYS}, got {self._kind(pos)}")
        info: dict[str, Any] = {}
        pos = self._space(pos + 1)
        if self.text.startswith("}", pos):
            return info, pos + 1
        while True:
            key, pos = self._key(pos)
            if key in info:
                raise _Twice(key)
            if len(info) == len(_KEYS) + 5:  # (enough to show: the rest is not read)
                got = f"keys {short(list(info))} and more"
                raise ValueError(f"{where}: expected an object with keys {_KEYS}, got {got}")
            if key in _EXPECTED:
                info[key], pos = self._value(pos, f"{where}: {key}", _EXPECTED[key], True)
            elif self.text[pos : pos + 1] in ("[", "{"):  # (not read: the entry is wrong whatever it holds)
                raise ValueError(f"{where}: expected an object with keys {_KEYS}, got key {short(key)}")
            else:
                info[key], pos = self._value(pos, where, "", False)
            self._keep(100 + key.__sizeof__())
            pos, last = self._after(pos, "}")
            if last:
                return info, pos

    def _metadata(self, pos: int) -> tuple[dict[str, str], int]:
        """``__metadata__``: an object of strings (or null, read as no metadata)."""
        text, where = self.text, f"{self.p}: __metadata__"
        if text.startswith("null", pos):
            return {}, pos + 4
        if not text.startswith("{", pos):
            raise ValueError(f"{where}: expected an object of strings, got {self._kind(pos)}")
        out: dict[str, str] = {}
        pos = self._space(pos + 1)
        if text.startswith("}", pos):
            return out, pos + 1
        while True:
            key, pos = self._key(pos)
            if key in out:
                raise _Twice(key)
            if not text.startswith('"', pos):
                if text[pos : pos + 1] in ("[", "{"):
                    got = self._kind(pos)
                else:
                    value = self._value(pos, where, "a string", False)[0]
                    got = f"{_kind_of(value)} {short(value)}"
                raise ValueError(f"{where}[{short(key)}]: expected a string, got {got}")
            out[key], pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            self._keep(100 + key.__sizeof__() + out[key].__sizeof__())
            pos, last = self._after(pos, "}")
            if last:
                return out, pos


def _canonical(code: str, shape: str, begin_: str, end_: str, data_start: int, data_size: int) -> Tensor | None:
    """The tensor of an entry as writers write it (the expression's groups), or None to read it
    member by member (which says what is wrong, if anything)."""
    size = SIZES.get(code)
    if size is None or len(shape) > 2000 or len(begin_) > 20 or len(end_) > 20 or _NOT_JSON_INTS.search(shape):
        return None  # (long ones: not split, not int()ed)
    try:
        dims = tuple(map(int, shape.split(","))) if shape else ()
    except ValueError:  # ("", or digits with space between)
        return None
    begin, end = int(begin_), int(end_)
    if len(dims) > MAX_NDIM or not begin <= end <= data_size or end - begin != math.prod(dims) * size:
        return None
    if end == begin and 0 in dims:
        return None  # (no bytes, no claims: _tensor checks the other dims)
    return Tensor(code, dims, data_start + begin, data_start + end)


def _tensor(where: str, info: dict[str, Any], data_start: int, data_size: int) -> Tensor:
    """The tensor of one header entry read member by member, checked."""
    if set(info) != set(_KEYS):
        raise ValueError(f"{where}: expected an object with keys {_KEYS}, got keys {short(sorted(info))}")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if type(code) is not str or code not in CODES:
        raise ValueError(f"{where}: dtype: expected {_EXPECTED['dtype']}, got {short(code)}")
    if type(shape) is not list or len(shape) > MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
        raise ValueError(f"{where}: shape: expected {_EXPECTED['shape']}, got {short(shape)}")
    if math.prod(d or 1 for d in shape) >= 1 << 63:  # (numpy's limit, even for an array of no bytes)
        raise ValueError(f"{where}: shape: expected fewer than 2**63 elements (zeros aside), got {short(shape)}")
    if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets):
        raise ValueError(f"{where}: data_offsets: expected {_EXPECTED['data_offsets']}, got {short(offsets)}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        why = " (a truncated file?)" if 0 <= begin <= end else ""
        raise ValueError(f"{where}: data_offsets: expected 0 <= begin <= end <= {data_size}, got {offsets}{why}")
    need = math.prod(shape) * CODES[code][1]  # Python ints: no overflow
    if end - begin != need:
        raise ValueError(f"{where}: expected {need} bytes for shape {shape} of {code}, got offsets {offsets}")
    return Tensor(code, tuple(shape), data_start + begin, data_start + end)
