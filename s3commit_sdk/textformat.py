"""Numbers as people read them, shared by the text log, the terminal bar and the widgets;
text from the store made safe to print to a terminal."""

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


#: Characters a terminal acts on instead of showing: C0 and C1 controls and DEL (escape
#: sequences, carriage returns, bells) and the bidirectional overrides that reorder what is
#: shown ("Trojan Source"). Text from the store passes through :func:`printable` first.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F or char in _BIDI_CONTROLS


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control character written as a ``\\uXXXX`` escape, except those in
    ``keep`` (``"\\n"`` for text whose lines are ours): safe to print to a terminal, and still
    valid JSON where ``text`` was."""
    if not any(_is_control(c) for c in text):
        return text
    return "".join(f"\\u{ord(c):04x}" if _is_control(c) and c not in keep else c for c in text)


def printable_values(value: object) -> object:
    """A JSON value with :func:`printable` applied to every string in it, keys included: a
    document from the store, for text renderers that print its fields."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_values(k): printable_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_values(v) for v in value]
    return value
