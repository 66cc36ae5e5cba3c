"""`python -m playground.toolsearch`: the engine's command line (see `playground.engine.cli`)."""
