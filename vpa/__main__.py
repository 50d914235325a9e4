"""`python -m vpa`: the same as the `vpa` console script (see `vpa.cli`). Owns nothing else."""

import sys

from vpa.cli import main

sys.exit(main())
