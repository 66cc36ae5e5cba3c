"""`python -m playground.toolsearch`: the engine's command line (`cli`), plain Python like the engine.

It lives beside the engine rather than in it because `bench` runs the benchmarks of
`playground.bench` (whose `scorer` and `search_speed` modules import only the engine).
"""
