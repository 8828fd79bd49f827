"""Files other tools wrote: ``load``'s rename rules for their tensor names, and Hugging Face's
sharded ``model.safetensors.index.json`` read with its shards."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from treekit.checkpoint._json import bounded_json
from treekit.files import Where, read_bytes

__all__ = ["read_index", "rename_rules", "renamed"]


def rename_rules(rename: Sequence[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """``load``'s ``rename=`` pairs, checked and compiled.

    >>> renamed('model.dense.weight', rename_rules([(r'^model[.]', ''), (r'[.]weight$', '.kernel')]))
    'dense.kernel'
    """
    rules = []
    for rule in rename:
        if not (isinstance(rule, tuple) and len(rule) == 2 and all(isinstance(r, str) for r in rule)):
            raise TypeError(f"rename: expected (regex, replacement) pairs of str, got {rule!r:.60}")
        try:
            rules.append((re.compile(rule[0]), rule[1]))
        except re.error as exc:
            raise ValueError(f"rename: {rule[0]!r} is not a regular expression ({exc})") from None
    return rules


def renamed(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    """``name`` after each of ``rules`` in turn (``re.sub``)."""
    for pattern, replacement in rules:  # each rule in turn, on what the ones before made
        name = pattern.sub(replacement, name)
    return name


def read_index(found: Where, mmap: bool) -> dict[str, Any]:
    """The tensors of a Hugging Face ``model.safetensors.index.json`` and its shard files (in its
    folder, local or remote), by name."""
    from treekit.checkpoint import _header, _safetensors

    where = str(found)
    raw = read_bytes(found, _header.MAX_HEADER)
    index = bounded_json(raw, where)  # (refused before parsing if it would take too much memory)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError(f"{where}: expected JSON with a \"weight_map\" of tensor names to file names")
    out = {}
    for shard in dict.fromkeys(weight_map.values()):
        if os.path.basename(shard) != shard or "/" in shard or shard in ("", ".", ".."):
            raise ValueError(f"{where}: expected shard file names in its folder, got {shard!r}")
        tensors, _ = _safetensors.read(found.sibling(shard), mmap=mmap)
        out.update({name: tensors[name] for name in tensors if weight_map.get(name) == shard})
    if missing := [name for name in weight_map if name not in out]:
        raise ValueError(f"{where}: tensors {missing[:3]} ({len(missing)} in all) are not in the shards it names")
    return {name: out[name] for name in weight_map}
