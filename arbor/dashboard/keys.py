"""Single keys from the terminal without Enter (cbreak mode), for the dashboard's pages.

Restores the terminal on exit whatever happens; a no-op when stdin is not a terminal (piped,
under tests, on Windows), so the dashboard never blocks on input."""

from __future__ import annotations

import os
import sys


class Keys:
    def __init__(self) -> None:
        self._fd: int | None = None
        self._saved = None

    def __enter__(self) -> "Keys":
        try:
            import termios
            import tty

            if sys.stdin.isatty():
                self._fd = sys.stdin.fileno()
                self._saved = termios.tcgetattr(self._fd)
                tty.setcbreak(self._fd)
        except (ImportError, OSError, ValueError):
            self._fd = None
        return self

    def read(self) -> list[str]:
        """Keys pressed since the last call (never waits)."""
        if self._fd is None:
            return []
        import select

        out = []
        while select.select([self._fd], [], [], 0)[0]:
            data = os.read(self._fd, 32)
            if not data:
                break
            out.extend(data.decode("utf-8", errors="ignore"))
        return out

    def __exit__(self, *exc) -> None:
        if self._fd is not None and self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
