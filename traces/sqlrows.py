"""Model instances from plain-SQL rows, as the ORM would build them.

Hot read paths (the labelling page, token authentication) read their rows in one hand-written
statement: compiling the ORM's queries cost the web process more CPU than the database spent
answering them. ``model_select`` lists a model's columns for such a statement and
``model_from_row`` turns the values back into an instance with the ORM's own converters (JSON
parsed), so the instance is what ``.get()`` gives.
"""

from __future__ import annotations

from functools import cache

from django.db import connection
from django.db.models import Model


def _fields(model: type[Model], exclude: tuple[str, ...]) -> list:
    return [f for f in model._meta.concrete_fields if f.attname not in exclude]


def model_select(model: type[Model], alias: str, exclude: tuple[str, ...] = ()) -> str:
    """``alias."col", ...`` for the model's concrete fields, less ``exclude`` (attnames: deferred)."""
    return ", ".join(f'{alias}."{f.column}"' for f in _fields(model, exclude))


def model_width(model: type[Model], exclude: tuple[str, ...] = ()) -> int:
    """How many values of a row ``model_select`` selects."""
    return len(_fields(model, exclude))


@cache
def _converters(model: type[Model], exclude: tuple[str, ...]) -> list[tuple[str, object, list]]:
    out = []
    for f in _fields(model, exclude):
        col = f.get_col(model._meta.db_table)
        out.append((f.attname, col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)))
    return out


def model_from_row(model: type[Model], values, exclude: tuple[str, ...] = ()) -> Model:
    """The instance of the values ``model_select(model, ..., exclude)`` selected; ``exclude`` deferred."""
    names, converted = [], []
    for (attname, col, converters), value in zip(_converters(model, exclude), values, strict=True):
        for converter in converters:
            value = converter(value, col, connection)
        names.append(attname)
        converted.append(value)
    return model.from_db(connection.alias, names, converted)
