"""The canary before traffic: a short, pinned request set replayed on a new server, judged
on the engine's own speculative counters. Standard library only, and one file: `specpair
canary` imports it, and the build writes it beside `canary.json` (generated/canary.py), so
a pod or a VM without specpair runs the same code:

    python3 canary.py --url http://127.0.0.1:8000 < canary.json > report.json

For each class of `canary.json` (a workload, or a class of captured traffic) in turn: a
scrape of /metrics, the class's requests at the deployment's concurrency, a second scrape;
τ of the class is the counters' growth between the two (`tau` in `metrics`: 1 + accepted
draft tokens / verify steps where the engine counts accepted tokens, else generated tokens
/ verify steps). The canary fails, naming class and depth, when

- the server exports no speculative counter, or they did not move (no draft verified:
  speculation is off, or the engine fell back silently);
- τ is below break-even τ* × (1 + margin) (`threshold`; none where the pair's latency
  model does not represent the deployment, and the report says so);
- the server drafts another number of tokens than the runbook (the per-position counter);
- a request failed, or the deadline passed;
- where the engine can answer without speculation on the same server (`lossless`), a
  temperature-0 answer differs from that answer. Where it cannot, the report says "not
  checked" and why.

Answers are input: each exchange has a deadline and a size limit checked as bytes arrive,
the whole run a deadline; the report holds no prompt or answer text, only counts, τ, the
first differing character of a divergence and errors cut short, and its size is bounded.

Exit status: 0 pass, 4 fail, 1 an input error (canary.json, or a server that does not
answer as an OpenAI-compatible engine), 2 usage.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

FORMAT = "specpair.canary/1"
EXIT_PASS, EXIT_INPUT, EXIT_USAGE, EXIT_FAIL = 0, 1, 2, 4
MAX_CLASSES = 16
MAX_REQUESTS = 256          # in all classes together
MAX_CONCURRENCY = 256
MAX_REASONS = 32
MAX_ERRORS_PER_CLASS = 4
MAX_TEXT = 160              # characters of an error or reason kept in the report
MAX_DEPTH = 64              # draft positions reported
MAX_REPORT_BYTES = 32 << 10
"""The report's size, whatever the server answers (tests/bench/test_canary_probe.py)."""

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION = re.compile(r'position="(\d+)"')


