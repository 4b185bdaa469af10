"""``python -m memory_cli`` (and the zipapp's entry point)."""

import sys

from memory_cli.cli import main

sys.exit(main())
