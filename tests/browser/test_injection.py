"""Runbook text planted as an attacker would, read back from Chromium's DOM.

Every example runbook is copied once per payload with that payload in every free-text
field (a field is free text when the schema and the lock still accept the payload there:
titles, owners, descriptions, prompts, sources, waiver reasons, …), and in every string
field of a measurement and a staging record committed beside it. The site is built
with MkDocs Material and every page is loaded in headless Chromium; the test then asks the
DOM, not the page source, whether any planted element, attribute, link or script exists,
whether a script ran, whether the <title> still holds the literal title, and whether a
payload swallowed the rest of the page. Run by `nox -s docs`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.support.ui import WebDriverWait

from specpair.load.document import load_document
from specpair.load.runbooks import load_lock, load_runbook
from specpair.model.errors import SpecpairError
from specpair.resolve.pair import resolve
from tests.browser.support import chromium, serve
from tests.support.paths import REPO
from tests.support.planted_records import free_text_fields, plant, set_at, string_leaves

# One per context a runbook string can land in: <title> and <head>, element text,
# double- and single-quoted attributes, Markdown links and autolinks, reference links,
# attribute lists, HTML comments, entities, code spans and raw-text elements, SVG.
PAYLOADS = (
    '</title><specpair-pwn data-pwn="title"></specpair-pwn>',
    "<script>window.__pwned=2</script>",
    '<img src=x onerror="window.__pwned=3" data-pwn=img>',
    '"><specpair-pwn data-pwn=dq></specpair-pwn><b data-pwn="',
    "'><specpair-pwn data-pwn=sq></specpair-pwn><b data-pwn='",
    '" onmouseover="window.__pwned=6" data-pwn="attr-dq',
    "' onmouseover='window.__pwned=7' data-pwn='attr-sq",
    "[click](javascript:window.__pwned=8) <javascript:window.__pwned=8> [d](data:text/html,x)",
    'text {: #pwn-anchor .pwn-class data-pwn="attr-list" onclick="window.__pwned=9" }',
    "<!-- an unclosed comment swallows the page",
    "--><specpair-pwn data-pwn=comment-close></specpair-pwn>",
    "&lt;specpair-pwn data-pwn=entity&gt; &#60;specpair-pwn data-pwn=num&#62; &amp;lt;b&amp;gt;",
    "</code></textarea></style></script><specpair-pwn data-pwn=raw-close></specpair-pwn>",
    '<svg onload="window.__pwned=14"><a href="javascript:window.__pwned=14">x</a></svg>',
    '<base href="javascript:x//"><meta http-equiv=refresh content="0;url=javascript:x" '
    "data-pwn=meta>",
    "`` ` `` <specpair-pwn data-pwn=backtick></specpair-pwn> [x][r] [r]: javascript:void(15)",
)



def _bundles(payloads: tuple[str, ...], limit: int = 200) -> list[str]:
    """The payloads packed into as few strings as fit a short-text field (200 characters):
    one site copy per bundle rather than per payload keeps the browser pass short, and a
    payload that escapes its context also gets the others' text to break."""
    bundles: list[str] = []
    for payload in payloads:
        if bundles and len(bundles[-1]) + 1 + len(payload) <= limit:
            bundles[-1] += " " + payload
        else:
            bundles.append(payload)
    return bundles


BUNDLES = _bundles(PAYLOADS)

FIND_PLANTED = """
const found = [];
const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
for (const el of document.querySelectorAll('*')) {
  if (el.tagName.toLowerCase().startsWith('specpair-')) found.push('element ' + describe(el));
  if (el.id === 'pwn-anchor') found.push('attribute-list id on ' + describe(el));
  if (el.classList.contains('pwn-class')) found.push('attribute-list class on ' + describe(el));
  for (const attr of el.attributes) {
    const name = attr.name.toLowerCase(), value = attr.value;
    if (name.startsWith('data-pwn')) found.push(name + ' on ' + describe(el));
    if (name.startsWith('on') && /pwned|pwn\\(/.test(value))
      found.push(name + ' handler on ' + describe(el));
    if (['href', 'src', 'action', 'formaction', 'xlink:href'].includes(name)
        && /^\\s*(javascript|vbscript):/i.test(value))
      found.push(name + '=' + value + ' on ' + describe(el));
    if (name === 'href' && /^\\s*data:/i.test(value) && el.tagName === 'A')
      found.push('data: link on ' + describe(el));
  }
  if (el.tagName === 'META' && /refresh/i.test(el.getAttribute('http-equiv') || ''))
    found.push('meta refresh');
}
for (const script of document.scripts)
  if (script.textContent.includes('__pwned')) found.push('script element');
if (window.__pwned !== undefined) found.push('a payload ran: ' + window.__pwned);
return found;
"""


