"""The built site in headless Chromium (Debian's chromium + chromium-driver): every pair
page renders its tables and charts without console errors, search finds a pair, and
runbook text cannot inject markup. Run by `nox -s docs`; screenshots land in
site/screenshots/."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import chromium, serve
from tests.conftest import REPO

SCREENSHOTS = REPO / "site" / "screenshots"
HOSTILE = ("<script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned=2\"> "
           "[click](javascript:window.__pwned=3) **not bold** `not code`")


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site-repo")
    shutil.copytree(REPO / "runbooks", root / "runbooks")
    shutil.copytree(REPO / "site", root / "site",
                    ignore=shutil.ignore_patterns("site", "pairs", "screenshots"))
    hostile = root / "runbooks" / "hostile-text"
    shutil.copytree(REPO / "runbooks" / "llama33-70b-eagle3-vllm", hostile,
                    ignore=shutil.ignore_patterns("generated", "measurements"))
    runbook = hostile / "runbook.yaml"
    runbook.write_text(runbook.read_text()
                       .replace("name: llama33-70b-eagle3-vllm", "name: hostile-text")
                       .replace("title: Llama-3.3-70B-Instruct with an EAGLE-3 speculator on "
                                "vLLM", f"title: {json.dumps('Hostile ' + HOSTILE)}")
                       .replace("owner: serving-platform", f"owner: {json.dumps(HOSTILE)}"))
    lock = json.loads((hostile / "lock.json").read_text())
    lock["pair"] = "hostile-text"
    (hostile / "lock.json").write_text(json.dumps(lock))
    # two commits, the second changing a pair, so the change checklist has a base to show
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-qm", "base"], check=True)
    changed = root / "runbooks" / "qwen3-8b-dflash" / "runbook.jsonnet"
    changed.write_text(changed.read_text().replace("min_length: 3.0,", "min_length: 3.25,"))
    subprocess.run([*git, "-C", str(root), "commit", "-qam", "raise the SLO"], check=True)
    for args in (["site", "--changes-base", "HEAD~1"],):
        done = subprocess.run([sys.executable, "-m", "specpair", *args], cwd=root,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(root / "site" / "mkdocs.yml")], capture_output=True, text=True,
                          check=False, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    return root / "site" / "site"


@pytest.fixture(scope="module")
def server(built_site: Path) -> Iterator[str]:
    with serve(built_site) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()


def severe(driver: webdriver.Chrome) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE"]


def pair_names() -> list[str]:
    return sorted(p.parent.name for p in REPO.glob("runbooks/*/runbook.*"))


@pytest.mark.parametrize("name", pair_names())
def test_pair_page_renders_tables_and_charts(browser: webdriver.Chrome, server: str,
                                             name: str) -> None:
    severe(browser)  # drop what earlier pages logged
    browser.get(f"{server}/pairs/{name}.html")
    WebDriverWait(browser, 20).until(lambda d: d.execute_script(
        "return document.readyState") == "complete")
    assert len(browser.find_elements(By.CSS_SELECTOR, "article table")) >= 4
    images = browser.find_elements(By.CSS_SELECTOR, "article img")
    assert len(images) == 4
    assert images[-1].get_attribute("src").endswith(f"{name}/plan-front.svg")
    WebDriverWait(browser, 20).until(lambda d: all(d.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", img) for img in images))
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "article h2")]
    for section in ("Overview", "Launch commands", "Memory budget", "Acceptance and break-even",
                    "Plan", "Staging plan", "Checks", "Change checklist", "Pair card",
                    "Provenance"):
        assert any(h.startswith(section) for h in headings), (section, headings)
    assert severe(browser) == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def test_index_lists_every_pair(browser: webdriver.Chrome, server: str) -> None:
    browser.get(f"{server}/pairs/index.html")
    links = {a.get_attribute("href").rsplit("/", 1)[-1]
             for a in browser.find_elements(By.CSS_SELECTOR, "article table a")}
    assert {f"{n}.html" for n in pair_names()} <= links
    assert severe(browser) == []


def test_search_finds_a_pair(browser: webdriver.Chrome, server: str) -> None:
    browser.get(f"{server}/index.html")
    browser.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
    box = browser.find_element(By.CSS_SELECTOR, "input.md-search__input")
    box.send_keys("DSpark")
    deadline = time.monotonic() + 20
    titles: list[str] = []
    while time.monotonic() < deadline:
        titles = [r.text for r in browser.find_elements(By.CSS_SELECTOR,
                                                        ".md-search-result__item")]
        if any("Ling-3.0-flash" in t for t in titles):
            break
        time.sleep(0.5)
    assert any("Ling-3.0-flash" in t for t in titles), titles
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "search.png"))
    box.send_keys(Keys.ESCAPE)


def test_runbook_text_cannot_inject_markup(browser: webdriver.Chrome, server: str) -> None:
    browser.get(f"{server}/pairs/hostile-text.html")
    WebDriverWait(browser, 20).until(lambda d: d.execute_script(
        "return document.readyState") == "complete")
    assert browser.execute_script("return window.__pwned") is None
    article = browser.find_element(By.CSS_SELECTOR, "article")
    assert "<script>window.__pwned = 1</script>" in article.text  # shown as text
    assert not article.find_elements(By.CSS_SELECTOR, "a[href^='javascript']")
    assert not article.find_elements(By.CSS_SELECTOR, "img[src='x']")
    assert "**not bold**" in article.text


WIDTHS = (1440, 390)
PAIR_PAGES = ("qwen3-8b-dflash", "llama33-70b-eagle3-vllm")


def load(browser: webdriver.Chrome, url: str) -> None:
    browser.get(url)
    WebDriverWait(browser, 20).until(lambda d: d.execute_script(
        "return document.readyState") == "complete")


def smallest_glyph(svg: Path) -> float:
    """The smallest font size in a matplotlib SVG, in its own units: glyphs are written as
    paths under `scale(s -s)` with s = font size / 100."""
    sizes = [float(s) * 100 for s in re.findall(r"scale\(([0-9.]+) -\1\)", svg.read_text())]
    assert sizes, svg
    return min(sizes)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAIR_PAGES)
def test_pair_pages_read_right_at_two_widths(browser: webdriver.Chrome, server: str,
                                             built_site: Path, name: str, width: int) -> None:
    browser.set_window_size(width, 1000)
    try:
        load(browser, f"{server}/pairs/{name}.html")
        article = browser.find_element(By.CSS_SELECTOR, "article")
        # τ* in the plan legend keeps its asterisks (no <em> from a pair of them)
        assert "SLO over τ*;" in article.text
        assert not article.find_elements(By.XPATH, ".//p[contains(., 'τ SLO: the SLO')]//em")
        # the monitoring sentence shows metric names as code, not literal backticks
        (monitoring,) = [p for p in article.find_elements(By.TAG_NAME, "p")
                         if "exports no per-request acceptance metric" in p.text]
        assert "`" not in monitoring.text and monitoring.find_elements(By.TAG_NAME, "code")
        # the runbook's own engine is the first launch tab
        first_tab = browser.find_element(By.CSS_SELECTOR, ".tabbed-labels label").text
        assert first_tab == ("vLLM" if "vllm" in name else "SGLang")
        if width >= 1440:
            wide = browser.execute_script("""
              return [...document.querySelectorAll('article table')].filter(t => {
                const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
                return t.scrollWidth > box.clientWidth + 1;
              }).map(t => t.querySelector('th').innerText);""")
            assert wide == [], f"tables behind a horizontal scroll at {width} px: {wide}"
        for img in browser.find_elements(By.CSS_SELECTOR, "article img"):
            src = img.get_attribute("src").rsplit("/pairs/", 1)[1]
            svg = built_site / "pairs" / src
            units = float(re.search(r'viewBox="0 0 ([0-9.]+)', svg.read_text()).group(1))
            px = smallest_glyph(svg) * img.size["width"] / units
            assert px >= 9, f"{src}: {px:.1f} px text at {width} px"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SCREENSHOTS / f"{name}-{width}.png"))
    finally:
        browser.set_window_size(1280, 2000)


def test_the_change_checklist_names_its_base_plainly(browser: webdriver.Chrome,
                                                     server: str) -> None:
    load(browser, f"{server}/pairs/qwen3-8b-dflash.html")
    article = browser.find_element(By.CSS_SELECTOR, "article").text
    assert "Compared with HEAD~1" in article and "HEAD\\~1" not in article


def test_the_latency_model_is_not_a_pair_in_the_navigation(browser: webdriver.Chrome,
                                                           server: str) -> None:
    load(browser, f"{server}/pairs/index.html")
    titles = browser.execute_script("""
      const out = {};
      document.querySelectorAll('.md-nav--primary > .md-nav__list > .md-nav__item').forEach(i => {
        const label = i.querySelector(':scope > label, :scope > a');
        out[label ? label.textContent.trim() : '?'] =
          [...i.querySelectorAll('a')].map(a => a.textContent.trim());
      });
      return out;""")
    pairs = next(v for k, v in titles.items() if k.startswith("Pairs"))
    assert not any("latency model" in t for t in pairs), titles
    assert any("latency model" in t for v in titles.values() for t in v), titles


def test_search_works_from_disk(browser: webdriver.Chrome, built_site: Path) -> None:
    """Opened as file:// (no server): the offline plugin inlines the search index."""
    load(browser, (built_site / "index.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
    box = browser.find_element(By.CSS_SELECTOR, "input.md-search__input")
    box.send_keys("DSpark")
    deadline = time.monotonic() + 20
    titles: list[str] = []
    while time.monotonic() < deadline and not any("Ling-3.0-flash" in t for t in titles):
        time.sleep(0.5)
        titles = [r.text for r in browser.find_elements(By.CSS_SELECTOR,
                                                        ".md-search-result__item")]
    assert any("Ling-3.0-flash" in t for t in titles), titles
    box.send_keys(Keys.ESCAPE)
