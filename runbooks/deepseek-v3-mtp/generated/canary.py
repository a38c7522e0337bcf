"""The canary before traffic: a short, pinned request set replayed on a new server, judged
on the engine's own speculative counters. Standard library only and one file: `specpair
canary` imports it, and the build writes it as generated/canary.py beside canary.json, so
a pod without specpair runs the same code:

    python3 canary.py --url http://127.0.0.1:8000 < canary.json > report.json

Per class of canary.json (a workload, or a class of captured traffic), in turn: a scrape
of /metrics, the class's requests at the deployment's concurrency, a second scrape; τ is
the counters' growth (1 + accepted / verify steps, or generated / verify steps where the
engine counts no accepted tokens). It fails, naming class and depth, when the server has
no speculative counter or they did not move (speculation off, a silent fallback), τ is
below break-even τ* × (1 + margin), the server drafts another length than the runbook, a
request fails or the deadline passes, or (where the engine can answer without speculation
on the same server, `lossless`) a temperature-0 answer differs; where it cannot, the
report says "not checked" and why. Answers are input: each exchange has a deadline and a
size limit checked as bytes arrive; the report holds no prompt or answer text and its size
is bounded. Exit status: 0 pass, 4 fail, 1 input error (canary.json, or a server that
does not answer as an OpenAI-compatible engine), 2 usage. `--serve PORT` serves a
report's verdict as Prometheus metrics (the deployment's gate, generate/canary_gate.py).
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
MAX_CLASSES, MAX_REQUESTS, MAX_CONCURRENCY = 16, 256, 256  # requests: all classes
MAX_REASONS, MAX_ERRORS_PER_CLASS, MAX_DEPTH = 32, 4, 64
MAX_TEXT = 160              # characters of an error or reason kept in the report
MAX_REPORT_BYTES = 32 << 10  # whatever the server answers (tests/bench/test_canary_probe.py)

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION = re.compile(r'position="(\d+)"')


class CanaryInputError(Exception):
    """Input the canary cannot judge: `where` (file and field, or URL and path), `what`."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


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
    """A counter labelled `position="k"` by k (summed over other labels), [] without it;
    positions run 0..K-1 as vLLM labels them (SpecDecodingProm, v1/spec_decode/metrics.py)."""
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
        _need(config.get(key, 0), (int, type(None)), f"{where}: field {key}", "a whole number")
    metrics = _need(config.get("metrics"), dict, f"{where}: field metrics", "an object")
    for key in ("prefix", "verify_steps", "generated", "accepted", "drafted", "per_position"):
        _need(metrics.get(key), str if key in ("prefix", "verify_steps", "generated") else
              (str, type(None)), f"{where}: field metrics.{key}", "a metric name")
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


def _cut(text: str, n: int = MAX_TEXT) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= n else text[:n - 1] + "…"


def shown(url: str) -> str:  # without user and password, for messages and the report
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
        # read1: what has arrived (read(n) waits for n bytes); HTTPError wraps the response
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


def _get(url: str, path: str, limit: int, deadline: float) -> bytes:
    """The 200 answer of a GET, else CanaryInputError at the URL and path."""
    try:
        status, data = exchange(url + path, None, limit, deadline)
    except (OSError, ValueError) as exc:
        raise CanaryInputError(shown(url) + path, _cut(f"{type(exc).__name__}: {exc}")) from None
    if status != 200:
        raise CanaryInputError(shown(url) + path, f"answered HTTP {status}")
    return data


def scrape(url: str, config: dict[str, Any], deadline: float) -> dict[str, dict[str, float]]:
    data = _get(url, "/metrics", int(config["bounds"]["max_metrics_bytes"]), deadline)
    return parse(data.decode("utf-8", errors="replace"))


def served_model(url: str, config: dict[str, Any], deadline: float) -> str:
    data = _get(url, "/v1/models", int(config["bounds"]["max_answer_bytes"]), deadline)
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    listed = answer.get("data") if isinstance(answer, dict) else None
    first = listed[0] if isinstance(listed, list) and listed else None
    if not isinstance(first, dict) or not isinstance(first.get("id"), str):
        raise CanaryInputError(f"{shown(url)}/v1/models", "lists no served model")
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


def counters(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]],
             metrics: dict[str, Any]) -> dict[str, Any]:
    """The speculative counters' growth over one class, and τ (None without a verify step)."""
    def grew(name: str | None) -> float:
        return total(after, name) - total(before, name) if name else 0.0

    steps = grew(metrics["verify_steps"])
    accepted, generated = grew(metrics.get("accepted")), grew(metrics["generated"])
    positions: list[float] = []
    name = metrics.get("per_position")
    if name and name in after:
        now, then = per_position(after, name), per_position(before, name)
        if len(then or now) != len(now):
            raise ValueError(f"{name} changed its positions during the canary: restarted?")
        then = then or [0.0] * len(now)
        positions = [a - b for a, b in zip(now, then, strict=True)]
    tau = None if steps <= 0 else (1 + accepted / steps if metrics.get("accepted")
                                   else generated / steps)
    by_depth = [round(1 + sum(positions[:g]) / steps, 4)
                for g in range(1, min(len(positions), MAX_DEPTH) + 1)] if steps > 0 else []
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
                 f"{threshold['break_even']:.3f} × (1 + margin {threshold['margin']:g})"
                 + (" (τ* unverified: threshold.unverified)" if "unverified" in threshold
                    else ""))
    return out


