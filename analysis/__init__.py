"""Analysis: reads episode logs only, never runs an episode (tables and figures)."""
