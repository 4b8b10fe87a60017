"""`apps top`: a table redrawn in place, and its sparklines."""

from __future__ import annotations

import sys
from typing import Any

from kstool.output.listings import Listing, _rich_table

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[int | None]) -> str:
    """Values as bars scaled to the largest (unknown ones as spaces)."""
    top = max((v for v in values if v is not None), default=0)
    return "".join(" " if v is None else _BARS[round(v / top * (len(_BARS) - 1)) if top else 0]
                   for v in values)


class Dashboard:
    """A table redrawn in place on the terminal (rich Live); `q` or Ctrl-C quits."""

    def __init__(self) -> None:
        self._live: Any = None
        self._saved_tty: Any = None

    def __enter__(self) -> "Dashboard":
        from rich.live import Live

        if sys.stdin.isatty():  # keys arrive one by one, unechoed
            import termios
            import tty

            self._saved_tty = termios.tcgetattr(sys.stdin)
            tty.setcbreak(sys.stdin)
        self._live = Live(auto_refresh=False, screen=False)
        self._live.start()
        return self

    def show(self, listing: Listing) -> None:
        self._live.update(_rich_table(listing), refresh=True)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when the user asked to quit."""
        import os
        import select
        import time

        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._saved_tty is None:  # no keyboard: only Ctrl-C quits
                time.sleep(left)
                break
            ready, _, _ = select.select([sys.stdin], [], [], left)
            if ready and b"q" in os.read(sys.stdin.fileno(), 64).lower():
                return False
        return True

    def __exit__(self, *exc: Any) -> None:
        self._live.stop()
        if self._saved_tty is not None:
            import termios

            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, self._saved_tty)
