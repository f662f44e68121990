"""``python -m agentledger``: the same command line as the ``agentledger`` script."""

import sys

from .cli import main

sys.exit(main())
