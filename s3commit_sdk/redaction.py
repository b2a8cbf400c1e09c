"""Credentials out of log records wherever the SDK talks to S3.

At DEBUG level botocore logs every signed request: the ``Authorization`` header, the session
token in ``X-Amz-Security-Token`` and the canonical request that repeats it; urllib3 logs the
URL of a presigned request with the token in its query. Such records are rewritten as they are
made (logging's record factory, so before any filter or handler sees them, ours or one added
later): header values, the secrets of answers that hand out credentials (STS's) and the secrets
held now (secret keys, session tokens) become ``***``.

Secrets are held for as long as something that can log them exists:

- every S3 client holds its own credentials while it lives (:func:`hold_secrets`, called
  where the stores' client is built, whatever the credentials' source), so the requests of
  any store are redacted, whoever made it: a job, the listing after a failure, the widgets,
  the CLI;
- a block holds secrets known before any store exists (:func:`redacted_logs`: a job's driver
  steps, a CLI command).

While nothing holds secrets, records are left as they are.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from urllib.parse import quote

REDACTED = "***"
#: Shorter values are ordinary words (the sandbox's "sandbox"), not secrets; real keys are 40.
MIN_SECRET_LENGTH = 8
# The header's value, in every form botocore logs: a dict repr ('Authorization': b'...'),
# a header or canonical-request line (x-amz-security-token:...), a query string (...=...&).
_HEADER_VALUE = re.compile(
    r"(?P<name>x-amz-security-token|authorization)(?P<sep>['\"]?\s*[:=]\s*b?['\"]?)[^'\"\r\n&]+",
    re.IGNORECASE,
)
# The secrets of an answer that hands out credentials (STS's XML, SSO's and a credential
# process's JSON), logged by the client a credentials provider calls before they are held.
_CREDENTIAL_FIELD = re.compile(
    r"(?P<name>(?P<tag><)?(?:SecretAccessKey|SessionToken)(?(tag)>|\"\s*:\s*\"))[^<\"]+",
    re.IGNORECASE,
)


def secret_values(secrets: Iterable[str | None]) -> list[str]:
    """The values to look for: each secret long enough to be one, and its URL-quoted form (as
    it appears in a query string)."""
    values = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
    values |= {quote(s, safe="") for s in values}
    return sorted(values)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message (and formatted traceback) without the credentials in it."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        super().__init__()
        self.secrets = sorted(secret_values(secrets), key=len, reverse=True)

    def redact(self, text: str) -> str:
        text = _HEADER_VALUE.sub(lambda m: m["name"] + m["sep"] + REDACTED, text)
        text = _CREDENTIAL_FIELD.sub(lambda m: m["name"] + REDACTED, text)
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


class _Holds:
    """The secrets held now, counted by holder, and the filter that redacts them (None while
    nothing is held). One per process: records of every thread are made by one factory.

    Reentrant: a store's finalizer may release its secrets from the garbage collector while
    this thread holds the lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._secrets: Counter[str] = Counter()
        self._holders = 0
        self.current: RedactingFilter | None = None

    def add(self, secrets: Iterable[str | None]) -> list[str]:
        values = secret_values(secrets)
        with self._lock:
            _install_factory()
            self._holders += 1
            self._secrets.update(values)
            self.current = RedactingFilter(list(self._secrets))
        return values

    def release(self, values: list[str]) -> None:
        with self._lock:
            self._holders -= 1
            self._secrets.subtract(values)
            self._secrets = +self._secrets  # drops the values no holder holds any more
            self.current = RedactingFilter(list(self._secrets)) if self._holders else None


_HOLDS = _Holds()
_previous_factory = logging.getLogRecordFactory()
_factory_installed = False


def _redacted_record(*args, **kwargs) -> logging.LogRecord:
    record = _previous_factory(*args, **kwargs)
    redacting = _HOLDS.current
    if redacting is not None:
        redacting.filter(record)
    return record


def _install_factory() -> None:
    """Ours wraps the factory installed when the first secret is held (once per process)."""
    global _previous_factory, _factory_installed
    if not _factory_installed:
        _previous_factory = logging.getLogRecordFactory()
        logging.setLogRecordFactory(_redacted_record)
        _factory_installed = True


def hold_secrets(owner: object, *secrets: str | None) -> None:
    """Redact ``secrets`` (and request headers) in every log record made while ``owner``
    lives: an S3 client holds its own credentials this way."""
    weakref.finalize(owner, _HOLDS.release, _HOLDS.add(secrets))


@contextmanager
def redacted_logs(*secrets: str | None) -> Iterator[RedactingFilter]:
    """Redact request headers and ``secrets`` in every record logged while the block runs
    (together with what stores hold meanwhile); yields a filter of ``secrets`` alone, for
    text the caller prints itself."""
    values = _HOLDS.add(secrets)
    try:
        yield RedactingFilter(secrets)
    finally:
        _HOLDS.release(values)
