"""`python -m playground.run` (behind `make run`): the whole playground on one machine, no Docker.

- `embedded_redis`: find a Redis at REDIS_URL or start one (redis-server on PATH, else fakeredis).
- `supervisor`: start children in their own process groups, prefix their output, stop them all.
- `main`: migrate, demo data, admin login, then the ASGI server + a Celery worker under supervision.

No Django import at module level here: the Redis URL must be settled before settings load.
"""
