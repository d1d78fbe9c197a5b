"""The `hlogen` command line (import package `hlogen_cli`)."""
