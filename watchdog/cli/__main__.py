"""``python -m watchdog.cli``: the ``afk`` command."""

import sys

from . import main

sys.exit(main())
