"""Credentials out of log records while a job (or a CLI command) runs.

At DEBUG level botocore logs every signed request: the ``Authorization`` header, the session
token in ``X-Amz-Security-Token`` and the canonical request that repeats it. The filter that
:func:`redacted_logs` installs rewrites such records before any handler writes them: header
values and the job's secret values (secret key, session token) become ``***``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from urllib.parse import quote

REDACTED = "***"
#: Loggers whose records carry requests: ours, and the AWS SDK's stack under it.
LOGGER_PREFIXES = ("s3commit_sdk", "botocore", "boto3", "s3transfer", "urllib3")
#: Shorter values are ordinary words (the sandbox's "sandbox"), not secrets; real keys are 40.
MIN_SECRET_LENGTH = 8
# The header's value, in every form botocore logs: a dict repr ('Authorization': b'...'),
# a header or canonical-request line (x-amz-security-token:...), a query string (...=...&).
_HEADER_VALUE = re.compile(
    r"(?P<name>x-amz-security-token|authorization)(?P<sep>['\"]?\s*[:=]\s*b?['\"]?)[^'\"\r\n&]+",
    re.IGNORECASE,
)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message (and formatted traceback) without the credentials in it."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        super().__init__()
        values = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        values |= {quote(s, safe="") for s in values}  # as it appears in a query string
        self.secrets = sorted(values, key=len, reverse=True)

    def redact(self, text: str) -> str:
        text = _HEADER_VALUE.sub(lambda m: m["name"] + m["sep"] + REDACTED, text)
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: the handler reports it as usual
            return True
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


@contextmanager
def redacted_logs(*secrets: str | None) -> Iterator[RedactingFilter]:
    """Redact credentials and ``secrets`` in every record logged while the block runs.

    The filter goes on the SDK's and the AWS SDK's loggers (records are rewritten before any
    handler sees them) and on every handler that exists, which covers loggers created later.
    """
    redacting = RedactingFilter(secrets)
    targets = _loggers_and_handlers()
    for target in targets:
        target.addFilter(redacting)
    try:
        yield redacting
    finally:
        for target in targets:
            target.removeFilter(redacting)


def _loggers_and_handlers() -> list[logging.Filterer]:
    loggers = [logging.getLogger(name) for name in LOGGER_PREFIXES]
    everyone = [logging.getLogger()]
    for name, item in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(item, logging.Logger):
            everyone.append(item)
            if name.split(".", 1)[0] in LOGGER_PREFIXES and item not in loggers:
                loggers.append(item)
    handlers = {id(h): h for logger in everyone for h in logger.handlers}
    if logging.lastResort is not None:
        handlers[id(logging.lastResort)] = logging.lastResort
    return [*loggers, *handlers.values()]
