"""Choosing the view of a write's progress: ``write_committed(progress=...)``.

``"auto"`` is the widget in a front end that draws widgets, tqdm on a terminal, text lines
otherwise (papermill, nbconvert, logs); ``"widget"``, ``"text"``, ``False`` (none) or any
callable taking a :class:`~s3commit_sdk.progress.ProgressEvent` choose for themselves. This sits
above both :mod:`s3commit_sdk.progress` (the events and the text views) and the widgets, so
neither imports the other's layer.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .errors import InvalidArgumentError
from .progress import ProgressCallback, TextProgress, TqdmProgress

#: What ``progress="auto"`` shows, when set: ``widget``, ``text``, ``tqdm`` or ``off``.
PROGRESS_ENV = "S3COMMIT_PROGRESS"


def _kernel_shell() -> Any:
    """The IPython shell of the Jupyter kernel this code runs in, or None outside a kernel."""
    if "ipykernel" not in sys.modules:
        return None
    from ipykernel.zmqshell import ZMQInteractiveShell
    from IPython import get_ipython

    shell = get_ipython()
    return shell if isinstance(shell, ZMQInteractiveShell) else None


def _widget_front_end() -> bool:
    """A kernel whose front end draws widgets: JupyterLab, Notebook 7 and VS Code tag each
    execution with its cell's id; Voila sets its variables in the kernel's environment.
    papermill, nbconvert and nbval execute without either, and get text lines."""
    shell = _kernel_shell()
    if shell is None:
        return False
    if any(name.startswith("VOILA_") for name in os.environ):
        return True
    try:
        parent = shell.kernel.get_parent("shell")
    except Exception:
        return False
    return "cellId" in (parent or {}).get("metadata", {})


def make_listener(progress: object, title: str = "s3commit write") -> ProgressCallback | None:
    """Resolve ``write_committed(progress=...)`` to a listener (or None for no progress)."""
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    choices = ("auto", "widget", "text")
    if progress not in choices:
        raise InvalidArgumentError(
            f"progress must be one of {', '.join(map(repr, choices))}, False or a callable"
        )
    if progress == "auto":
        progress = os.environ.get(PROGRESS_ENV, "").strip().lower() or _auto_kind()
        if progress not in ("widget", "text", "tqdm", "off"):
            raise InvalidArgumentError(
                f"{PROGRESS_ENV}={progress!r}: use widget, text, tqdm or off"
            )
    if progress == "off":
        return None
    if progress == "widget":
        from .widgets import CommitProgress

        return CommitProgress.show(title=title)
    if progress == "tqdm":
        return TqdmProgress(title)
    return TextProgress(title, sys.stdout if _kernel_shell() is not None else sys.stderr)


def _auto_kind() -> str:
    if _widget_front_end():
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            return "text"
        return "widget"
    return "tqdm" if sys.stderr.isatty() else "text"
