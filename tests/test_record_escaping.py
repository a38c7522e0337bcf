"""Committed measurement and staging records are untrusted text too: planted in every
field they accept, nothing of the payload reaches the card or the site as markup. (The
Chromium test, tests/browser/test_injection.py, plants the same records in every example
and asks the DOM; this one runs in `nox -s tests` on the Markdown both are built from.)"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from specpair.commands import site
from specpair.commands.build import load_pairs, render
from tests.support.planted_records import FIXTURE, free_text_fields, plant

PAYLOAD = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> '
           '<specpair-pwn data-pwn=1></specpair-pwn> [c](javascript:window.__pwned=3) '
           '<javascript:window.__pwned=4> " onmouseover="x" \' <!-- ')
TAGS = re.compile(r"<(script|img|specpair-pwn|javascript:|!--)")
LINKS = re.compile(r"(?<!\\)\]\(javascript:")  # the site also escapes Markdown syntax


def test_record_text_reaches_card_and_site_inert(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    folder = root / "runbooks" / "tiny-vllm"
    shutil.copytree(FIXTURE, folder)
    shutil.rmtree(folder / "measurements")
    fields = free_text_fields(root, folder, "tiny-vllm", PAYLOAD)
    planted = {kind + ":" + ".".join(map(str, leaf)) for kind, leaves in fields.items()
               for leaf in leaves}
    # the fields the finding named, and the staging record's own text; a start is a
    # validated UTC time now (records are ordered by it), so no text can be planted there
    assert {"measurement:protocol.engine", "staging:host",
            "staging:phases.1.error"} <= planted, sorted(planted)
    assert not {"measurement:started_at", "staging:started_at"} & planted
    plant(folder, "tiny-vllm", PAYLOAD, fields)
    pairs = load_pairs(root)
    assert pairs[0].measurement is not None
    assert pairs[0].measurement.protocol.engine == PAYLOAD
    pages = site.render(pairs, {}).files
    card = render(root, pairs).files[Path("runbooks/tiny-vllm/generated/card.md")].decode()
    texts = {str(k): v.decode() for k, v in pages.items() if k.suffix == ".md"}
    texts["card.md"] = card
    assert "Cold start: measured against modelled" in texts["card.md"]
    for name, text in texts.items():
        found = TAGS.findall(text) + ([] if name == "card.md" else LINKS.findall(text))
        assert not found, (name, found)
    page = texts["site/docs/pairs/tiny-vllm.md"]
    assert "&lt;script&gt;" in page  # escaped, not dropped
