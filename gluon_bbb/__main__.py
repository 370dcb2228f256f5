"""``python -m gluon_bbb``: the ``gluon-bbb`` command line (see :mod:`gluon_bbb.cli`)."""
import sys

from .cli import main

__all__ = []

if __name__ == "__main__":
    sys.exit(main())
