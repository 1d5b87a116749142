"""`python -m bertkit COMMAND ...` (and `torchrun ... -m bertkit COMMAND ...`): the `bertkit` command."""

import sys

from bertkit.commands.cli import main

sys.exit(main())
