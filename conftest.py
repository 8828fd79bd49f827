"""Collection for the whole repository: without the testing extra, skip what needs hypothesis."""

from __future__ import annotations

import importlib.util

collect_ignore = [] if importlib.util.find_spec("hypothesis") else ["treekit/testing.py", "docs/testing.md"]
