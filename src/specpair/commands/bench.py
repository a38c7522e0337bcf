"""Run the measurement protocol of one pair against a baseline and a speculative server."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from specpair.bench import metrics
from specpair.bench.client import Sample, request_body, run_load, summarize
from specpair.bench.record import Cell, Measurement, Protocol, RunResult
from specpair.bench.workloads import Request, fingerprint, generate
from specpair.engines.bench_model import FallbackError
from specpair.load.bounded_http import AnswerRefused, Limits, client, redact
from specpair.load.document import bounded_json
from specpair.model.errors import SpecpairError
from specpair.model.runbook import Workload
from specpair.resolve.pair import ResolvedPair

ENGINE_LIMITS = Limits(deadline_s=30.0, max_bytes=16 << 20)
"""An engine's /metrics and /v1/models answers (kilobytes to a few MB)."""


def _get(url: str, path: str) -> httpx.Response:
    shown = redact(url)
    try:
        with client(httpx, ENGINE_LIMITS) as http:
            response: httpx.Response = http.get(url + path)
            response.read()
    except AnswerRefused as exc:
        raise SpecpairError.single(shown, exc.reason, "point --baseline/--spec at the "
                                   "engines' OpenAI-compatible servers") from None
    except httpx.HTTPError as exc:
        raise SpecpairError.single(shown, f"cannot reach {shown}{path}: "
                                   f"{type(exc).__name__}",
                                   "check that the server runs and the URL is right") from None
    return response


def _json(url: str, path: str) -> Any:
    response = _get(url, path)
    try:
        return bounded_json(response.text)
    except ValueError as exc:
        raise SpecpairError.single(redact(url), f"{path} answered {response.status_code} "
                                   f"with no JSON ({str(exc)[:120]})",
                                   "point --baseline/--spec at the engines' OpenAI-compatible "
                                   "servers") from None


def scrape(url: str) -> dict[str, dict[str, float]]:
    response = _get(url, "/metrics")
    if response.status_code != 200:
        raise SpecpairError.single(url, f"{url}/metrics answered {response.status_code}",
                                   "start SGLang with --enable-metrics; vLLM serves it")
    return metrics.parse(response.text)


def served_model(url: str) -> str:
    answer = _json(url, "/v1/models")
    data = answer.get("data") if isinstance(answer, dict) else None
    first = data[0] if isinstance(data, list) and data else None
    if not isinstance(first, dict) or not isinstance(first.get("id"), str):
        raise SpecpairError.single(redact(url), "the server lists no model on /v1/models",
                                   "point --baseline/--spec at OpenAI-compatible servers")
    return str(first["id"])


def check_servers(pair: ResolvedPair, baseline: str, spec: str,
                  static: tuple[ResolvedPair, str] | None = None) -> None:
    """`static`: the pair at its schedule's largest K and the URL of its server."""
    release = pair.release
    checked = [(pair, spec)] + ([static] if static is not None else [])
    url = baseline
    try:
        metrics.check_baseline_server(scrape(baseline), release.metrics)
        for variant, url in checked:
            metrics.check_speculative_server(
                scrape(url), release.metrics,
                expected_k=release.bench.draft_positions(variant))
            release.bench.check_server(variant, _getter(url))
    except FallbackError as exc:
        raise SpecpairError.single(url, f"unexpected fallback: {exc}",
                                   "start the servers from the generated launch scripts") from None


def _getter(url: str) -> Callable[[str], dict[str, Any]]:
    def get(path: str) -> dict[str, Any]:
        answer = _json(url, path)
        if not isinstance(answer, dict):
            raise SpecpairError.single(redact(url), f"{path} answered no JSON object",
                                       "point --spec at the engine's own server")
        return answer
    return get


def describe(pair: ResolvedPair, static_pair: ResolvedPair | None) -> dict[str, str]:
    """What each server of a record ran (`Protocol.servers`)."""
    spec = pair.runbook.speculation
    if pair.schedule is not None and spec.schedule is not None:
        ranges = ", ".join(f"{r.start}-{r.end}: K={r.k}" for r in pair.schedule.ranges)
        ran = f"the pair with its speculation schedule ({ranges})"
    else:
        ran = f"the pair at K = {spec.num_speculative_tokens}"
    out = {"baseline": "the target alone (no speculation)", "speculative": ran}
    if static_pair is not None:
        out["static"] = (f"the pair at static K = "
                         f"{static_pair.runbook.speculation.num_speculative_tokens} (the "
                         "schedule's largest), without the schedule")
    return out


