"""Pluggable S3 credentials: a provider shipped with the job and called wherever a store is built.

Executors without an instance profile (Databricks serverless, standard access mode) cannot take
credentials from their environment. A provider travels with the job to every task instead:

- a callable (pickled with the job; a function defined in a notebook travels by value), or
- ``"package.module:function"``, imported where the store is built (the only form a Spark
  data source option can carry).

It is called without arguments and returns a ``boto3.session.Session``, botocore
``Credentials``, or a mapping with ``access_key``, ``secret_key`` and optionally ``token``.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import botocore.credentials

from .errors import NOTHING_VISIBLE, CredentialsError, InvalidArgumentError

if TYPE_CHECKING:
    from .options import CommitOptions
    from .store.s3 import S3Settings

CredentialsProvider = Callable[[], Any] | str


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
    """A boto3 session holding what the provider returns; :class:`CredentialsError` naming
    the provider and its error when it raises."""
    call = resolve_provider(provider)
    try:
        made = call()
    except Exception as exc:
        name = provider_name(provider)
        raise CredentialsError(
            f"the credentials provider {name} raised {type(exc).__name__}: {exc}",
            provider=name,
        ) from exc
    if isinstance(made, boto3.session.Session):
        return made
    if isinstance(made, botocore.credentials.Credentials):
        frozen = made.get_frozen_credentials()
        keys = (frozen.access_key, frozen.secret_key, frozen.token)
    elif isinstance(made, Mapping) and made.get("access_key") and made.get("secret_key"):
        keys = (made["access_key"], made["secret_key"], made.get("token"))
    else:
        raise InvalidArgumentError(
            "a credentials provider returns a boto3 Session, botocore Credentials or a mapping "
            f"with access_key and secret_key; got {type(made).__name__}"
        )
    return boto3.session.Session(
        aws_access_key_id=keys[0], aws_secret_access_key=keys[1], aws_session_token=keys[2]
    )


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
