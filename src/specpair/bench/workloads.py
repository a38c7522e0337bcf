"""The two synthetic workload sets, generated deterministically from a seed.

- short-homogeneous: short continuations of regular text (counting, lists, repeated
  phrases). Drafts accept a lot here: the upper end of what a pair can do.
- long-diverse: varied instructions asking for long answers on mixed topics. Acceptance
  is lower and varies more: closer to open chat traffic.

The same prompts, sampling and stop rule go to the baseline and the speculative server.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

from specpair.model.runbook import Workload

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


def generate(workload: Workload) -> list[Request]:
    if workload.prompts is None or workload.max_tokens is None:
        raise ValueError(f"workload {workload.name} is a {workload.kind}, not generated")
    rng = random.Random(workload.seed)
    requests = []
    for i in range(workload.prompts):
        if workload.kind == "short-homogeneous":
            n, k = rng.randint(1, 500), rng.randint(2, 12)
            prompt = rng.choice(SEQUENCES).format(n=n, m=n + 40, k=k, k2=2 * k, k3=3 * k)
        else:
            prompt = rng.choice(TASKS).format(s=rng.choice(SUBJECTS))
        requests.append(Request(i, prompt, workload.max_tokens, workload.temperature))
    return requests


def fingerprint(requests: list[Request]) -> str:
    payload = json.dumps([[r.prompt, r.max_tokens, r.temperature] for r in requests])
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
