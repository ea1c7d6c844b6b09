"""`make bench-recall`: python -m tests.bench.recall (see tests/bench/recall/__init__.py)."""

import sys

from .main import main

sys.exit(main())