def _accepts(folder: Path, data: dict[str, Any], lock: dict[str, Any]) -> bool:
    """Whether specpair loads and resolves the runbook as written."""
    (folder / "runbook.yaml").write_text(json.dumps(data, ensure_ascii=False))
    (folder / "lock.json").write_text(json.dumps(lock))
    try:
        loaded = load_runbook(folder / "runbook.yaml")
        resolve(loaded, load_lock(folder)[0], str(folder / "lock.json"))
    except SpecpairError:
        return False
    return True


def _free_text_fields(scratch: Path, data: dict[str, Any],
                      lock: dict[str, Any]) -> list[tuple[Any, ...]]:
    probe = max(BUNDLES, key=len)
    fields = []
    lock = dict(lock, pair=scratch.name)  # a pair's name must equal its folder's
    for path in string_leaves(data):
        candidate = json.loads(json.dumps(data))
        candidate["pair"]["name"] = scratch.name
        set_at(candidate, path, probe)
        if _accepts(scratch, candidate, lock):
            fields.append(path)
    return fields


@pytest.fixture(scope="module")
def planted_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The site of every example × payload; returns its folder and each page's title."""
    root = tmp_path_factory.mktemp("planted-repo")
    shutil.copytree(REPO / "site", root / "site",
                    ignore=shutil.ignore_patterns("site", "pairs", "screenshots"))
    scratch = root / "runbooks" / "scratch"
    scratch.mkdir(parents=True)
    titles: dict[str, str] = {}
    planted_fields: dict[str, list[str]] = {}
    record_fields: dict[str, list[tuple[Any, ...]]] | None = None
    for source in sorted(REPO.glob("runbooks/*/runbook.*")):
        example = source.parent.name
        data = load_document(source, REPO / "runbooks").data
        # optional free text the example leaves at its default is planted too
        data["pair"].setdefault("description", "")
        data.setdefault("staging", {}).setdefault("warmup", {}).setdefault("prompt", "Hi.")
        lock = json.loads((source.parent / "lock.json").read_text())
        fields = _free_text_fields(scratch, data, lock)
        planted_fields[example] = [".".join(map(str, f)) for f in fields]
        for number, payload in enumerate(BUNDLES):
            name = f"{example}-p{number}"
            copy, copy_lock = json.loads(json.dumps(data)), dict(lock, pair=name)
            for path in fields:
                set_at(copy, path, payload)
            copy["pair"]["name"] = name
            folder = root / "runbooks" / name
            folder.mkdir()
            assert _accepts(folder, copy, copy_lock), name
            # committed measurement and staging records are planted too (no example has
            # one): their fields reach the pair card
            if record_fields is None:
                record_fields = free_text_fields(root, folder, name, max(BUNDLES, key=len))
                # a start is a validated UTC time (records are ordered by it): no text
                # can be planted there any more
                assert ("protocol", "engine") in record_fields["measurement"], record_fields
                assert ("started_at",) not in record_fields["measurement"], record_fields
            plant(folder, name, payload, record_fields)
            titles[name] = " ".join(copy["pair"]["title"].split())
    shutil.rmtree(scratch)
    for example, fields in planted_fields.items():
        assert {"pair.title", "pair.owner", "pair.description",
                "staging.warmup.prompt"} <= set(fields), (example, fields)
    done = subprocess.run([sys.executable, "-m", "specpair", "site"], cwd=root,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f",
                           str(root / "site" / "mkdocs.yml")], capture_output=True, text=True,
                          check=False, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    return root / "site" / "site", titles


@pytest.fixture(scope="module")
def server(planted_site: tuple[Path, dict[str, str]]) -> Iterator[str]:
    with serve(planted_site[0]) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    driver = chromium(tmp_path_factory.mktemp("chromium-planted"))
    yield driver
    driver.quit()


def test_no_planted_markup_survives_on_any_page(
        planted_site: tuple[Path, dict[str, str]], server: str,
        browser: webdriver.Chrome) -> None:
    site, titles = planted_site
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert len(pages) >= len(titles) + 2  # every planted pair, the pairs index, the home
    problems: dict[str, list[str]] = {}
    for page in pages:
        browser.get(f"{server}/{page}")
        WebDriverWait(browser, 20).until(lambda d: d.execute_script(
            "return document.readyState") == "complete")
        found: list[str] = browser.execute_script(FIND_PLANTED)
        name = Path(page).stem
        if page.startswith("pairs/") and name in titles:
            # the literal title, as text, in <title>: no breakout, no double escaping
            if not browser.title.startswith(titles[name]):
                found.append(f"<title> is {browser.title!r}, expected {titles[name]!r}")
            headings = browser.execute_script(
                "return [...document.querySelectorAll('article h2')].map(h => h.textContent)")
            if not any(h.startswith("Provenance") for h in headings):
                found.append(f"page cut short: last sections missing ({headings})")
        if found:
            problems[page] = found
    assert problems == {}, json.dumps(problems, indent=1)
