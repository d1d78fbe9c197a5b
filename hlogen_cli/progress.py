"""Progress on long work, on one line of standard error, only when it is a terminal.

Counted work (repetitions of a run, functions emitted, conformance files) is a bar
drawn at once; work that cannot be counted (a compile, a run, joining the other
processes of a multi-process run) is a spinner with the time it has taken, drawn only
once the wait has lasted `delay` seconds, so that quick commands print nothing extra.
Elsewhere (a pipe, a file, a CI log) nothing is drawn at all.
"""
from __future__ import annotations

import shutil
import sys
import time

_SPINNER = "|/-\\"
_WIDTH = 30


class Line:
    """The line on standard error; `show` draws the library's progress value
    (hlogen.progress.Progress)."""

    def __init__(self, stream=None, enabled: bool | None = None, delay: float = 1.0):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.delay = delay
        self._started = time.monotonic()
        self._phase_started = self._started
        self._label = ""
        self._count: tuple[int, int] | None = None
        self._note = ""
        self._drawn = 0  # characters on the line now
        self._ticks = 0

    def show(self, progress) -> None:
        """Draws a hlogen.progress.Progress: counted work as a bar, the rest as a spinner."""
        if progress.total is not None:
            self.count(progress.phase, progress.done, progress.total, progress.note)
        else:
            self.phase(progress.phase, progress.note)

    def phase(self, label: str, note: str = "") -> None:
        """Uncounted work starts (or goes on, with a new `note` after the time): a spinner
        with its elapsed time (after `delay`)."""
        if label != self._label or self._count is not None:
            self._phase_started = time.monotonic()
        self._label, self._count, self._note = label, None, note
        self.tick()

    def count(self, label: str, done: int, total: int, note: str = "") -> None:
        """Counted work: `done` of `total` (a bar; nothing for a total of one), and a
        `note` after it."""
        if label != self._label:
            self._phase_started = time.monotonic()
        self._label, self._count, self._note = label, (done, total), note
        self.tick()

    def tick(self) -> None:
        """Redraws the line (the spinner turns, the time goes on)."""
        if not self.enabled or not self._label:
            return
        now = time.monotonic()
        elapsed = f"{now - self._phase_started:.1f} s"
        if self._count is not None:
            done, total = self._count
            if total < 2:
                return
            filled = _WIDTH * done // total
            line = (f"{self._label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {done}/{total} "
                    f"{elapsed}{' ' + self._note if self._note else ''}")
        elif now - self._started >= self.delay:
            self._ticks += 1
            line = (f"{_SPINNER[self._ticks % len(_SPINNER)]} {self._label} {elapsed}"
                    f"{' ' + self._note if self._note else ''}")
        else:
            return
        line = line[:max(shutil.get_terminal_size().columns - 1, 10)]
        self._write("\r" + line + " " * max(self._drawn - len(line), 0))
        self._drawn = len(line)

    def clear(self) -> None:
        """Erases the line (before other output, and at the end)."""
        if self._drawn:
            self._write("\r" + " " * self._drawn + "\r")
            self._drawn = 0

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
