"""Stage 1, facts: the reviewed catalogue data (GPUs, verified layouts, method support)
and their typed loaders."""
