"""`pair.json`: the fully resolved pair, the input every other artifact derives from."""

from __future__ import annotations

from specpair.analyse.analysis import Analysis
from specpair.engines.verified_layouts import declared_notes
from specpair.generate.render import dump_json


def generate(a: Analysis) -> dict[str, bytes]:
    pair = a.pair
    # the card and staging.json have the measurements
    data = pair.model_dump(mode="json", exclude={"measurement", "staging_records"})
    if data["engine_verdict"] is None:  # present only where `specpair verify` recorded one
        del data["engine_verdict"]
    data["generated_by"] = "specpair build (do not edit; edit the runbook and rebuild)"
    if declared_notes(pair):  # only pairs that declare an unverified layout carry the key
        data["unverified"] = declared_notes(pair)
    return {"pair.json": dump_json(data)}
