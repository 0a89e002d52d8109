"""Harnesses: the minimal loop, recovery conditions, reference policies."""
