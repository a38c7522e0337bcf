"""The two synthetic workload sets, generated deterministically from a seed.

- short-homogeneous: short continuations of regular text (counting, lists, repeated
  phrases). Drafts accept a lot here: the upper end of what a pair can do.
- long-diverse: varied instructions asking for long answers on mixed topics. Acceptance
  is lower and varies more: closer to open chat traffic.

A workload that states `prompt_tokens` pads each prompt to about that many tokens with
text of its own kind (4 characters per token, the estimate the latency model uses too),
and one that states `output_tokens` sends each request's as its max_tokens; lengths given
as {min, max} are drawn evenly from the seed. The same prompts, sampling and stop rule go
to the baseline and the speculative server.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

from specpair.model.runbook import TokenLength, Workload

CHARS_PER_TOKEN = 4
"""Characters per token of English text: the estimate every token count here rests on."""

SUBJECTS = ("rivers", "prime numbers", "medieval trade", "compilers", "bread baking",
            "volcanoes", "jazz harmony", "sorting algorithms", "tidal energy", "bees",
            "the printing press", "orbital mechanics", "chess openings", "glaciers")
TASKS = ("Explain {s} to a new colleague, step by step, with examples.",
         "Write a detailed essay on the history of {s}.",
         "Compare two schools of thought about {s} and argue for one.",
         "Write a short story in which {s} play a central role.",
         "Write Python code that models {s}, with comments.",
         "List common misconceptions about {s} and correct each one.")
SEQUENCES = ("Count from {n} to {m}: {n},", "The days of the week are Monday, Tuesday,",
             "Repeat after me: the quick brown fox jumps over the lazy dog. The quick",
             "Continue the list: apple, banana, cherry, apple, banana,",
             "Multiples of {k}: {k}, {k2}, {k3},")


@dataclass(frozen=True)
class Request:
    index: int
    prompt: str
    max_tokens: int
    temperature: float


def _draw(rng: random.Random, length: TokenLength) -> int:
    return length if isinstance(length, int) else rng.randint(length.min, length.max)


def _padded(prompt: str, tokens: int, rng: random.Random, kind: str) -> str:
    """`prompt` lengthened to about `tokens` tokens with material of the same kind (more
    of the sequence, or background paragraphs on other subjects), the question last."""
    want = tokens * CHARS_PER_TOKEN
    parts: list[str] = []
    size = len(prompt)
    while size < want:
        if kind == "short-homogeneous":
            n = rng.randint(1, 500)
            part = ", ".join(str(n + j) for j in range(12)) + "."
        else:
            part = (f"Background on {rng.choice(SUBJECTS)}: "
                    + rng.choice(TASKS).format(s=rng.choice(SUBJECTS)))
        parts.append(part)
        size += len(part) + 1
    return " ".join([*parts, prompt])[-want:] if parts else prompt


def generate(workload: Workload) -> list[Request]:
    if workload.prompts is None or workload.max_tokens is None:
        raise ValueError(f"workload {workload.name} is a {workload.kind}, not generated")
    rng = random.Random(workload.seed)
    # lengths and padding from a stream of their own: a workload without token lengths
    # keeps the prompts it always had
    lengths = random.Random(f"{workload.seed}:lengths")
    requests = []
    for i in range(workload.prompts):
        if workload.kind == "short-homogeneous":
            n, k = rng.randint(1, 500), rng.randint(2, 12)
            prompt = rng.choice(SEQUENCES).format(n=n, m=n + 40, k=k, k2=2 * k, k3=3 * k)
        else:
            prompt = rng.choice(TASKS).format(s=rng.choice(SUBJECTS))
        if workload.prompt_tokens is not None:
            prompt = _padded(prompt, _draw(lengths, workload.prompt_tokens), lengths,
                             workload.kind)
        out = workload.max_tokens if workload.output_tokens is None else _draw(
            lengths, workload.output_tokens)
        requests.append(Request(i, prompt, out, workload.temperature))
    return requests


def fingerprint(requests: list[Request]) -> str:
    payload = json.dumps([[r.prompt, r.max_tokens, r.temperature] for r in requests])
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
