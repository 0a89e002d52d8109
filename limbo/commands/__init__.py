"""Implementations of the CLI's larger subcommands (kept out of ``limbo.cli``)."""
