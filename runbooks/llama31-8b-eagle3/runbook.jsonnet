// Llama-3.1-8B-Instruct with the SGLang EAGLE-3 draft, tree drafting (5 steps, top-4,
// 8 verified tokens: the engine's own choice for LlamaForCausalLM, spelled out).
local base = import '../lib/sglang-dense.libsonnet';

base {
  pair: {
    name: 'llama31-8b-eagle3',
    title: 'Llama-3.1-8B-Instruct with an EAGLE-3 draft',
    owner: 'serving-platform',
  },
  target: { repo: 'meta-llama/Llama-3.1-8B-Instruct', revision: 'main', dtype: 'bfloat16' },
  draft: { repo: 'lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B', revision: 'main' },
  speculation: { method: 'EAGLE3', num_steps: 5, topk: 4, num_draft_tokens: 8 },
  deployment+: { context_length: 8192 },
  acceptance: {
    slo: { min_length: 2.5, scope: 'per_request', percentile: 10, basis: 'provisional' },
  },
  // meta-llama repos are gated: the pod waits for the token's Secret instead of staging into a 401
  kubernetes: { hf_token_secret: { name: 'hf-token', key: 'token', optional: false } },
  waivers: [
    { rule: 'SP101', reason: 'Declared lock: the hub was not reachable when this pair was written; the first `specpair lock` with hub access pins the commit.' },
    { rule: 'SP104', reason: 'Facts declared from the model card and public config copies (see lock sources); replaced by `specpair lock` with hub access.' },
    { rule: 'SP401', reason: 'The EAGLE-3 draft was trained at 2k positions; served at 8k so long prompts still decode, and the long-diverse workload measures the acceptance it keeps there.' },
    { rule: 'SP702', reason: 'No production traffic yet; the measurement protocol (`specpair bench`) replaces this provisional SLO.' },
  ],
}
