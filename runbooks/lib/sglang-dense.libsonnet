// Shared defaults for dense single-GPU SGLang pairs. Runbooks import this file and
// override what differs; a change here changes every importing runbook (specpair impact
// reports each of them).
{
  engine: { name: 'sglang', version: '0.5.23' },
  deployment: {
    gpu: 'H100-80GB',
    gpus_per_node: 8,
    parallel: { tensor: 1 },
    // 16, not 48: the calibrated break-even dial puts both importing pairs' SLOs below
    // τ* from 32 concurrent sequences up (generated/breakeven.md): on one H100 these
    // drafts pay at latency-bound concurrency, so the deployment is sized for it.
    max_running_requests: 16,
    port: 30000,
  },
  staging: {
    mode: 'parallel-prestage',
    order: ['draft', 'target'],
    warmup: { prompt: 'Say hello.', max_tokens: 16, timeout_s: 180 },
    cold_start_budget_s: 600,
  },
  // token lengths of the traffic to serve: the latency model, the plan and `specpair bench`
  // size prompts and answers from them (bench pads its prompts to these lengths)
  workloads: [
    { name: 'short-homogeneous', kind: 'short-homogeneous', prompts: 200, max_tokens: 64, seed: 1,
      prompt_tokens: 256, output_tokens: 64 },
    { name: 'long-diverse', kind: 'long-diverse', prompts: 100, max_tokens: 1024, seed: 2,
      prompt_tokens: { min: 512, max: 2048 }, output_tokens: { min: 256, max: 1024 } },
  ],
}
