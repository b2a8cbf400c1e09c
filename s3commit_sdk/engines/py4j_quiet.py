"""py4j's own reports of a call cut short, kept out of the notebook while a Spark job runs.

Ctrl-C (Kernel > Interrupt) inside a py4j call makes py4j log "KeyboardInterrupt while sending
command." with its traceback through the *root* logger (``logging.exception``). Python's first
such call without a root handler installs one on stderr for good (``logging.basicConfig``), and
from then on py4j's connection errors (``BrokenPipeError``, "Exception while sending command")
print into the cell too. The engine raises the interrupt itself, with what the SDK did, so
while a job runs py4j's records are dropped, and a root logger without handlers gets a stand-in
for Python's last-resort handler, so that nothing installs one for good. Asked-for full
tracebacks (:func:`~s3commit_sdk.errors.full_tracebacks`) leave logging as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from ..errors import full_tracebacks

#: the loggers py4j logs through: its own, and the root logger
_PY4J_LOGGERS = ("py4j.java_gateway", "py4j.clientserver", "")


class _DropPy4j(logging.Filter):
    """Drops the records py4j's modules log (whatever logger they use)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.startswith(self.directory)


class _LastResort(logging.Handler):
    """Root's handler while a job runs when it had none: prints what Python's last resort
    would (a record at WARNING or above that no other handler took)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        logger = logging.getLogger(record.name) if record.name != "root" else logging.root
        while logger is not logging.root:  # the record reached root: every logger propagates
            if logger.handlers:
                return
            logger = logger.parent
        if logging.lastResort is not None:
            logging.lastResort.handle(record)


@contextlib.contextmanager
def py4j_kept_quiet() -> Iterator[None]:
    """While the block runs: py4j's records dropped, no handler installed on root for good."""
    if full_tracebacks():
        yield
        return
    import py4j

    drop = _DropPy4j(os.path.dirname(os.path.abspath(py4j.__file__)) + os.sep)
    loggers = [logging.getLogger(name) for name in _PY4J_LOGGERS]
    stand_in = _LastResort() if not logging.root.handlers else None
    for logger in loggers:
        logger.addFilter(drop)
    if stand_in is not None:
        logging.root.addHandler(stand_in)
    try:
        yield
    finally:
        if stand_in is not None:
            logging.root.removeHandler(stand_in)
        for logger in loggers:
            logger.removeFilter(drop)