class CanaryInputError(Exception):
    """Input the canary cannot judge: `where` (file and field, or URL and path), `what`."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


# ---- Prometheus text (also specpair.bench.metrics' parser: one implementation) ----------

def parse(text: str) -> dict[str, dict[str, float]]:
    """{metric: {labels: value}}; `*_created` timestamps are skipped."""
    series: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match or match.group(1).endswith("_created"):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        series.setdefault(match.group(1), {})[match.group(2) or ""] = value
    return series


def total(series: dict[str, dict[str, float]], name: str) -> float:
    return sum(series.get(name, {}).values())


def per_position(series: dict[str, dict[str, float]], name: str) -> list[float]:
    """The values of a counter labelled by `position="k"`, ordered by k (summed over its
    other labels, e.g. vLLM's `engine`); empty when the server exports no such counter.
    Positions must run 0..K-1 without a gap, as vLLM labels them (`range(num_spec_tokens)`
    in `SpecDecodingProm.__init__`, vllm/v1/spec_decode/metrics.py)."""
    by_position: dict[int, float] = {}
    for labels, value in series.get(name, {}).items():
        match = _POSITION.search(labels)
        if match is None:
            raise ValueError(f"{name} series without a position label: {labels or '{}'}")
        k = int(match.group(1))
        by_position[k] = by_position.get(k, 0.0) + value
    if sorted(by_position) != list(range(len(by_position))):
        raise ValueError(f"{name} positions are not 0..K-1: {sorted(by_position)}")
    return [by_position[k] for k in range(len(by_position))]


# ---- canary.json ------------------------------------------------------------------------

def _need(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CanaryInputError(where, f"expected {what}")
    return value


def check_config(config: Any, where: str = "canary.json") -> dict[str, Any]:
    """The config, or CanaryInputError naming the field."""
    _need(config, dict, where, "a JSON object")
    if config.get("format") != FORMAT:
        raise CanaryInputError(f"{where}: field format", f"expected {FORMAT!r} (written by "
                               "this specpair release's build)")
    for key in ("pair", "engine"):
        _need(config.get(key), str, f"{where}: field {key}", "a string")
    c = _need(config.get("concurrency"), int, f"{where}: field concurrency", "a whole number")
    if not 1 <= c <= MAX_CONCURRENCY:
        raise CanaryInputError(f"{where}: field concurrency", f"expected 1 to {MAX_CONCURRENCY}")
    for key in ("depth", "positions"):
        if config.get(key) is not None:
            _need(config[key], int, f"{where}: field {key}", "a whole number or null")
    metrics = _need(config.get("metrics"), dict, f"{where}: field metrics", "an object")
    for key in ("prefix", "verify_steps", "generated"):
        _need(metrics.get(key), str, f"{where}: field metrics.{key}", "a metric name")
    for key in ("accepted", "drafted", "per_position"):
        if metrics.get(key) is not None:
            _need(metrics[key], str, f"{where}: field metrics.{key}", "a metric name or null")
    _check_threshold(config.get("threshold"), f"{where}: field threshold")
    bounds = _need(config.get("bounds"), dict, f"{where}: field bounds", "an object")
    for key in ("deadline_s", "request_timeout_s", "max_answer_bytes", "max_metrics_bytes"):
        value = _need(bounds.get(key), (int, float), f"{where}: field bounds.{key}", "a number")
        if not 0 < value < 1e10:
            raise CanaryInputError(f"{where}: field bounds.{key}", "expected a positive number")
    _need(config.get("request_extras", {}), dict, f"{where}: field request_extras", "an object")
    lossless = _need(config.get("lossless"), dict, f"{where}: field lossless", "an object")
    if ("extras" in lossless) == ("not_checked" in lossless):
        raise CanaryInputError(f"{where}: field lossless", "expected `extras` (how the engine "
                               "answers without speculation) or `not_checked` (why it cannot)")
    _check_classes(config.get("classes"), f"{where}: field classes")
    return dict(config)


def _check_threshold(threshold: Any, where: str) -> None:
    _need(threshold, dict, where, "an object")
    if threshold.get("min_tau") is None:
        _need(threshold.get("why_none"), str, f"{where}.why_none", "why there is no threshold")
        return
    for key in ("min_tau", "break_even", "margin"):
        value = _need(threshold.get(key), (int, float), f"{where}.{key}", "a number")
        if not 0 <= value <= 1000:
            raise CanaryInputError(f"{where}.{key}", "expected a number from 0 to 1000")


def _check_classes(classes: Any, where: str) -> None:
    _need(classes, list, where, "a list")
    if not 1 <= len(classes) <= MAX_CLASSES:
        raise CanaryInputError(where, f"expected 1 to {MAX_CLASSES} classes")
    count = 0
    for i, entry in enumerate(classes):
        at = f"{where}[{i}]"
        _need(entry, dict, at, "an object")
        name = _need(entry.get("name"), str, f"{at}.name", "a class name")
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", name):
            raise CanaryInputError(f"{at}.name", "expected 1-64 letters, digits, `_.:-`")
        requests = _need(entry.get("requests"), list, f"{at}.requests", "a list")
        if not requests:
            raise CanaryInputError(f"{at}.requests", "expected at least one request")
        for j, request in enumerate(requests):
            _need(request, dict, f"{at}.requests[{j}]", "an object")
            if request.get("path") not in ("/v1/completions", "/v1/chat/completions"):
                raise CanaryInputError(f"{at}.requests[{j}].path",
                                       "expected /v1/completions or /v1/chat/completions")
            _need(request.get("body"), dict, f"{at}.requests[{j}].body", "an object")
        count += len(requests)
    if count > MAX_REQUESTS:
        raise CanaryInputError(where, f"{count} requests; the canary sends at most "
                               f"{MAX_REQUESTS}")


# ---- bounded HTTP -----------------------------------------------------------------------

def _cut(text: str, n: int = MAX_TEXT) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= n else text[:n - 1] + "…"


def shown(url: str) -> str:
    """`url` without user and password, for messages and the report."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port is not None else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


def exchange(url: str, body: dict[str, Any] | None, limit: int, deadline: float
             ) -> tuple[int, bytes]:
    """One GET (body None) or JSON POST: (status, body). The whole exchange ends at
    `deadline` (time.monotonic()); a body over `limit` bytes ends it as it arrives.
    Raises OSError (unreachable, refused, too slow) or ValueError (too large)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the canary's deadline passed")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        response = urllib.request.urlopen(request, timeout=remaining)
    except urllib.error.HTTPError as exc:
        response = exc
    with response:
        size = response.headers.get("Content-Length")
        if size is not None and size.isdigit() and int(size) > limit:
            raise ValueError(f"an answer of {int(size):,} bytes; at most {limit:,} are read")
        chunks: list[bytes] = []
        got = 0
        # read1: what has arrived (read(n) would wait for n bytes, past the deadline)
        # (an HTTPError wraps the HTTPResponse; an HTTPResponse's own fp is the raw socket)
        source = response.fp if isinstance(response, urllib.error.HTTPError) and \
            response.fp is not None else response
        read = getattr(source, "read1", source.read)
        while chunk := read(min(65536, limit + 1 - got) or 1):
            chunks.append(chunk)
            got += len(chunk)
            if got > limit:
                raise ValueError(f"an answer over {limit:,} bytes")
            if time.monotonic() > deadline:
                raise TimeoutError("the answer did not end before the canary's deadline")
        return int(response.status), b"".join(chunks)


def scrape(url: str, config: dict[str, Any], deadline: float) -> dict[str, dict[str, float]]:
    where = f"{shown(url)}/metrics"
    try:
        status, data = exchange(url + "/metrics", None,
                                int(config["bounds"]["max_metrics_bytes"]), deadline)
    except (OSError, ValueError) as exc:
        raise CanaryInputError(where, _cut(f"{type(exc).__name__}: {exc}")) from None
    if status != 200:
        raise CanaryInputError(where, f"answered HTTP {status}")
    return parse(data.decode("utf-8", errors="replace"))


def served_model(url: str, config: dict[str, Any], deadline: float) -> str:
    where = f"{shown(url)}/v1/models"
    try:
        status, data = exchange(url + "/v1/models", None,
                                int(config["bounds"]["max_answer_bytes"]), deadline)
        answer = json.loads(data) if status == 200 else None
    except (OSError, ValueError) as exc:
        raise CanaryInputError(where, _cut(f"{type(exc).__name__}: {exc}")) from None
    listed = answer.get("data") if isinstance(answer, dict) else None
    first = listed[0] if isinstance(listed, list) and listed else None
    if not isinstance(first, dict) or not isinstance(first.get("id"), str):
        raise CanaryInputError(where, f"answered HTTP {status} with no served model")
    return str(first["id"])


def _answer_text(answer: Any) -> str:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, dict):
        raise ValueError("no choices in the answer")
    message = first.get("message")
    text = message.get("content") if isinstance(message, dict) else first.get("text")
    if not isinstance(text, str):
        raise ValueError("no text in the answer's first choice")
    return text


def ask(url: str, request: dict[str, Any], model: str, extras: dict[str, Any],
        config: dict[str, Any], deadline: float) -> tuple[str | None, str | None]:
    """(answer text, None) or (None, error) for one request."""
    bounds = config["bounds"]
    body = {**request["body"], **extras, "model": model, "stream": False}
    try:
        status, data = exchange(url + request["path"], body, int(bounds["max_answer_bytes"]),
                                min(deadline, time.monotonic() + bounds["request_timeout_s"]))
        if status != 200:
            return None, f"HTTP {status}"  # the status only: an error can quote the prompt
        return _answer_text(json.loads(data)), None
    except (OSError, ValueError) as exc:
        return None, _cut(f"{type(exc).__name__}: {exc}")


def ask_all(url: str, requests: list[dict[str, Any]], model: str, extras: dict[str, Any],
            config: dict[str, Any], deadline: float) -> list[tuple[str | None, str | None]]:
    with ThreadPoolExecutor(max_workers=int(config["concurrency"])) as pool:
        return list(pool.map(lambda r: ask(url, r, model, extras, config, deadline), requests))


# ---- the run ----------------------------------------------------------------------------

def counters(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]],
             metrics: dict[str, Any]) -> dict[str, Any]:
    """The speculative counters' growth over one class: verify steps, accepted, drafted,
    generated, accepted per position, and τ (None without a verify step)."""
    def grew(name: str | None) -> float:
        return total(after, name) - total(before, name) if name else 0.0

    steps = grew(metrics["verify_steps"])
    accepted, generated = grew(metrics.get("accepted")), grew(metrics["generated"])
    positions: list[float] = []
    name = metrics.get("per_position")
    if name and name in after:
        now, then = per_position(after, name), per_position(before, name)
        then = then or [0.0] * len(now)
        if len(then) != len(now):
            raise ValueError(f"{name} changed its positions during the canary: the server "
                             "restarted")
        positions = [a - b for a, b in zip(now, then, strict=True)]
    if steps > 0:
        tau = 1 + accepted / steps if metrics.get("accepted") else generated / steps
        by_depth = [round(1 + sum(positions[:g]) / steps, 4)
                    for g in range(1, min(len(positions), MAX_DEPTH) + 1)]
    else:
        tau, by_depth = None, []
    return {"verify_steps": steps, "accepted": accepted, "drafted": grew(metrics.get("drafted")),
            "generated": generated, "positions": len(positions),
            "tau": None if tau is None else round(tau, 4), "tau_by_depth": by_depth}


def judge(name: str, grown: dict[str, Any], speculating: bool, errors: list[str],
          config: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasons one class fails, each naming class and depth."""
    depth = config.get("depth")
    threshold = config["threshold"]
    out: list[dict[str, Any]] = []

    def fail(check: str, message: str) -> None:
        out.append({"check": check, "class": name, "depth": depth, "message": _cut(message)})

    if errors:
        fail("errors", f"{len(errors)} request(s) failed, e.g. {errors[0]}")
    if not speculating:
        fail("no-speculation", "the server exports no speculative-decoding counter "
             f"({config['metrics']['prefix']}*): it runs without a draft")
    elif not grown["verify_steps"]:
        fail("no-drafts", "the speculative counters did not move: no draft was verified "
             "(speculation off, or a silent fallback)")
    else:
        expected = config.get("positions")
        if expected is not None and grown["positions"] and grown["positions"] != expected:
            fail("depth", f"the server drafts {grown['positions']} tokens per step, the "
                 f"runbook {expected}: it runs another speculative config")
        tau, floor = grown["tau"], threshold.get("min_tau")
        if floor is not None and tau is not None and tau < floor:
            fail("tau", f"τ {tau:.3f} < {floor:.3f} = break-even τ* "
                 f"{threshold['break_even']:.3f} × (1 + margin {threshold['margin']:g})")
    return out


def _lossless(url: str, model: str, config: dict[str, Any], answers: dict[tuple[int, int], str],
              deadline: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Temperature-0 answers against the same server's non-speculative ones, where the
    engine gives them."""
    how = config["lossless"]
    if "not_checked" in how:
        return {"checked": False, "reason": "not checked: " + _cut(how["not_checked"], 400)}, []
    greedy = [(key, request) for i, entry in enumerate(config["classes"])
              for j, request in enumerate(entry["requests"])
              if request["body"].get("temperature") == 0 and (key := (i, j)) in answers]
    again = ask_all(url, [r for _, r in greedy], model, dict(how["extras"]), config, deadline)
    reasons, compared = [], 0
    for ((i, j), _), (text, error) in zip(greedy, again, strict=True):
        name = config["classes"][i]["name"]
        if error is not None:
            reasons.append({"check": "lossless", "class": name, "depth": config.get("depth"),
                            "message": f"request {j} without speculation failed: {error}"})
            continue
        compared += 1
        mine = answers[(i, j)]
        if text != mine:
            theirs = text or ""
            at = next((n for n, (a, b) in enumerate(zip(theirs, mine, strict=False))
                       if a != b), min(len(theirs), len(mine)))
            reasons.append({"check": "lossless", "class": name, "depth": config.get("depth"),
                            "message": f"request {j}: the speculative answer differs from the "
                            f"non-speculative one at character {at}"})
    return {"checked": True, "compared": compared}, reasons


def run_class(url: str, model: str, index: int, config: dict[str, Any], deadline: float,
              answers: dict[tuple[int, int], str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    entry = config["classes"][index]
    before = scrape(url, config, deadline)
    results = ask_all(url, entry["requests"], model, dict(config.get("request_extras", {})),
                      config, deadline)
    after = scrape(url, config, deadline)
    prefix = config["metrics"]["prefix"]
    speculating = any(n.startswith(prefix) for n in after)
    try:
        grown = counters(before, after, config["metrics"])
    except ValueError as exc:
        raise CanaryInputError(f"{shown(url)}/metrics", _cut(str(exc))) from None
    errors = [e for _, e in results if e is not None]
    for j, (text, _) in enumerate(results):
        if text is not None:
            answers[(index, j)] = text
    summary = {"class": entry["name"], "requests": len(entry["requests"]),
               "succeeded": len(results) - len(errors),
               "errors": sorted(set(errors))[:MAX_ERRORS_PER_CLASS], **grown}
    return summary, judge(entry["name"], grown, speculating, errors, config)


def run(config: dict[str, Any], url: str) -> dict[str, Any]:
    """The canary on the server at `url`; the report (a JSON object, bounded)."""
    config = check_config(config)
    url = url.rstrip("/")
    started = time.monotonic()
    deadline = started + float(config["bounds"]["deadline_s"])
    model = served_model(url, config, deadline)
    classes, reasons = [], []
    answers: dict[tuple[int, int], str] = {}
    for index in range(len(config["classes"])):
        summary, failed = run_class(url, model, index, config, deadline, answers)
        classes.append(summary)
        reasons += failed
    lossless, diverged = _lossless(url, model, config, answers, deadline)
    reasons += diverged
    threshold = config["threshold"]
    report = {
        "format": FORMAT, "pair": _cut(config["pair"], 64), "engine": _cut(config["engine"], 64),
        "url": _cut(shown(url), 200), "verdict": "fail" if reasons else "pass",
        "reasons": reasons[:MAX_REASONS], "reasons_total": len(reasons),
        "concurrency": config["concurrency"], "depth": config.get("depth"),
        "threshold": {k: threshold.get(k) for k in ("min_tau", "break_even", "margin",
                                                    "why_none", "source", "note")
                      if threshold.get(k) is not None},
        "lossless": lossless, "classes": classes,
        "requests_sent": sum(c["requests"] for c in classes),
        "elapsed_s": round(time.monotonic() - started, 3)}
    if threshold.get("min_tau") is None:
        report["threshold"]["checked"] = "not checked: " + _cut(threshold["why_none"], 400)
    return report


def summary(report: dict[str, Any]) -> str:
    """The report for people: the verdict, each reason, τ per class."""
    lines = [f"canary {report['verdict'].upper()}: {report['pair']} at {report['url']} "
             f"(concurrency {report['concurrency']}, depth {report['depth']})"]
    floor = report["threshold"].get("min_tau")
    lines += [f"  {c['class']}: τ {c['tau'] if c['tau'] is not None else '—'}"
              + (f" (needs ≥ {floor:.3f})" if floor is not None else "")
              + f", {c['succeeded']}/{c['requests']} answered, "
              f"{int(c['verify_steps'])} verify steps" for c in report["classes"]]
    if "note" in report["threshold"]:
        lines.append(f"  note: {report['threshold']['note']}")
    if "checked" in report["threshold"]:
        lines.append(f"  τ threshold {report['threshold']['checked']}")
    if not report["lossless"]["checked"]:
        lines.append(f"  lossless: {report['lossless']['reason']}")
    lines += [f"  FAIL {r['check']}: class {r['class']} depth {r['depth']}: {r['message']}"
              for r in report["reasons"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="canary.py", description="the canary before "
                                     "traffic; canary.json on stdin, the report on stdout")
    parser.add_argument("--url", required=True, help="the new server, e.g. "
                        "http://127.0.0.1:8000")
    args = parser.parse_args(argv)
    try:
        config = json.loads(sys.stdin.read(4 << 20))
    except ValueError as exc:
        print(f"canary.json (stdin): not JSON: {_cut(str(exc))}", file=sys.stderr)
        return EXIT_INPUT
    try:
        report = run(config, args.url)
    except CanaryInputError as exc:
        print(f"{exc.where}: {exc.what}", file=sys.stderr)
        return EXIT_INPUT
    print(json.dumps(report, sort_keys=True, ensure_ascii=False))
    print(summary(report), end="", file=sys.stderr)
    return EXIT_PASS if report["verdict"] == "pass" else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
