"""The exported JSON Schema: derived from the models, and it agrees with them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from specpair.load.document import load_document
from tests.support.paths import REPO

SCHEMA = json.loads((REPO / "schema" / "runbook.schema.json").read_text())


@pytest.mark.parametrize("path", sorted(REPO.glob("runbooks/*/runbook.*")),
                         ids=lambda p: p.parent.name)
def test_examples_validate_against_the_schema(path: Path) -> None:
    data = load_document(path, REPO / "runbooks").data
    jsonschema.validate(data, SCHEMA)


def test_schema_rejects_unknown_keys_and_bad_enums() -> None:
    data = load_document(REPO / "runbooks" / "ling-3-flash-dspark" / "runbook.yaml").data
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "colour": "red"}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "speculation": {"method": "MEDUSA"}}, SCHEMA)


def test_yaml_examples_point_editors_at_the_schema() -> None:
    for path in REPO.glob("runbooks/*/runbook.yaml"):
        first = path.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../../schema/runbook.schema.json"
        assert (path.parent / "../../schema/runbook.schema.json").resolve().is_file()


def test_schema_documents_fields_for_completion() -> None:
    deployment = SCHEMA["$defs"]["Deployment"]["properties"]
    assert "GPU catalog" in deployment["gpu"]["description"]
    assert SCHEMA["$defs"]["Speculation"]["additionalProperties"] is False
