"""`python -m tidemill.cli`: the same as the `tidemill` command."""

import sys

from tidemill.cli import main

sys.exit(main())
