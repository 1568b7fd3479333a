"""``python -m streaming ...``: the job with the ``monitor stream`` options."""

import sys

from streaming.job import main

sys.exit(main())
