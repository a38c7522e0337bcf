"""Stage 7, write: the only writers of the repository, through the file policy."""
