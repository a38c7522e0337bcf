"""The GPU catalog is validated like every other input: each entry through pydantic, its
interconnect a link the step model has a figure for (no GPU's link is guessed from the
spelling of its name)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from specpair.analyse.step_links import LINKS, link_for
from specpair.facts import hardware


def _raw() -> list[dict[str, Any]]:
    text = resources.files("specpair").joinpath("data/gpus.yaml").read_text(encoding="utf-8")
    entries: list[dict[str, Any]] = yaml.safe_load(text)["gpus"]
    return entries


@pytest.mark.parametrize("key", sorted(hardware.CATALOG))
def test_every_gpu_links_its_ranks_over_a_link_with_a_figure(key: str) -> None:
    gpu = hardware.CATALOG[key]
    for p2p in (None, True, False):
        assert link_for(gpu, p2p) in LINKS, (key, p2p)


def test_a_geforce_card_stages_through_host_memory_unless_a_point_says_otherwise() -> None:
    rtx = hardware.CATALOG["RTX-4090-24GB"]
    assert not rtx.peer_to_peer
    assert link_for(rtx) == "pcie4-host" and link_for(rtx, True) == "pcie4"


@pytest.mark.parametrize("field, value, message", [
    ("interconnect", "infiniband", "interconnect"),
    ("memory_kind", "sram", "memory_kind"),
    ("measured_bandwidth_tb_s", 99.0, "must lie in"),
    ("colour", "green", "colour"),
])
def test_a_malformed_entry_is_refused_by_field(field: str, value: object,
                                               message: str) -> None:
    entry = {**_raw()[0], field: value}
    with pytest.raises(ValidationError, match=message):
        hardware.CatalogEntry.model_validate(entry)


def test_the_catalog_as_shipped_validates() -> None:
    keys = [hardware.CatalogEntry.model_validate(raw).key for raw in _raw()]
    assert keys == list(hardware.CATALOG)


@pytest.mark.parametrize("key", sorted(k for k, g in hardware.CATALOG.items()
                                       if " SXM" in g.name))
def test_an_sxm_board_all_reduces_over_nvlink(key: str) -> None:
    # SXM modules carry NVLink (NVIDIA's A100/H100/H200 datasheets: 600 and 900 GB/s);
    # the old name rule read "A100" as an "A10" PCIe card and gave it PCIe 4.0
    assert link_for(hardware.CATALOG[key]).startswith("nvlink"), key
