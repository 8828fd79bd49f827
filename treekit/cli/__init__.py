# Lives here: _commands.py (the parser, one function per subcommand), _show.py (a checkpoint's
# summary), _demo_mesh.py (the demo on a mesh). May import: everything below, and the public
# namespaces (treekit, treekit.params). Start at _commands.py.
"""The command line: ``treekit`` and ``python -m treekit`` (show, demo, version)."""

from treekit.cli._commands import main as main
from treekit.cli._commands import parser as parser
