"""Subcommands too large for pgraph.cli: they plan through pgraph.pipeline and drive a backend."""
