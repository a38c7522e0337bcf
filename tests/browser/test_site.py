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

from tests.browser.support import chromium, serve
from tests.support.paths import REPO

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
    # a pair with a speculation schedule also plots every static K against it
    breakeven = json.loads((REPO / "runbooks" / name / "generated" / "breakeven.json")
                           .read_text())
    scheduled = breakeven["schedule"]["schedule"] is not None
    assert len(images) == 4 + scheduled
    srcs = [img.get_attribute("src") or "" for img in images]
    assert any(src.endswith(f"{name}/schedule.svg") for src in srcs) == scheduled, srcs
    assert srcs[-1].endswith(f"{name}/plan-front.svg")
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
        # read in one script: the result list re-renders as the index answers, and an
        # element found a moment earlier can be gone when its text is read (stale)
        titles = browser.execute_script(
            "return [...document.querySelectorAll('.md-search-result__item')]"
            ".map(e => e.innerText)")
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


def smallest_text(svg: Path) -> float:
    """The smallest font size in a chart, as a fraction of its viewBox width (times the
    image's width on the page: CSS pixels). Both writers: text elements with font-size
    (charts.py) and matplotlib's glyphs as paths under `scale(s -s)`, s = size / 100."""
    content = svg.read_text()
    units = float(re.search(r'viewBox="0 0 ([0-9.]+)', content).group(1))
    sizes = [float(s) for s in re.findall(r'font-size="([0-9.]+)"', content)]
    sizes += [float(s) * 100 for s in re.findall(r"scale\(([0-9.]+) -\1\)", content)]
    assert sizes, svg
    return min(sizes) / units


@pytest.fixture
def page_at(browser: webdriver.Chrome, server: str, request: pytest.FixtureRequest
            ) -> Iterator[webdriver.Chrome]:
    """The pair page `name` loaded at `width` px (both from the test's parameters); one
    bug per test, so each check shows on its own whether it fails on the pre-fix site."""
    name, width = request.node.callspec.params["name"], request.node.callspec.params["width"]
    browser.set_window_size(width, 1000)
    try:
        load(browser, f"{server}/pairs/{name}.html")
        yield browser
    finally:
        browser.set_window_size(1280, 2000)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAIR_PAGES)
def test_the_plan_legend_keeps_the_asterisks_of_tau_star(page_at: webdriver.Chrome, name: str,
                                                          width: int) -> None:
    article = page_at.find_element(By.CSS_SELECTOR, "article")
    assert "SLO over τ*;" in article.text  # a pair of asterisks would become <em>
    assert not article.find_elements(By.XPATH, ".//p[contains(., 'τ SLO: the SLO')]//em")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAIR_PAGES)
def test_the_monitoring_sentence_shows_metric_names_as_code(page_at: webdriver.Chrome,
                                                             name: str, width: int) -> None:
    article = page_at.find_element(By.CSS_SELECTOR, "article")
    (monitoring,) = [p for p in article.find_elements(By.TAG_NAME, "p")
                     if "exports no per-request acceptance metric" in p.text]
    assert "`" not in monitoring.text and monitoring.find_elements(By.TAG_NAME, "code")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAIR_PAGES)
def test_the_first_launch_tab_is_the_runbook_engine(page_at: webdriver.Chrome, name: str,
                                                     width: int) -> None:
    first_tab = page_at.find_element(By.CSS_SELECTOR, ".tabbed-labels label").text
    assert first_tab == ("vLLM" if "vllm" in name else "SGLang")


@pytest.mark.parametrize("width", (1440,))
@pytest.mark.parametrize("name", PAIR_PAGES)
def test_no_table_scrolls_sideways_at_1440_px(page_at: webdriver.Chrome, name: str,
                                              width: int) -> None:
    wide = page_at.execute_script("""
      return [...document.querySelectorAll('article table')].filter(t => {
        const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
        return t.scrollWidth > box.clientWidth + 1;
      }).map(t => t.querySelector('th').innerText);""")
    assert wide == [], f"tables behind a horizontal scroll at {width} px: {wide}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAIR_PAGES)
def test_chart_text_is_at_least_9_px(page_at: webdriver.Chrome, built_site: Path, name: str,
                                     width: int) -> None:
    images = page_at.find_elements(By.CSS_SELECTOR, "article img")
    assert images
    for img in images:
        src = img.get_attribute("src").rsplit("/pairs/", 1)[1]
        px = smallest_text(built_site / "pairs" / src) * img.size["width"]
        assert px >= 9, f"{src}: {px:.1f} px text at {width} px"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page_at.save_screenshot(str(SCREENSHOTS / f"{name}-{width}.png"))


@pytest.mark.parametrize("name", PAIR_PAGES)
def test_chart_text_stays_inside_the_chart(browser: webdriver.Chrome, built_site: Path,
                                           name: str) -> None:
    """Each chart opened on its own: Chromium's own text layout (its fonts, not the
    writer's width estimate) keeps every label inside the viewBox and off the others."""
    charts = sorted((built_site / "pairs" / name).glob("*.svg"))
    assert len(charts) >= 4
    for svg in charts:
        assert b"<text" in svg.read_bytes(), svg  # labels as text, laid out by the browser
        load(browser, svg.as_uri())
        problems = browser.execute_script("""
          const root = document.documentElement.getBoundingClientRect();
          const texts = [...document.querySelectorAll('text')].map(
            t => [t, t.getBoundingClientRect()]);
          const out = [];
          for (const [t, b] of texts)
            if (b.left < root.left - 0.5 || b.top < root.top - 0.5 ||
                b.right > root.right + 0.5 || b.bottom > root.bottom + 0.5)
              out.push('outside: ' + t.textContent);
          for (let i = 0; i < texts.length; i++)
            for (let j = i + 1; j < texts.length; j++) {
              const [a, p] = texts[i], [b, q] = texts[j];
              if (p.left < q.right - 1 && q.left < p.right - 1 &&
                  p.top < q.bottom - 1 && q.top < p.bottom - 1)
                out.push('overlap: ' + a.textContent + ' / ' + b.textContent);
            }
          return out;""")
        assert problems == [], f"{svg.name}: {problems}"


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
        # read in one script: the result list re-renders as the index answers, and an
        # element found a moment earlier can be gone when its text is read (stale)
        titles = browser.execute_script(
            "return [...document.querySelectorAll('.md-search-result__item')]"
            ".map(e => e.innerText)")
    assert any("Ling-3.0-flash" in t for t in titles), titles
    box.send_keys(Keys.ESCAPE)
