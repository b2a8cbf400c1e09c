"""Pluggable S3 credentials: a provider shipped with the job and called wherever a store is built.

Executors without an instance profile (Databricks serverless, standard access mode) cannot take
credentials from their environment. A provider travels with the job to every task instead:

- a callable (pickled with the job; a function defined in a notebook travels by value), or
- ``"package.module:function"``, imported where the store is built (the only form a Spark
  data source option can carry).

It is called without arguments and returns a ``boto3.session.Session``, botocore
``Credentials``, or a mapping with ``access_key``, ``secret_key`` and optionally ``token`` and
``expiry_time`` (ISO 8601 text or a ``datetime``).

Credentials that expire (a mapping with ``expiry_time``, botocore ``RefreshableCredentials``)
last as long as the job: the store's session holds botocore ``RefreshableCredentials`` whose
refresh calls the provider again, on botocore's schedule (from 15 minutes before expiry; every
request waits for it in the last 10). Every set of keys handed out is redacted from the logs
while it, or the set after it, is in use (:func:`~s3commit_sdk.redaction.hold_secrets`).

Fixed temporary keys (options ``access.key`` / ``secret.key`` / ``session.token``, or
``AWS_SESSION_TOKEN`` in the driver's environment) cannot be refreshed: when S3 refuses them
as expired, the job fails with :class:`~s3commit_sdk.errors.ExpiredCredentialsError`
(:func:`expiry_told`) naming the stage, what is visible and the command to run with fresh
credentials.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import boto3
import botocore.credentials
import botocore.session
import botocore.utils

from .errors import (
    NOTHING_VISIBLE,
    VISIBLE,
    CredentialsError,
    ExpiredCredentialsError,
    InvalidArgumentError,
    StoreError,
    first_line,
)
from .redaction import hold_secrets, redacted_logs

if TYPE_CHECKING:
    from .options import CommitOptions
    from .protocol import JobContext
    from .store.s3 import S3Settings

CredentialsProvider = Callable[[], Any] | str
#: how botocore names credentials that a provider of ours hands out
PROVIDER_METHOD = "s3commit-credentials-provider"
#: what S3 answers to a request signed with expired temporary credentials
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired"})


@dataclass(frozen=True, kw_only=True)
class AccessKeys:
    """Key credentials, as given (``CommitOptions``) and as resolved (``S3Settings``).

    Declared once so both keep them out of ``repr`` alike. Keyword-only: the holders' own
    fields keep their positions (``S3Settings(endpoint_url)``).
    """

    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)


def resolve_provider(provider: CredentialsProvider) -> Callable[[], Any]:
    """The provider as a callable; a ``"module:function"`` string is imported."""
    if callable(provider):
        return provider
    if isinstance(provider, str) and provider.count(":") == 1:
        module_name, _, name = provider.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as exc:
            raise InvalidArgumentError(
                f"credentials provider {provider!r} cannot be imported here ({exc}): it must be "
                "installed on the driver and on every executor"
            ) from exc
        if callable(target):
            return target
    raise InvalidArgumentError(
        f"credentials provider must be a callable or 'package.module:function', got {provider!r}"
    )


def provider_name(provider: CredentialsProvider) -> str:
    """The provider as errors name it: ``module:function`` (a callable) or as given."""
    if isinstance(provider, str):
        return provider
    module = getattr(provider, "__module__", None) or "?"
    name = getattr(provider, "__qualname__", None) or type(provider).__qualname__
    return f"{module}:{name}"


def provider_session(provider: CredentialsProvider) -> boto3.session.Session:
    """A boto3 session holding what the provider returns: credentials that expire are
    refreshed by calling it again. :class:`CredentialsError` naming the provider and its
    error when it raises."""
    calls = _ProviderCalls(provider)
    made = calls.made()
    if isinstance(made, boto3.session.Session):
        return made
    keys = calls.keys_of(made)
    if keys["expiry_time"] is None:
        return boto3.session.Session(
            aws_access_key_id=keys["access_key"],
            aws_secret_access_key=keys["secret_key"],
            aws_session_token=keys["token"],
        )
    credentials = botocore.credentials.RefreshableCredentials.create_from_metadata(
        keys, refresh_using=calls.refreshed, method=PROVIDER_METHOD
    )
    core = botocore.session.get_session()
    core.register_component(
        "credential_provider", botocore.credentials.CredentialResolver([_Given(credentials)])
    )
    return boto3.session.Session(botocore_session=core)


class _Given(botocore.credentials.CredentialProvider):
    """The one link of a session's credential chain: the provider's refreshable credentials."""

    METHOD = CANONICAL_NAME = PROVIDER_METHOD

    def __init__(self, credentials: botocore.credentials.Credentials) -> None:
        super().__init__()
        self.credentials = credentials

    def load(self) -> botocore.credentials.Credentials:
        return self.credentials


class _Generation:
    """Stands for one set of keys a provider handed out: their secrets are redacted while it
    lives (:func:`hold_secrets`)."""


def fixed_keys(settings: Any) -> tuple[str, str, str | None] | None:
    """(access key, secret key, token) as the store resolves them (explicit keys, a provider,
    the profile, the environment or an instance role), for clients outside boto3 (delta-rs,
    pyiceberg's file IO) that take fixed keys; None where none are found."""
    if settings.access_key and settings.secret_key:
        return settings.access_key, settings.secret_key, settings.session_token
    if settings.credentials_provider is not None:
        session = provider_session(settings.credentials_provider)
    else:
        session = boto3.session.Session(profile_name=settings.profile)
    found = session.get_credentials()
    if found is None:
        return None
    frozen = found.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token


class _ProviderCalls:
    """Calls one provider and reads what it returns, as botocore's refresh function too.

    The secrets of each set of keys are held (redacted) until the set after the next one is
    handed out: a request signed just before a refresh may still log its keys."""

    def __init__(self, provider: CredentialsProvider) -> None:
        self.provider = provider
        self.call = resolve_provider(provider)
        self._held: tuple[_Generation, ...] = ()

    def made(self) -> Any:
        """What the provider returns; its own requests (an STS call) are logged redacted."""
        try:
            with redacted_logs():
                return self.call()
        except Exception as exc:
            name = provider_name(self.provider)
            raise CredentialsError(
                f"the credentials provider {name} raised {type(exc).__name__}: {exc}",
                provider=name,
            ) from exc

    def keys_of(self, made: Any) -> dict[str, Any]:
        """botocore's credential metadata of what the provider returned (``expiry_time``:
        ISO 8601 text, None when they do not expire); their secrets are held from now on."""
        if isinstance(made, botocore.credentials.Credentials):
            frozen = made.get_frozen_credentials()  # refreshes them if they are due
            keys = {"access_key": frozen.access_key, "secret_key": frozen.secret_key}
            keys |= {"token": frozen.token, "expiry_time": getattr(made, "_expiry_time", None)}
        elif isinstance(made, Mapping) and made.get("access_key") and made.get("secret_key"):
            keys = {"access_key": made["access_key"], "secret_key": made["secret_key"]}
            keys |= {"token": made.get("token"), "expiry_time": made.get("expiry_time")}
        else:
            raise InvalidArgumentError(
                "a credentials provider returns a boto3 Session, botocore Credentials or a "
                f"mapping with access_key and secret_key; got {type(made).__name__}"
            )
        if keys["expiry_time"] is not None:
            keys["expiry_time"] = self._expiry(keys["expiry_time"]).isoformat()
        generation = _Generation()
        hold_secrets(generation, keys["secret_key"], keys["token"])
        self._held = (*self._held[-1:], generation)
        return keys

    def refreshed(self) -> dict[str, Any]:
        """botocore's ``refresh_using``: the provider's next credentials."""
        keys = self.keys_of(self.made())
        if keys["expiry_time"] is None:
            name = provider_name(self.provider)
            raise CredentialsError(
                f"the credentials provider {name} handed out credentials with an expiry, then "
                "credentials without one: a provider whose credentials expire gives "
                "expiry_time every time",
                provider=name,
            )
        return keys

    def _expiry(self, value: Any) -> datetime:
        try:
            when = value if isinstance(value, datetime) else botocore.utils.parse_timestamp(value)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"the credentials provider {provider_name(self.provider)} gave expiry_time "
                f"{value!r}: give ISO 8601 text or a datetime ({exc})"
            ) from exc
        when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        if when <= datetime.now(timezone.utc):
            name = provider_name(self.provider)
            raise CredentialsError(
                f"the credentials provider {name} handed out credentials that expired at "
                f"{when.isoformat()}",
                provider=name,
            )
        return when


