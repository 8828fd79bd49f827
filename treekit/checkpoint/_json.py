"""JSON from files, parsed in bounded memory: :func:`bounded_json` refuses, before parsing, JSON
whose objects, arrays, strings and numbers would certainly take Python more than 12 times its
size (a file of one-member objects, say: 24 times as dicts). Used for treekit's structure records
and Hugging Face's index files; safetensors headers have a scanner of their own (``_header.py``)."""

from __future__ import annotations

import json
import re
from itertools import repeat
from typing import Any

__all__ = ["bounded_json"]

_ROOM = 12  # bytes of Python objects a byte of JSON may certainly become (besides the bytes and their str)
# Every string (so that quotes pair) cut to 16 bytes: one of two characters or more still has two.
_LONG = re.compile(rb'"([^"]{0,16})[^"]*"')
# What stands for one character in a string: an escape, or a character Python keeps one object of
# (U+0080 to U+00FF, two bytes of UTF-8), so that strings are measured in characters.
_CHARACTER = re.compile(rb'\\(?:u[0-9a-fA-F]{4}|[^u"])|[\xc2\xc3][\x80-\xbf]')  # (not a quote: a cut escape)
_UNMARKED = bytes(sorted(set(range(256)) - set(b'{[,"0123456789.eE')))  # what the first bound does not count
_BIG_INT = re.compile(rb"(?<![0-9.eE+-])-?[0-9]{4,}(?![0-9.eE])")  # (ints past 256 are objects of their own)


def bounded_json(raw: bytes, where: str) -> Any:
    """``json.loads(raw)``, unless what parsing it would certainly allocate is more than
    :data:`_ROOM` times its size. Counted (CPython 3.10-3.13, at least): a dict for each object
    (64 bytes, 184 with members), a list for each array (56 bytes, 88 with items, 8 an item past
    four), a str for each string value of two characters or more (43), an object for each float
    and each int of four digits or more (24). So JSON of small objects, arrays or short strings is
    refused in memory of about its size. Valid files are far below: an entry of treekit's record
    costs at most 11 times its JSON. (Not counted: the keys, which json shares when repeated; an
    object of many unique short keys takes about 15 times its size.) Errors: ``ValueError``
    naming ``where``."""
    # upper bounds first (brackets, quotes and digits inside strings count too), exact counts if needed
    marks = raw.translate(None, _UNMARKED)  # (counted in what is left: far shorter)
    braces, brackets, commas, quotes = marks.count(b"{"), marks.count(b"["), marks.count(b","), marks.count(b'"')
    digits = len(marks) - len(marks.translate(None, b"0123456789"))
    numbers = marks.count(b".") + marks.count(b"e") + marks.count(b"E") + digits // 4
    del marks
    items = commas + braces + brackets
    if _least(braces, braces, brackets, brackets, items, quotes // 2, numbers) > _ROOM * len(raw):
        _count(raw, where)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: expected UTF-8 JSON, got byte {raw[exc.start]:#04x} at {exc.start}") from None
    except (ValueError, RecursionError) as exc:  # (RecursionError: nested past the parser's depth)
        raise ValueError(f"{where}: expected JSON, got {type(exc).__name__}: {exc}") from None


def _count(raw: bytes, where: str) -> None:
    """Count what ``raw`` holds exactly (outside its strings), a piece at a time (re.sub keeps a
    piece of its result per match); refuse it if that costs too much."""
    blanked = raw.replace(b"\\\\", b"_").replace(b'\\"', b"_") if b"\\" in raw else raw
    if blanked.count(b'"') % 2:  # (each string's quotes pair, once escapes are blanked)
        raise ValueError(f"{where}: expected JSON, got a string with no end (an odd number of quotes)")
    counts = [0] * 7
    start = pieces = 0
    while start < len(blanked):
        end = min(start + _PIECE, len(blanked))
        while end < len(blanked) and blanked.count(b'"', start, end) % 2:  # (cut outside a string)
            end = blanked.find(b'"', end) + 1 or len(blanked)
        for k, n in enumerate(_counts(blanked[start:end])):
            counts[k] += n
        start, pieces = end, pieces + 1
    del blanked
    objects, _, arrays, _, _, values, numbers = counts
    least = _least(*counts) - 256 * pieces  # (a cut may split a {} or a key from its colon)
    if least > _ROOM * len(raw):
        raise ValueError(
            f"{where}: expected JSON that Python holds in at most {_ROOM} times its size, got {objects:,} objects, "
            f"{arrays:,} arrays, {max(values, 0):,} strings and {numbers:,} numbers in {len(raw):,} bytes "
            f"(at least {least:,} bytes as Python objects)"
        )


_PIECE = 1 << 18  # bytes of JSON counted at a time
_MARKS = (b"q", b"q", b"")  # a string by its length, 0, 1, 2 or more


def _counts(piece: bytes) -> tuple[int, int, int, int, int, int, int]:
    """(objects, those with members, arrays, those with items, array items, strings of two
    characters or more that are not keys, numbers that are objects) in JSON cut outside strings."""
    # split at the quotes (escapes are blanked, the piece cut outside strings): the odd parts are
    # the strings, each now "q" if of one character or none (its own object or none: Python
    # shares them), else dropped: what is left is the structure, numbers and short strings
    if b"\\" in piece or b"\xc2" in piece or b"\xc3" in piece:  # (strings cut first: sub keeps a piece per match)
        piece = _CHARACTER.sub(b"_", _LONG.sub(rb'"\1"', piece))
    parts = piece.split(b'"')
    marks = list(map(_MARKS.__getitem__, map(min, map(len, parts[1::2]), repeat(2))))
    values = marks.count(b"")
    parts[1::2] = marks
    del marks
    bare = b"".join(parts).translate(None, b" \t\n\r")  # (JSON's white space)
    del parts
    keys = bare.count(b":")
    values -= keys - bare.count(b"q:")  # (a key of two characters or more is no value)
    objects, arrays = bare.count(b"{"), bare.count(b"[")
    full_objects, full_arrays = objects - bare.count(b"{}"), arrays - bare.count(b"[]")
    items = bare.count(b",") + full_objects + full_arrays - keys
    exponents = bare.count(b"e") + bare.count(b"E") - bare.count(b"true") - bare.count(b"false")
    numbers = max(bare.count(b"."), exponents) + _BIG_INT.subn(b"", bare)[1]  # (floats: 1.5, 1e9, 1.5e9)
    return objects, full_objects, arrays, full_arrays, items, values, numbers


def _least(objects: int, full: int, arrays: int, full_arrays: int, items: int, values: int, numbers: int) -> int:
    """Bytes the parsed values take at least (less 32 KiB: what the interpreter's free lists may hold)."""
    lists = 56 * arrays + 32 * full_arrays + 8 * max(0, items - 4 * full_arrays)
    return 64 * objects + 120 * full + lists + 43 * max(values, 0) + 24 * numbers - (32 << 10)
