"""Helpers the tests share (no test imports another test)."""
