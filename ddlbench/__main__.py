"""python -m ddlbench ...: the same as the `ddlbench` command."""

import sys

from ddlbench.cli import main

sys.exit(main())