def with_provider(
    settings: S3Settings, options: CommitOptions, provider: CredentialsProvider | None
) -> S3Settings:
    """``settings`` taking credentials from ``provider`` instead of the driver's environment."""
    if provider is None:
        return settings
    if options.access_key or options.session_token or options.profile:
        raise InvalidArgumentError(
            "give either a credentials provider or the options access.key / secret.key / "
            "session.token / profile, not both"
        )
    try:  # a bad provider fails here, before anything is uploaded
        provider_session(provider)
    except CredentialsError as exc:
        raise CredentialsError(
            f"{exc}; nothing was uploaded",
            provider=exc.provider,
            visible=NOTHING_VISIBLE,
        ) from exc.__cause__
    return dataclasses.replace(
        settings,
        credentials_provider=provider,
        access_key=None,
        secret_key=None,
        session_token=None,
        profile=None,
    )


# -- fixed keys that expired during a job ------------------------------------------------------
@contextmanager
def expiry_told(job: JobContext, stage: str) -> Iterator[None]:
    """Around a stage of ``job`` (``tasks``, ``job commit``): a failure caused by S3 refusing
    the credentials as expired leaves as :func:`expired_credentials` says it."""
    try:
        yield
    except ExpiredCredentialsError:  # told by an inner stage already
        raise
    except Exception as exc:
        expired = expired_credentials(exc, job, stage)
        if expired is None:
            raise
        raise expired from exc


