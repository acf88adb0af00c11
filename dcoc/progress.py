"""Progress display for long runs, honest about where it is written.

:class:`Progress` draws a tqdm bar when the stream is a terminal; when it is not (a log
file, a pipe, CI) nothing is redrawn: one plain line is written every ``every`` trials
(default: a tenth of the budget, at least 1) and one at the end, e.g.::

    dcoc: 200/2000 trials, best 75.903 ms on 1x8x32_i8w8a32_15_15_17_17, 41 s

Use: ``p = Progress(total, "dcoc"); p.update(n, "best 1.2 ms"); p.close()``.
"""
from __future__ import annotations

import sys
import time


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """Trials-done display: a tqdm bar on a terminal, a plain line every ``every`` trials
    otherwise.  ``stream`` defaults to ``sys.stderr`` (looked up when created)."""

    def __init__(self, total: int, desc: str, stream=None, every: int | None = None,
                 unit: str = "trial"):
        self.total = int(total)
        self.desc = desc
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.every = int(every) if every else max(1, self.total // 10)
        self.t0 = time.perf_counter()
        self.n = 0
        self.note = ""
        self._last_line = 0
        self.bar = None
        if is_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=desc, unit=unit, file=self.stream,
                            dynamic_ncols=True, leave=True, mininterval=0.2)

    def update(self, n: int, note: str = "") -> None:
        """Set the number of trials done to ``n`` (absolute) with an optional note."""
        self.n = int(n)
        self.note = note or self.note
        if self.bar is not None:
            self.bar.n = self.n
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.refresh()
            return
        if self.n - self._last_line >= self.every:
            self._line()

    def _line(self) -> None:
        self._last_line = self.n
        note = f", {self.note}" if self.note else ""
        print(f"{self.desc}: {self.n}/{self.total} {self.unit}s{note}, "
              f"{time.perf_counter() - self.t0:.0f} s", file=self.stream, flush=True)

    def write(self, text: str) -> None:
        """A status line on the progress stream (above the bar on a terminal)."""
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.n and self.n != self._last_line:
            self._line()


def resume_note(n: int, where: str | None, progress=None) -> None:
    """``dcoc: resuming: N recorded trials from WHERE`` on the progress stream (``progress``:
    a :class:`Progress`, an object holding one as ``.bar``, or None: stderr)."""
    text = f"dcoc: resuming: {n} recorded trial{'s' if n != 1 else ''}" + (f" from {where}" if where else "")
    bar = progress if isinstance(progress, Progress) else getattr(progress, "bar", None)
    if isinstance(bar, Progress):
        bar.write(text)
    else:
        print(text, file=sys.stderr, flush=True)
