"""Helpers shared by the tests (``from support.hostile import cli``): pytest puts ``tests/`` on
the path. Test modules import helpers from here only, never from one another."""
