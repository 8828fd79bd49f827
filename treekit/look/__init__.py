# Lives here: _format.py, _summary.py (the table), _view.py (HTML), _diff_view.py (two trees).
# May import: core, ops, sharding. Start at _summary.py (the table), then _view.py (the HTML
# view, built on _summary's rows) and _diff_view.py (two trees side by side).
"""Looking at trees: format_tree, summary, the HTML view, and diffs rendered as HTML."""

from treekit.look._diff_view import render_diff as render_diff
from treekit.look._format import format_tree as format_tree
from treekit.look._summary import Row as Row
from treekit.look._summary import summary as summary
from treekit.look._summary import table_rows as table_rows
from treekit.look._view import View as View
from treekit.look._view import view as view
