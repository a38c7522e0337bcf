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
}
