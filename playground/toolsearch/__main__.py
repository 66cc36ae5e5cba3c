import sys

from playground.toolsearch.cli import main

sys.exit(main())
