"""`python -m playground.loadtest` (behind `make load`): many demo-agent conversations at once, measured.

- `stats`: pure helpers (percentiles, lost / duplicated sequence numbers, frame reading, a level's summary).
- `client`: what a browser does, over the real endpoints: the login form, the new-conversation form,
  and the conversation socket (hello, send, frames until the run's final status).
- `stack`: an embedded stack for the run (its own database, Redis prefix and Celery queue; daphne and
  a Celery worker started through `playground.runner`), and the CPU time of its processes.
- `cli`: the command line, levels in sequence, the table or `--json`.

No Django import at module level: the stack's environment must be settled before settings load.
"""
