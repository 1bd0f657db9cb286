"""The JSON Schemas shipped in the package (``hgpart/data/*.schema.json``) and one cached validator for each.

Why one module: placement files and cluster files are both checked against a shipped schema, and checking a schema
itself costs more than checking a file, so each validator is built once per process.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = ["load_schema", "schema_validator"]

DATA = Path(__file__).resolve().parent / "data"


def load_schema(name: str) -> dict[str, Any]:
    """The shipped schema ``hgpart/data/<name>.schema.json`` (``placement``, ``cluster``)."""
    return json.loads((DATA / f"{name}.schema.json").read_text(encoding="utf-8"))


@functools.cache
def schema_validator(name: str) -> Any:
    """A jsonschema validator of the shipped schema ``name`` (the schema itself checked once)."""
    import jsonschema

    sch = load_schema(name)
    cls = jsonschema.validators.validator_for(sch)
    cls.check_schema(sch)
    return cls(sch)
