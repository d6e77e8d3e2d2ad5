"""Benchmarks of afk-watchdog against the raw-SQL limit and its peers."""
