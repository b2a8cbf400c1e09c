"""Numbers as people read them, shared by the text log, the terminal bar and the widgets."""

from __future__ import annotations


def format_bytes(n: float | None) -> str:
    """``3316 B``, ``9.7 KiB``, ``1.2 GiB``; ``?`` when unknown."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def format_seconds(seconds: float | None) -> str:
    """``250 ms``, ``12.3 s``, ``4m 05s``, ``2h 03m``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 120:
        return f"{minutes}m {rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def format_count(n: int | None) -> str:
    """``1,234,567``; ``?`` when unknown."""
    return "?" if n is None else f"{n:,}"
