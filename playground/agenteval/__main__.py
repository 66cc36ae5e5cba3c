import sys

from playground.agenteval.cli import main

sys.exit(main())