def run(pair: ResolvedPair, baseline: str, spec: str, concurrency: list[int],
        time_limit_s: float = 600.0, say: Callable[[str], None] | None = None,
        folder: Path | None = None, only: set[str] | None = None,
        static: str | None = None) -> Measurement:
    """`folder`: the runbook's, which replay files are relative to; `only`: the workloads
    to run (default all); `static`: the URL of the pair at its schedule's largest K
    without the schedule (`launch-<engine>-static.sh`), measured beside the two others
    on generated workloads."""
    from specpair.analyse.schedule import attach, static_variant

    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    pair = attach(pair)
    static_pair = static_variant(pair) if static is not None else None
    if static is not None and static_pair is None:
        raise SpecpairError.single(static, "--static: the runbook has no speculation "
                                   "schedule to compare with a static K",
                                   "drop --static, or set speculation.schedule")
    check_servers(pair, baseline, spec,
                  (static_pair, static) if static_pair is not None and static else None)
    urls = {"baseline": baseline, "speculative": spec} | ({"static": static} if static else {})
    models = {role: served_model(url) for role, url in urls.items()}
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cells: list[Cell] = []
    minimal: dict[str, Any] = {}
    prompt_sets: dict[str, str] = {}
    chosen = [w for w in pair.runbook.workloads if only is None or w.name in only]
    for workload in chosen:
        if workload.kind == "replay":
            assert workload.sha256 is not None
            prompt_sets[workload.name] = "sha256:" + workload.sha256
            cells += _replay_cells(pair, workload, folder or Path(pair.source_file).parent,
                                   concurrency, {"baseline": baseline, "speculative": spec},
                                   models, time_limit_s, say)
            continue
        requests = generate(workload)
        prompt_sets[workload.name] = fingerprint(requests)
        for c in concurrency:
            results = {}
            for role, url in urls.items():
                results[role], samples = _measure_server(
                    pair, role, url, models[role], requests, f"{workload.name} c={c} {role}",
                    c, time_limit_s, say)
                if role == "speculative" and not minimal:
                    minimal = _minimal_request(pair, url, models[role], requests[0], samples)
            cells.append(Cell(workload=workload.name, concurrency=c,
                              baseline=results["baseline"], speculative=results["speculative"],
                              static=results.get("static")))
    protocol = Protocol(
        pair=pair.name, engine=pair.engine,
        target=_source(pair, "target"),
        draft=_source(pair, "draft") if pair.draft else None,
        speculation=pair.runbook.speculation.model_dump(mode="json", exclude_none=True),
        workloads=[w.model_dump(mode="json", exclude_none=True) for w in chosen],
        prompt_sets=prompt_sets, sampling=_sampling(chosen),
        concurrency=concurrency, baseline_url=baseline, speculative_url=spec,
        static_url=static, servers=describe(pair, static_pair),
        minimal_request=minimal or {"withheld": "replay workloads only: no prompt text "
                                                "goes into a record"})
    return Measurement(started_at=started, protocol=protocol, cells=cells)


def _replay_cells(pair: ResolvedPair, workload: Workload, folder: Path, concurrency: list[int],
                  urls: dict[str, str], models: dict[str, str], time_limit_s: float,
                  say: Callable[[str], None]) -> list[Cell]:
    """A replay workload's cells, one per concurrency: the baseline and speculative
    servers on the captured requests, each with its own sampling."""
    from specpair.bench import replay_cell

    replayed = replay_cell.requests_of(workload, folder)
    return [replay_cell.measure(
        workload, replayed, c, urls, models, pair.release.bench.replay_extras, time_limit_s,
        pair.runbook.acceptance.slo.percentile, scrape, say, pair.release.metrics)
        for c in concurrency]


def _measure_server(pair: ResolvedPair, role: str, url: str, model: str,
                    requests: list[Request], label: str, concurrency: int, time_limit_s: float,
                    say: Callable[[str], None]) -> tuple[RunResult, list[Sample]]:
    """One server's run of generated requests, with the counter delta across it; a
    speculative server whose verify counter did not move has fallen back."""
    before = scrape(url)

    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 4) == 0:
            say(f"[{label}] {done}/{total}")

    samples, wall, truncated = asyncio.run(run_load(
        url, model, requests, pair.release.bench.request_extras, concurrency, time_limit_s,
        progress))
    try:
        delta = metrics.delta(before, scrape(url), pair.release.metrics)
    except ValueError as exc:
        raise SpecpairError.single(url, f"unreadable speculative counters: {exc}",
                                   "rerun against a server that stays up") from None
    if role != "baseline" and (delta is None or not delta.verify_steps):
        raise SpecpairError.single(
            url, "unexpected fallback: the speculative counters did not move "
            "during the run", "check the server log for a disabled draft")
    return summarize(role, samples, wall, truncated, len(requests), delta), samples


def _minimal_request(pair: ResolvedPair, url: str, model: str, request: Request,
                     samples: list[Sample]) -> dict[str, Any]:
    """The record's reproducible request: the first prompt's body and the start of an
    answer; empty where no request of the run succeeded."""
    first = next((s for s in samples if s.error is None), None)
    if first is None:
        return {}
    return {"url": f"{url}/v1/completions",
            "body": request_body(model, request, pair.release.bench.request_extras,
                                 stream=False),
            "answer_start": first.text[:200]}


def _sampling(chosen: list[Workload]) -> dict[str, object]:
    """How the requests sampled and stopped: generated workloads' fixed rule, replayed
    requests' own."""
    sampling: dict[str, object] = {}
    if any(w.kind != "replay" for w in chosen):
        sampling |= {"ignore_eos": True, "stream": True, "stop_rule": "max_tokens"}
    if any(w.kind == "replay" for w in chosen):
        sampling["replay"] = "each captured request's own sampling and stop rule, streamed"
    return sampling


def _source(pair: ResolvedPair, role: str) -> dict[str, str | None]:
    art = getattr(pair, role)
    return {"repo": art.source.repo, "path": art.source.path, "revision": art.source.revision,
            "commit": art.source.commit}
