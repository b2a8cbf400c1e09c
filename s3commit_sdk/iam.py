"""Least-privilege IAM: the S3 operations each part of the SDK sends, and the policy they need.

Every request the SDK makes is one S3 operation (botocore's name, as ``S3Store.counters`` and
``_SUCCESS`` count them); IAM authorizes an operation by one or more actions
(:data:`OPERATION_ACTIONS`, after the Amazon S3 User Guide's "Policy actions for Amazon S3" and
the IAM "Service Authorization Reference" for S3). Each use of the SDK (:data:`USES`) lists
the operations it sends, so its actions follow; ``tests/test_iam.py`` checks those lists
against the operations a real run records, and runs every use under exactly the policy
:func:`policy` builds, on servers that enforce it.

The policy's statements:

- ``s3:ListBucket`` on the bucket, limited to listings under the destination by an
  ``s3:prefix`` condition. The condition is ``StringLikeIfExists``: the SDK's fail-early
  ``HeadBucket`` is authorized by ``s3:ListBucket`` and carries no prefix, which a plain
  ``StringLike`` refuses (checked on Ceph RGW 16); a listing without any prefix passes too.
- the other bucket-level actions (uploads listing, lifecycle) on the bucket, and
  ``s3:DeleteObject`` on the bucket as well: Ceph RGW 16 (and moto) authorize a
  ``DeleteObjects`` request against the bucket before each key against its object; AWS
  authorizes each key only, so there the grant on the bucket matches nothing and is harmless.
- the object actions on ``arn:aws:s3:::BUCKET/PREFIX/*``: a destination is a directory, so
  ``PREFIX`` never reaches ``PREFIX10``.
- with SSE-KMS, ``kms:GenerateDataKey`` (objects created) and ``kms:Decrypt`` (objects read,
  multipart uploads) on the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError
from .paths import S3Location, parse_s3_url

#: the IAM actions that authorize each S3 operation the SDK sends (botocore's operation names)
OPERATION_ACTIONS: dict[str, tuple[str, ...]] = {
    "HeadBucket": ("s3:ListBucket",),
    "ListObjectsV2": ("s3:ListBucket",),
    "HeadObject": ("s3:GetObject",),
    "GetObject": ("s3:GetObject",),
    "PutObject": ("s3:PutObject",),
    "CopyObject": ("s3:GetObject", "s3:PutObject"),  # read the source, create the target
    "DeleteObjects": ("s3:DeleteObject",),
    "CreateMultipartUpload": ("s3:PutObject",),
    "UploadPart": ("s3:PutObject",),
    "CompleteMultipartUpload": ("s3:PutObject",),
    "AbortMultipartUpload": ("s3:AbortMultipartUpload",),
    "ListMultipartUploads": ("s3:ListBucketMultipartUploads",),
    "ListParts": ("s3:ListMultipartUploadParts",),
    "GetBucketVersioning": ("s3:GetBucketVersioning",),
    "GetBucketLifecycleConfiguration": ("s3:GetLifecycleConfiguration",),
    "PutBucketLifecycleConfiguration": ("s3:PutLifecycleConfiguration",),
}
#: actions whose resource is the bucket (``arn:aws:s3:::BUCKET``); the others name objects
BUCKET_ACTIONS = frozenset(
    {
        "s3:ListBucket",
        "s3:ListBucketMultipartUploads",
        "s3:GetBucketVersioning",
        "s3:GetLifecycleConfiguration",
        "s3:PutLifecycleConfiguration",
    }
)
#: with SSE-KMS: the KMS actions each operation needs on the key (creating an object asks KMS
#: for a data key; reading one, and every step of a multipart upload, decrypts it)
KMS_ACTIONS: dict[str, tuple[str, ...]] = {
    "PutObject": ("kms:GenerateDataKey",),
    "CopyObject": ("kms:GenerateDataKey", "kms:Decrypt"),
    "CreateMultipartUpload": ("kms:GenerateDataKey", "kms:Decrypt"),
    "UploadPart": ("kms:GenerateDataKey", "kms:Decrypt"),
    "CompleteMultipartUpload": ("kms:GenerateDataKey", "kms:Decrypt"),
    "GetObject": ("kms:Decrypt",),
}

#: a job of the S3 committers (directory, partitioned, magic), any format, the tables included
#: (delta-rs reads and writes the log with GetObject, ListObjectsV2 and conditional PutObject;
#: Iceberg's metadata goes through the SDK's store: GetObject, HeadObject, PutObject,
#: DeleteObjects; its catalog's own permissions, such as Glue's, are the catalog's business)
S3_JOB = frozenset(
    {
        "HeadBucket",  # fail early: the bucket exists and answers these credentials
        "ListObjectsV2",  # conflict checks, replace, the job's hidden directory, Delta's log
        "HeadObject",  # an unfinished commit, the job-alive check, verification, Iceberg
        "GetObject",  # _SUCCESS (schema check), the marker, Delta's log, Iceberg's metadata
        "PutObject",  # setup probe, markers, pendingsets, journal, _SUCCESS, table metadata
        "DeleteObjects",  # setup probe, replaced files, the job's hidden files
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "ListMultipartUploads",  # the job's leftover uploads, at job end
        "AbortMultipartUpload",  # a failed or losing attempt's uploads
    }
)
#: a job of the rename committers (manifest, file) on S3: "rename" is COPY + DELETE
RENAME_JOB = frozenset(
    {"ListObjectsV2", "HeadObject", "GetObject", "PutObject", "CopyObject", "DeleteObjects"}
)


@dataclass(frozen=True)
class Use:
    """One part of the SDK and the S3 operations it sends. ``optional``: operations whose
    refusal it tolerates (they only improve a message), left out of the policy."""

    name: str
    what: str
    operations: frozenset[str]
    optional: frozenset[str] = frozenset()

    @property
    def actions(self) -> tuple[str, ...]:
        return actions_of(self.operations)


USES: dict[str, Use] = {
    use.name: use
    for use in (
        Use(
            "write",
            'a job: write_committed, format("s3commit"), every committer and format',
            S3_JOB | RENAME_JOB,
            # a store found ignoring If-None-Match: is versioning the cause? (the error says)
            optional=frozenset({"GetBucketVersioning"}),
        ),
        Use(
            "recover",
            "s3commit recover / abort (roll an unfinished commit forward or back)",
            frozenset(
                {
                    "HeadBucket",
                    "ListObjectsV2",
                    "HeadObject",
                    "GetObject",
                    "PutObject",
                    "DeleteObjects",
                    "CompleteMultipartUpload",
                    "ListMultipartUploads",
                    "AbortMultipartUpload",
                }
            ),
        ),
        Use(
            "widgets",
            "PendingUploads (with cleanup), SuccessReport, s3commit uploads / success, read_result",
            frozenset(
                {
                    "ListMultipartUploads",
                    "ListParts",
                    "AbortMultipartUpload",
                    "HeadBucket",  # a missing _SUCCESS: is the bucket there?
                    "HeadObject",
                    "GetObject",
                }
            ),
        ),
        Use(
            "lifecycle",
            "s3commit lifecycle (a bucket rule aborting old uploads)",
            frozenset({"GetBucketLifecycleConfiguration", "PutBucketLifecycleConfiguration"}),
        ),
        Use(
            "read",
            'the s3commit reader (spark.read.format("s3commit")), Delta and Iceberg tables '
            "included",
            frozenset({"ListObjectsV2", "HeadObject", "GetObject"}),
        ),
    )
}


def write_operations(committer: str) -> frozenset[str]:
    """The operations a job of ``committer`` sends, whatever its format (Delta's log requests
    are among the S3 committers' own)."""
    return RENAME_JOB if committer in ("manifest", "file") else S3_JOB


def actions_of(operations: Iterable[str]) -> tuple[str, ...]:
    """The IAM actions that authorize ``operations``, sorted; KeyError for one not in
    :data:`OPERATION_ACTIONS` (a request the map does not know yet)."""
    return tuple(sorted({a for op in operations for a in OPERATION_ACTIONS[op]}))


def uses_named(names: Iterable[str] | None) -> list[Use]:
    """The uses by name (None or empty: all of them); InvalidArgumentError naming the known."""
    chosen = list(names or USES)
    unknown = [n for n in chosen if n not in USES]
    if unknown:
        raise InvalidArgumentError(
            f"unknown use {', '.join(map(repr, unknown))}: choose from {', '.join(USES)}"
        )
    return [USES[n] for n in dict.fromkeys(chosen)]


def policy(
    path: str, uses: Iterable[str] | None = None, kms_key: str | None = None
) -> dict[str, Any]:
    """The IAM policy document granting exactly what ``uses`` (default: all) need on the
    destination ``path`` (``s3://bucket/prefix``); ``kms_key``: the ARN of the SSE-KMS key."""
    location = parse_s3_url(path)
    operations = frozenset().union(*(u.operations for u in uses_named(uses)))
    actions = actions_of(operations)
    statements = _bucket_statements(location, actions, operations)
    objects = [a for a in actions if a not in BUCKET_ACTIONS]
    if objects:
        statements.append(
            {
                "Sid": "ObjectsUnderTheDestination",
                "Effect": "Allow",
                "Action": objects,
                "Resource": f"{_bucket_arn(location)}/{location.dir_prefix}*",
            }
        )
    if kms_key:
        statements.append(_kms_statement(kms_key, operations))
    return {"Version": "2012-10-17", "Statement": statements}


def policy_json(path: str, uses: Iterable[str] | None = None, kms_key: str | None = None) -> str:
    """:func:`policy` as the JSON text to paste (IAM console, ``aws iam put-user-policy``)."""
    return json.dumps(policy(path, uses, kms_key), indent=2)


def _bucket_arn(location: S3Location) -> str:
    return f"arn:aws:s3:::{location.bucket}"


def _bucket_statements(
    location: S3Location, actions: tuple[str, ...], operations: frozenset[str]
) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    if "s3:ListBucket" in actions:
        listing: dict[str, Any] = {
            "Sid": "ListTheDestination",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": _bucket_arn(location),
        }
        if location.dir_prefix:  # HeadBucket has no prefix: IfExists lets it through
            listing["Condition"] = {
                "StringLikeIfExists": {"s3:prefix": [f"{location.dir_prefix}*"]}
            }
        statements.append(listing)
    bucket = [a for a in actions if a in BUCKET_ACTIONS and a != "s3:ListBucket"]
    if "DeleteObjects" in operations:
        bucket.append("s3:DeleteObject")  # Ceph RGW, moto: DeleteObjects checked on the bucket
    if bucket:
        statements.append(
            {
                "Sid": "OnTheBucket",
                "Effect": "Allow",
                "Action": bucket,
                "Resource": _bucket_arn(location),
            }
        )
    return statements


def _kms_statement(kms_key: str, operations: frozenset[str]) -> dict[str, Any]:
    if not kms_key.startswith("arn:"):
        raise InvalidArgumentError(
            f"--kms-key {kms_key!r} is not an ARN: an IAM policy names the key by its ARN, "
            "arn:aws:kms:REGION:ACCOUNT:key/KEY-ID (aws kms describe-key --key-id ... shows it)"
        )
    actions = sorted({a for op in operations for a in KMS_ACTIONS.get(op, ())})
    return {"Sid": "UseTheEncryptionKey", "Effect": "Allow", "Action": actions, "Resource": kms_key}


def permission_of(operation: str) -> str | None:
    """The IAM action(s) that authorize ``operation``, in words (None: an unknown one)."""
    actions = OPERATION_ACTIONS.get(operation)
    return " and ".join(actions) if actions else None


def reference_markdown(path: str = "s3://my-bucket/warehouse/events") -> str:
    """The docs' IAM section body: operation -> action, actions per use, the whole policy."""
    rows = ["| S3 operation | IAM action(s) | resource |", "| --- | --- | --- |"]
    for op, actions in OPERATION_ACTIONS.items():
        where = "bucket" if all(a in BUCKET_ACTIONS for a in actions) else "object"
        rows.append(f"| `{op}` | {', '.join(f'`{a}`' for a in actions)} | {where} |")
    uses = ["| `--for` | what | operations | IAM actions |", "| --- | --- | --- | --- |"]
    for use in USES.values():
        ops = ", ".join(f"`{op}`" for op in sorted(use.operations))
        optional = "".join(
            f"; optional: `{op}` ({', '.join(OPERATION_ACTIONS[op])})" for op in use.optional
        )
        acts = ", ".join(f"`{a}`" for a in use.actions)
        uses.append(f"| `{use.name}` | {use.what} | {ops}{optional} | {acts} |")
    committers = ["| committer | formats | operations | IAM actions |", "| --- | --- | --- | --- |"]
    for names, formats in (
        (("directory", "partitioned", "magic"), "parquet, orc, csv, json, delta, iceberg"),
        (("manifest", "file"), "parquet, orc, csv, json"),
    ):
        ops = write_operations(names[0])
        committers.append(
            f"| {', '.join(f'`{n}`' for n in names)} | {formats} | "
            f"{', '.join(f'`{op}`' for op in sorted(ops))} | "
            f"{', '.join(f'`{a}`' for a in actions_of(ops))} |"
        )
    document = policy_json(path, kms_key="arn:aws:kms:REGION:ACCOUNT:key/KEY-ID")
    return "\n".join(
        [
            "Each S3 operation and the IAM actions that authorize it:\n",
            *rows,
            "\nWhat each use sends (`s3commit iam-policy --for USE`):\n",
            *uses,
            "\nA job, by committer and format:\n",
            *committers,
            f"\n`s3commit iam-policy {path} --kms-key arn:aws:kms:REGION:ACCOUNT:key/KEY-ID` "
            "(every use, with SSE-KMS):\n",
            "```json",
            document,
            "```",
            "",
        ]
    )