def _lossless(url: str, model: str, config: dict[str, Any], answers: dict[tuple[int, int], str],
              deadline: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Temperature-0 answers against the same server's non-speculative ones, where given."""
    how = config["lossless"]
    if "not_checked" in how:
        return {"checked": False, "reason": "not checked: " + _cut(how["not_checked"], 400)}, []
    greedy = [(key, request) for i, entry in enumerate(config["classes"])
              for j, request in enumerate(entry["requests"])
              if request["body"].get("temperature") == 0 and (key := (i, j)) in answers]
    again = ask_all(url, [r for _, r in greedy], model, dict(how["extras"]), config, deadline)
    reasons = []
    for ((i, j), _), (text, error) in zip(greedy, again, strict=True):
        mine, theirs = answers[(i, j)], text or ""
        at = next((n for n, (a, b) in enumerate(zip(theirs, mine, strict=False)) if a != b),
                  min(len(theirs), len(mine)))
        if error is not None or theirs != mine:
            reasons.append({"check": "lossless", "class": config["classes"][i]["name"],
                            "depth": config.get("depth"), "message": _cut(
                                f"request {j} without speculation failed: {error}" if error
                                else f"request {j}: the speculative answer differs from the "
                                f"non-speculative one at character {at}")})
    compared = sum(1 for _, error in again if error is None)
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
        "threshold": {k: _cut(v, 400) if isinstance(v, str) else v for k in (
            "min_tau", "break_even", "margin", "why_none", "source", "note", "unverified")
            if (v := threshold.get(k)) is not None},
        "lossless": lossless, "classes": classes,
        "requests_sent": sum(c["requests"] for c in classes),
        "elapsed_s": round(time.monotonic() - started, 3)}
    if threshold.get("min_tau") is None:
        report["threshold"]["checked"] = "not checked: " + _cut(threshold["why_none"], 400)
    return report


STATES = ("speculative", "fallback", "failed")
"""What serves after the canary: the pair; the target alone (its baseline launch); nothing."""


def _label(value: object) -> str:
    return _cut(str(value), 64).replace("\\", "\\\\").replace('"', '\\"')


def verdict_metrics(report: dict[str, Any], state: str) -> str:
    """The verdict as Prometheus text: which launch serves, each reason (check, class, depth)."""
    pair = _label(report.get("pair", ""))
    lines = ["# TYPE specpair_canary_state gauge"]  # what serves after the canary
    lines += [f'specpair_canary_state{{pair="{pair}",state="{s}"}} {int(s == state)}'
              for s in STATES]
    lines += ["# TYPE specpair_canary_reason gauge"]  # why it failed: check, class, depth
    lines += [f'specpair_canary_reason{{pair="{pair}",check="{_label(r.get("check"))}",class='
              f'"{_label(r.get("class"))}",depth="{_label(r.get("depth"))}"}} 1'
              for r in list(report.get("reasons") or [])[:MAX_REASONS] if isinstance(r, dict)]
    lines += ["# TYPE specpair_canary_tau gauge"]  # τ each class reached
    lines += [f'specpair_canary_tau{{pair="{pair}",class="{_label(c.get("class"))}"}} '
              f'{float(c["tau"]):g}' for c in list(report.get("classes") or [])[:MAX_CLASSES]
              if isinstance(c, dict) and isinstance(c.get("tau"), int | float)]
    return "\n".join(lines) + "\n"


def serve(report: dict[str, Any], state: str, host: str, port: int) -> None:
    """Serve the verdict on /metrics until stopped."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = verdict_metrics(report, state).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            answer = body if self.path.split("?")[0] == "/metrics" else b""
            self.send_response(200 if answer else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    ThreadingHTTPServer((host, port), Handler).serve_forever()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="canary.py", description="the canary before "
                                     "traffic; canary.json on stdin, the report on stdout")
    parser.add_argument("--url", help="the new server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--serve", type=int, metavar="PORT", help="instead: serve the "
                        "verdict of a report (on stdin) as Prometheus metrics on PORT")
    parser.add_argument("--state", choices=STATES, default="failed",
                        help="with --serve: what serves after the canary")
    parser.add_argument("--host", default="0.0.0.0", help="with --serve: the address")
    args = parser.parse_args(argv)
    if (args.url is None) == (args.serve is None):
        parser.error("give --url (run the canary) or --serve (serve a report's verdict)")
    if args.serve is not None:
        try:
            report = json.loads(sys.stdin.read(MAX_REPORT_BYTES * 2))
        except ValueError:  # no report (the canary could not judge): the state alone
            report = None
        report = report if isinstance(report, dict) else {}
        if args.state != "speculative" and not report.get("reasons"):
            report["reasons"] = [{"check": "error", "class": "-", "depth": "-"}]
        serve(report, args.state, args.host, args.serve)
        return EXIT_PASS
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
    for r in report["reasons"]:
        print(f"FAIL {r['check']}: class {r['class']} depth {r['depth']}: {r['message']}",
              file=sys.stderr)
    return EXIT_PASS if report["verdict"] == "pass" else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
