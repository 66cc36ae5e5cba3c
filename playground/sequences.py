"""Per-parent sequence numbers, taken in one statement: the event tables' gap-free numbering.

Every saved event (a conversation's, a gateway session's) takes the next number from a counter on
its parent row. `increment` adds one under the row's lock and returns the new value in a single
`UPDATE … RETURNING` where the database has it (PostgreSQL, SQLite 3.35+): every event pays this,
and the ORM's update-then-select is two round trips. Called inside the caller's transaction, so the
row lock is held until the event row is saved.
"""
from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import F, Model


def increment(model: type[Model], pk: int, counter: str, *, assign: dict[str, Any] | None = None,
              where: dict[str, Any] | None = None, returning: tuple[str, ...] = ()) -> tuple | None:
    """Add one to `counter` of row `pk` (matching `where`), setting `assign` too; the new counter
    value followed by the `returning` fields, or None when no row matched."""
    assign, where = assign or {}, where or {}
    rows = model._default_manager.filter(pk=pk, **where)
    connection = connections[rows.db]
    if connection.vendor not in ("postgresql", "sqlite"):
        if not rows.update(**{counter: F(counter) + 1}, **assign):
            return None
        return model._default_manager.filter(pk=pk).values_list(counter, *returning).get()
    quote, meta = connection.ops.quote_name, model._meta

    def column(name: str) -> str:
        return quote(meta.get_field(name).column)

    def value(name: str, given: Any) -> Any:
        return meta.get_field(name).get_db_prep_save(given, connection)

    assignments = [f"{column(counter)} = {column(counter)} + 1", *(f"{column(name)} = %s" for name in assign)]
    conditions = [f"{quote(meta.pk.column)} = %s", *(f"{column(name)} = %s" for name in where)]
    params = [value(n, v) for n, v in assign.items()] + [pk] + [value(n, v) for n, v in where.items()]
    selected = ", ".join(column(name) for name in (counter, *returning))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {quote(meta.db_table)} SET {', '.join(assignments)} "
                       f"WHERE {' AND '.join(conditions)} RETURNING {selected}", params)
        found = cursor.fetchone()
    return None if found is None else tuple(found)
