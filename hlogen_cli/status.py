"""The command line's exit statuses, named once (docs/reference.md "Exit codes", `hlogen --help`)."""
SUCCESS = 0
FAILED = 1      # a run or a check failed (a native abort while running included)
BAD_INPUT = 2   # the message names the file, line and column, or the argument
SIGNALLED = 128  # + the signal's number: 130 after Ctrl-C, 143 SIGTERM, 129 SIGHUP
