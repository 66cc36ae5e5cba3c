import sys

from playground.engine.cli import main

sys.exit(main())
