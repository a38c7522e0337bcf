"""The measurement protocol: deterministic workloads, a streaming load client, engine
metrics, and the pair card; replays of captured traffic (`replay`, `replay_cell`) with
per-request acceptance by class (`traffic`), and the regression gate (`against`).

Load generation is a small asyncio + httpx client rather than guidellm or aiperf. Both
are capable load generators, but the protocol needs things they do not give: the same
prompts, sampling and stop rule sent to a baseline and a speculative server, the
engine-specific acceptance fields of each response (SGLang's `sglext.spec_tokens_details`,
vLLM's per-request `metrics.speculative_decoding`), and Prometheus counters read right
before and after each run to difference them. Both tools also pull in large dependency
trees (tokenizers, transformers, their own CLIs) for what is here ~200 lines.
"""
