"""``python -m nvdla_hil.harness.cli``: the ``nvdla-hil`` command without the console script."""

import sys

from . import main

sys.exit(main())
