"""Ctrl-C during job commit: held until the commit reaches a point where it can stop.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when SIGINT lands:
inside ``Thread.start`` of a completion pool (a worker then escapes ``shutdown(wait=True)`` and
completes an upload after the roll back deleted it), between a conditional PUT and the line
that records it, or inside a finalizer or a weakref callback, where the interpreter prints
"Exception ignored" and the interrupt is gone (the job then commits and the process exits 0).
So while a job commits, the SDK's handler only records SIGINT (:func:`held_interrupts`); the
commit raises it at its own points (:func:`interruption_point`: before each stage, after the
renames or completions in flight), where each stage's failure policy knows what was done. Once
the commit cannot stop any more it finishes, and the interrupt is raised after it with a note
saying the job committed. A second Ctrl-C while one is held is raised at once, as before.

The handler is only replaced in the main thread, and only where SIGINT raises
``KeyboardInterrupt`` anyway (Python's default handler, or PySpark's, which also cancels the
context's jobs; it is called when the interrupt is raised); elsewhere nothing changes.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _Hold:
    """The SIGINT held for the main thread's job commit."""

    def __init__(self, previous: Callable) -> None:
        self.previous = previous
        self.owner = threading.current_thread()
        self.stoppable = True
        self._received = threading.Event()

    @property
    def pending(self) -> bool:
        return self._received.is_set()

    def handle(self, signum: int, frame) -> None:
        if self._received.is_set():  # a second Ctrl-C: the user insists
            self._received.clear()
            self.deliver(frame)
        self._received.set()

    def deliver(self, frame=None) -> None:
        """Raise the interrupt as the handler we replaced raises it."""
        try:
            self.previous(signal.SIGINT, frame or sys._getframe(1))
        except KeyboardInterrupt:
            raise
        raise KeyboardInterrupt  # it returned: an interrupt stopping a commit is raised anyway

    def take(self) -> bool:
        """Whether an interrupt was held; it is no longer."""
        held = self._received.is_set()
        self._received.clear()
        return held


_hold: _Hold | None = None


def _holdable(handler) -> bool:
    if handler is signal.default_int_handler:
        return True
    return callable(handler) and getattr(handler, "__module__", "").startswith("pyspark")


def _own_hold() -> _Hold | None:
    hold = _hold
    return hold if hold is not None and hold.owner is threading.current_thread() else None


@contextmanager
def held_interrupts(finished_note: str) -> Iterator[None]:
    """SIGINT during the block is held for :func:`interruption_point`; one still held when the
    block ends is raised then, with ``finished_note`` (what the finished commit left) when the
    block ended normally, or from the error that ended it. Nested blocks share one hold."""
    global _hold
    outer = _own_hold()
    hold = outer
    if hold is None and threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGINT)
        if _holdable(previous):
            hold = _Hold(previous)
            signal.signal(signal.SIGINT, hold.handle)
            _hold = hold
    try:
        try:
            yield
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            if hold is not None and hold.take():
                _raise_held(hold, f"s3commit: the commit failed meanwhile: {exc}", exc)
            raise
        if hold is not None and hold.take():
            _raise_held(hold, finished_note, None)
    finally:
        if hold is not None and outer is None:
            signal.signal(signal.SIGINT, hold.previous)
            _hold = None


def _raise_held(hold: _Hold, note: str, cause: BaseException | None) -> None:
    try:
        hold.deliver()
    except KeyboardInterrupt as interrupt:
        interrupt.add_note(note)
        interrupt.__cause__ = cause
        raise


def interruption_point() -> None:
    """Raise a held interrupt here, where the commit can stop: the caller's failure policy
    undoes or keeps what it did. Nothing happens outside a hold or once the commit is past
    stopping (:func:`unstoppable`)."""
    hold = _own_hold()
    if hold is not None and hold.stoppable and hold.take():
        hold.deliver()


def interrupt_requested() -> Callable[[], bool]:
    """For the workers of this thread's commit: whether to send no more requests, because an
    interrupt is held that the commit's next :func:`interruption_point` raises."""
    hold = _own_hold()
    if hold is None:
        return lambda: False
    return lambda: hold.stoppable and hold.pending


def unstoppable() -> None:
    """From here on the commit runs to its end; a held interrupt is raised after it."""
    hold = _own_hold()
    if hold is not None:
        hold.stoppable = False