def expired_credentials(
    error: BaseException, job: JobContext, stage: str
) -> ExpiredCredentialsError | None:
    """``error``, the typed failure of a stage of ``job``, as the error of credentials that
    expired, when a refusal of S3 coded ``ExpiredToken`` caused it (None otherwise).

    What the stage's error said is kept (``visible``, ``remedy``, its notes); the message says the
    credentials expired, where, what is visible and what to run with fresh credentials: a job
    commit that got as far as its completions is finished by ``s3commit recover`` (the
    journal names every upload); before, the stage's own remedy cleans up and the write is
    run again.
    """
    refused = _expired_refusal(error)
    if refused is None:
        return None
    url = job.location.url()
    visible = getattr(error, "visible", None)
    remedy = getattr(error, "remedy", None)
    if stage != "tasks" and visible != NOTHING_VISIBLE:  # completions began: the journal
        remedy = f"s3commit recover {url}"  # names them all, recover finishes the job
    if remedy is None:
        todo = "Run the write again with fresh credentials."
    elif remedy.startswith("s3commit recover"):
        todo = f"With fresh credentials, `{remedy}` finishes the job (or `s3commit abort {url}`)."
    else:
        todo = f"With fresh credentials, `{remedy}` removes what it left; then write again."
    shown = VISIBLE.get(visible or "", "unchecked, maybe some of its files")
    expired = ExpiredCredentialsError(
        f"the S3 credentials of job {job.job_id} expired during its {stage} ({refused}). "
        "Fixed keys (access.key / secret.key / session.token, or AWS_SESSION_TOKEN) cannot "
        "be refreshed: give a credentials_provider, or credentials that last longer than the "
        f"job. Visible at {url}: {shown}. {todo}",
        stage=stage,
        destination=url,
        job_id=job.job_id,
        visible=visible,
        remedy=remedy,
    )
    for note in getattr(error, "__notes__", ()):  # what the SDK did meanwhile (aborts, ...)
        expired.add_note(note)
    return expired


def _expired_refusal(error: BaseException) -> str | None:
    """The first line of the S3 error coded as expired credentials in ``error``'s chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StoreError) and current.code in EXPIRED_CODES:
            return first_line(current)
        current = current.__cause__ or current.__context__
    return None
