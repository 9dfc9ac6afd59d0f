"""A one-line progress bar on stderr, for conversion and evaluation."""
import sys
import time
from typing import Optional


class ProgressBar:
    """`label [#####.....] done/total (rate unit/sec)`, rewritten in place on a terminal.

    Off a terminal (logs, CI) it prints a line at most every `min_interval_secs`, plus
    the final one.
    """

    def __init__(self, label: str, total: Optional[int], unit: str = 'examples',
                 min_interval_secs: float = 2.0, stream=None):
        self.label, self.total, self.unit = label, total, unit
        self.min_interval_secs = min_interval_secs
        self.stream = stream or sys.stderr
        self.started = time.time()
        self._last_shown = None
        self.done = 0

    def update(self, done: int):
        self.done = done
        now = time.time()
        interactive = self.stream.isatty()
        finished = self.total is not None and done >= self.total
        if (finished or interactive or self._last_shown is None
                or now - self._last_shown >= self.min_interval_secs):
            self._show(end='\r' if interactive and not finished else '\n')
            self._last_shown = now

    def close(self):
        """Shows the final count (once), whatever the total said."""
        if self._last_shown is None or self.total is None or self.done < self.total:
            self._show(end='\n')

    def _show(self, end):
        rate = self.done / max(time.time() - self.started, 1e-9)
        if self.total:
            filled = min(30, int(30 * self.done / self.total))
            line = (f'{self.label} [{"#" * filled}{"." * (30 - filled)}] '
                    f'{self.done}/{self.total} ({rate:.0f} {self.unit}/sec)')
        else:
            line = f'{self.label} {self.done} {self.unit} ({rate:.0f} {self.unit}/sec)'
        self.stream.write(line + end)
        self.stream.flush()
