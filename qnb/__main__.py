"""``python -m qnb`` runs the ``qnb`` command line."""

import sys

from qnb.cli import main

sys.exit(main())
