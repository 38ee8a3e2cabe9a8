"""``python -m vision.cli``: the ``glassdesk`` command (a session backend's process starts it so)."""

import sys

from vision.cli.command import main

sys.exit(main())
