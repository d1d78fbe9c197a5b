"""One module per command of `hlogen` (the table of them is hlogen_cli.main.COMMANDS)."""
