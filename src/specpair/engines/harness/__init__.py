"""The engine-side scripts: each runs in an engine release's own interpreter (its
environment, never specpair's), reads a JSON list of cases on stdin and prints one JSON
list of what the release's own code computes for them. `specpair verify` runs them for a
user's pair (`specpair.engines.engine_run`), and the oracles in tests/engine for the
corpus.

They import the engine and each other by their own names (the folder is the script's
first `sys.path` entry), never specpair: the engine's interpreter need not have it.
"""
