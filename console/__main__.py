"""`python -m console` runs the `truva-console` script."""

import sys

from console.entry import main

sys.exit(main())
