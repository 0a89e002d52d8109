"""Grid definitions (TOML under ``grids/``) and their expansion into cells."""
