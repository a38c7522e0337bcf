"""Stage 3, load: reading runbooks, locks, records and logs from disk, keeping where
every value came from."""
