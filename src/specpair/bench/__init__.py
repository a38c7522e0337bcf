"""The measurement protocol: deterministic workloads, a streaming load client, engine
metrics, and the pair card; replays of captured traffic (`replay`, `replay_cell`) with
per-request acceptance by class (`traffic`), and the regression gate (`against`).

Load generation stays specpair's own asyncio + httpx client (`client`, `replay`). We read the
released wheels of aiperf 0.13.0 (the only 0.13.x on PyPI) and guidellm 0.8.1 (the newest);
neither can be the replay engine.

- aiperf 0.13.0 can send captured bodies unchanged, in file order, at `--concurrency`
  (`inputs_json` loader; inference_client.py:117-122, dataset/loader/base_loader.py:201-211;
  `raw_payload` takes chat only: raw_payload.py:186-190). Its per-request acceptance comes
  from one adapter, vLLM's (plugin/plugins.yaml:1603-1612), which reads
  `metrics.speculative_decoding` (endpoints/base_endpoint.py:117-134). For SGLang it shows
  only the run-wide `sglang:spec_accept_length` gauge from /metrics
  (exporters/sglang/speculative_decoding_console_exporter.py:25-26), not the per-request
  `sglext.spec_tokens_details`, so there is no per-class τ on SGLang. It never parses
  `choices[].token_ids`, so it cannot find a first divergence. Answers survive only with
  `--export-level raw`, which writes prompts and raw SSE chunks to profile_export_raw.jsonl
  (common/models/record_models.py:1744-1785), and we would have to parse those again. It
  runs as a process tree that ends in `os._exit` (cli_runner/_single_run.py:132), so it is a
  CLI only. It has 49 requirements (kubernetes-asyncio, kopf, dash, optuna, pandas, pyzmq,
  textual, ...), needs Python >=3.11,<3.14 and is Apache-2.0; its `pillow~=12.3.0` and
  `rich~=14.1.0` contradict constraints.txt (13.0.0, 15.0.0).
- guidellm 0.8.1 rebuilds every request from dataset columns. No column carries temperature
  or response_format (data/schemas/base.py:16-33), `extras` are one set for all requests
  (backends/openai/http.py:255), and a per-request token budget forces `stop: None,
  ignore_eos: True` (backends/openai/request_handlers.py:621-624, 1180-1187), so the captured
  sampling and stop rule are lost. Per request it keeps the text and vLLM's `metrics`
  (request_handlers.py:774-775, schemas/base/request_stats.py:69-76), but neither `sglext`
  nor token ids. You can call `benchmark_generative_text` from Python
  (benchmark/entrypoints.py:499), though its workers run in spawned processes. It has 23
  requirements (torch, datasets>=5.0.1, `click~=8.4.0` against our 8.5.1), needs Python
  >=3.10 and is Apache-2.0.

Adopting aiperf, whose real gain is distributed load on Kubernetes, would take: write the
rewritten requests (model, stream, release replay fields) as an inputs_json file with one
session_id per line in a private temporary folder; run `aiperf profile` from its own venv
once per role; parse its raw export again for text, token ids and `sglext`; and upstream an
SGLang spec-decode adapter. That is all of `replay.stream` plus a subprocess and a second
environment, for replay concurrencies that one client drives.
"""
