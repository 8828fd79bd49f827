"""The native core's reading of safetensors header entries (src/native/header.c) against the
pure-Python scanner it stands in for (treekit/checkpoint/_header.py): the same tensors, in the
same order, the same metadata and the same error, for headers as writers write them, with white
space anywhere JSON allows it, and with any one character changed."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treekit.checkpoint import _header
from treekit.checkpoint._codes import SIZES
from treekit.core import NATIVE

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the pure-Python core: no native scanner to compare")

SPACE = st.sampled_from(["", "", "", " ", "\n", " \t", "\r\n  "])
ODD = ["w", "layers.0.attn.q", 'a"b', "a\\b", "é", "\x01", "\u2028"]
NAMES = st.text(max_size=6) | st.sampled_from(ODD * 3 + ["__metadata__"])
CODES = st.sampled_from([*SIZES] * 3 + ["F128", "", "f32", "F32 "])
DIMS = st.sampled_from([*"12345"] * 6 + ["0", "01", "00", "10", " 3", str(2**40), str(2**63), "9" * 30])
OFTEN = [0] * 12  # (choices weighted towards a valid entry)


@st.composite
def headers(draw: Any) -> tuple[str, int]:
    """A header's text and a data size: entries as writers write them (mostly), some wrong."""
    s = lambda: draw(SPACE)  # noqa: E731
    members, at = [], 0
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 12)) == 0:  # metadata, anywhere
            metadata = json.dumps(draw(st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)))
            members.append(f'{s()}"__metadata__"{s()}:{s()}{metadata}')
            continue
        name, code, dims = draw(NAMES), draw(CODES), draw(st.lists(DIMS, max_size=4))
        size = SIZES.get(code, 4) * math.prod(int(d) for d in dims)
        begin = at + draw(st.sampled_from([*OFTEN, -at, 4]))
        end = begin + size + draw(st.sampled_from([*OFTEN, -size, 1]))
        at = max(at, end)
        quoted = json.dumps(name, ensure_ascii=draw(st.booleans()))
        shape = f"{s()},{s()}".join(dims) if draw(st.booleans()) else ",".join(dims)
        body = (
            f'{s()}"dtype"{s()}:{s()}"{code}"{s()},{s()}"shape"{s()}:{s()}[{s()}{shape}{s()}]{s()},'
            f'{s()}"data_offsets"{s()}:{s()}[{s()}{begin}{s()},{s()}{end}{s()}]{s()}'
        )
        members.append(f"{s()}{quoted}{s()}:{s()}{{{body}}}{s()}")
    text = "{" + ",".join(members) + "}" + s()
    if draw(st.integers(0, 4)) == 0 and text:  # one character changed
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.sampled_from('{}[]",: 09a\\\x00é')) + text[i + 1 :]
    return text, at + draw(st.sampled_from([*OFTEN, 1, -min(at, 1), -at]))


def _read(text: str, data_size: int, scan: Any) -> Any:
    raw = text.encode("utf-8", "surrogatepass")
    kept, _header._SCAN = _header._SCAN, scan
    try:
        tensors, metadata, at, error = _header._read(raw, "f", 8 + len(raw), data_size)
    finally:
        _header._SCAN = kept
    return list(tensors.items()), metadata, at, error


@given(headers())
def test_the_native_scanner_reads_as_the_pure_one(header: tuple[str, int]) -> None:
    text, data_size = header
    assert _read(text, data_size, NATIVE.scan_entries) == _read(text, data_size, None)


E = '{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
F = E.replace("0,8", "8,16")


def _h(*members: str, end: str = "}") -> str:
    return "{" + ",".join(members) + end


CASES = [  # each next to a rule of the scanner: the pure one decides
    _h('"w":' + E),
    _h('"w":' + E, '"v":' + F),
    _h('"__metadata__":' + E),  # (not a tensor, whatever it holds)
    _h('"w":' + E, '"w":' + E),  # (twice)
    _h('"w":' + E.replace("[2]", "[02]")),  # (a leading zero)
    _h('"w":' + E.replace("[0,8]", "[00,8]")),
    _h('"w":' + E.replace("[2]", "[2,0]")),  # (no bytes)
    _h('"w":' + E.replace("[2]", "[2,0]").replace("0,8", "0,0"), '"v":' + E),
    _h('"w":' + E.replace("[2]", "[]").replace("0,8", "0,4")),  # (a scalar)
    _h('"w":' + E.replace("[2]", "[ ]").replace("0,8", "0,4")),
    _h('"w":' + E.replace("[2]", "[2,]")),
    _h('"w":' + E.replace("[2]", "[9223372036854775807,9223372036854775807]")),  # (overflow)
    _h('"w":' + E.replace("[2]", "[1234567890123456789]")),  # (19 digits)
    _h('"w":' + E.replace('"dtype"', '"dtype "')),
    _h('"w":' + E.replace("F32", "F64")),  # (the wrong size)
    _h('"w":' + E.replace("F32", "BF16").replace("0,8", "0,4")),
    _h('"w":' + E.replace("F32", "F32x")),
    _h('"w\\"x":' + E),  # (escapes: json's scanner)
    _h('"w\\tx":' + E),
    _h('"w\x01":' + E),
    _h(' "w" : ' + E + " ", ' "v":' + F.replace(",", " ,\n ") + " ", end="}\n"),
    _h('"w":' + E, end="}}"),
    _h('"w":' + E, end="]"),
    _h('"w":' + E, end=",}"),
    _h('"w":' + E, end=""),
]


@pytest.mark.parametrize("text", CASES)
@pytest.mark.parametrize("data_size", [8, 16, 4])
def test_each_rule_as_the_pure_scanner_has_it(text: str, data_size: int) -> None:
    assert _read(text, data_size, NATIVE.scan_entries) == _read(text, data_size, None)


def test_the_native_scanner_takes_entries_as_writers_write_them() -> None:
    text = '{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}, "b" : {"dtype": "U8", "shape": [], '
    text += '"data_offsets": [24, 25]}}'
    tensors: dict[str, Any] = {}
    pos, last, left, at = NATIVE.scan_entries(text, 1, 10_000, 0, 8, 25, SIZES, _header.Tensor, tensors)
    assert (pos, last, at) == (len(text), True, 25) and left == 10_000 - (256 + 4 + 16) - (256 + 4)
    assert tensors == {"a": ("F32", (2, 3), 8, 32), "b": ("U8", (), 32, 33)}
    assert type(tensors["a"]) is _header.Tensor
    # it stops at an entry it does not take (a leading zero), leaving it to Python; and at a repeated name
    for stop in ('{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}', text.replace('"b"', '"a"')):
        tensors = {}
        pos = NATIVE.scan_entries(stop, 1, 10_000, 0, 8, 25, SIZES, _header.Tensor, tensors)[0]
        assert stop[pos:].lstrip().startswith('"a"')
    with pytest.raises(TypeError):
        NATIVE.scan_entries(text, 1, 10_000, 0, 8, 25, SIZES, dict, {})
