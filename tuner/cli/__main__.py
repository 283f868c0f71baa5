"""``python -m tuner.cli``: the ``tensortune`` command, where no script is installed."""

import sys

from tuner.cli.main import main

sys.exit(main())
