import sys

from playground.loadtest.cli import main

sys.exit(main())
