"""``python -m gpuconf.cli``: the ``gpuconf`` command without its console script."""

import sys

from gpuconf.cli import main

sys.exit(main())
