"""Scaffold recovery conditions (tool-layer behaviour). Filled in by the conditions work."""
