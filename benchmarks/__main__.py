"""``python -m benchmarks [--quick] [--databases sqlite,postgresql,mysql] ...``"""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
