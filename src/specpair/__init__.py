"""specpair: runbook-as-code for speculative decoding deployments (target + draft pairs)."""

__version__ = "0.1.0"
