"""``python -m powerzoo ARGS``: the ``powerzoo`` command, for an environment without its script."""

import sys

from powerzoo.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
