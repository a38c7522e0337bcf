"""JSON Schemas for editors and reviewers, derived from the pydantic models (never by hand).

A runbook whose first line is
`# yaml-language-server: $schema=../../schema/runbook.schema.json` gets completion and
validation in any editor that speaks the YAML language server protocol.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from specpair.generate.render import dump_json

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_of(model: type[BaseModel], title: str, description: str) -> dict[str, Any]:
    schema = model.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, **schema, "title": title, "description": description}


def generate(_pairs: object) -> dict[Path, bytes]:
    from specpair.model.lock import Lock
    from specpair.model.runbook import Runbook

    return {
        Path("schema/runbook.schema.json"): dump_json(schema_of(
            Runbook, "specpair runbook",
            "One target/draft pair for speculative decoding; generated from specpair's "
            "pydantic models.")),
        Path("schema/lock.schema.json"): dump_json(schema_of(
            Lock, "specpair lock", "Resolved facts about both artifacts of a pair.")),
    }
