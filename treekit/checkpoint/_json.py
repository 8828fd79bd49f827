"""JSON from files, parsed in bounded memory: :func:`bounded_json` refuses, before parsing, JSON
whose objects, arrays, keys and strings would certainly take Python more than 14 times its size
(a header of empty objects, say: 28 times as dicts). Used for safetensors headers, treekit's
structure records and Hugging Face's index files."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["bounded_json"]


# In JSON whose escapes are blanked out (so that every quote delimits a string): a string without
# brackets, or (the group) one with; findall gives b'' (one shared object) for each of the first
# kind and the string for each of the second. And a string of one character. (Single-character
# repeats only: Python's re keeps no stack for them, where (?:[^"\\]|\\.)* takes memory for
# each character it repeats over.)
_BRACKETED = re.compile(rb'"[^"{\[]*"|("[^"]*")')
_ONE_CHARACTER = re.compile(rb'"[^"]"')


def bounded_json(raw: bytes, where: str, **hooks: Any) -> Any:
    """``json.loads(raw)``, unless what parsing it would certainly allocate is more than
    :data:`_ROOM` times its size: a dict for each object (64 bytes at least), a list for each
    array (56), an entry for each key (32), a str for each string value of two characters or
    more (56). So a hostile header of empty objects or arrays, or of short strings, is refused
    in memory of about its size. Valid files are far below: a safetensors entry certainly
    allocates 6 times its JSON, an entry of treekit's record 8.5 times. (Not bounded: an object
    of many short unique keys with tiny values, about 24 times.) Errors: ``ValueError`` naming
    ``where``."""
    # upper bounds first (brackets, quotes and colons inside strings count too), exact counts if needed
    objects, arrays, keys, strings = raw.count(b"{"), raw.count(b"["), raw.count(b'":'), raw.count(b'"') // 2
    if _least(objects, arrays, keys, strings) > _ROOM * len(raw):
        blanked = raw.replace(b"\\\\", b"__").replace(b'\\"', b"__") if b"\\" in raw else raw
        texts = _BRACKETED.findall(blanked)
        strings = len(texts)
        for text in texts:
            if text:
                objects, arrays = objects - text.count(b"{"), arrays - text.count(b"[")
        del texts
        keys = blanked.count(b'":') + blanked.count(b'" :')
        strings -= keys + blanked.count(b'""') + _ONE_CHARACTER.subn(b"", blanked)[1]
        del blanked
        if _least(objects, arrays, keys, strings) > _ROOM * len(raw):
            raise ValueError(
                f"{where}: expected JSON that Python holds in at most {_ROOM} times its size, got {objects:,} "
                f"objects, {arrays:,} arrays, {keys:,} keys and {max(strings, 0):,} strings in {len(raw):,} bytes"
            )
    try:
        return json.loads(raw.decode("utf-8"), **hooks)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: expected UTF-8 JSON, got byte {raw[exc.start]:#04x} at {exc.start}") from None
    except (ValueError, RecursionError) as exc:  # (RecursionError: nested past the parser's depth)
        raise ValueError(f"{where}: expected JSON, got {type(exc).__name__}: {exc}") from None


_ROOM = 14  # bytes of Python objects a byte of JSON may certainly become (besides the bytes and their str)


def _least(objects: int, arrays: int, keys: int, strings: int) -> int:
    """Bytes the parsed values take at least (4 KiB of slack for the smallest files)."""
    return 64 * objects + 56 * arrays + 32 * keys + 56 * max(strings, 0) - 4096
