"""``python -m streaming ...``: the job with the ``monitor stream`` options."""

import sys

from streaming.cli import main

sys.exit(main())
