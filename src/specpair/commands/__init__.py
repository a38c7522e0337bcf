"""Stage 8, commands: one module per `specpair` command that is more than wiring."""
