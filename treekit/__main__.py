"""``python -m treekit``: the command line, which lives in treekit/cli/."""

import sys

from treekit.cli import main as main
from treekit.cli import parser as parser

if __name__ == "__main__":
    sys.exit(main(prog="python -m treekit"))
