"""Least privilege: every use of the SDK under exactly the IAM policy ``s3commit iam-policy``
prints, on servers that enforce it, and one action removed named by the error it gives.

The servers enforce user policies themselves; nothing is emulated:

- **moto**: a moto server of this module's own, started with ``INITIAL_NO_AUTH_ACTION_COUNT=4``:
  its first four requests (the bucket, an admin user, its policy allowing everything, its
  access key) are served without authentication, every later one is signed by a key moto knows
  and authorized by its user's policies. Where moto differs from AWS, said here: it authorizes
  ``HeadBucket`` by an action ``s3:HeadBucket`` (AWS and Ceph: ``s3:ListBucket``), so its users
  get that one more action on the bucket; it authorizes a whole ``DeleteObjects`` against the
  bucket (as RGW does, which the policy provides for); and it evaluates no condition, so the
  ``s3:prefix`` condition is only enforced on RGW.
- **Ceph RGW 16**: the session's RGW with users of their own (``RGWServer.add_user``), their
  policies attached by an admin user with the ``user-policy=*`` capability through RGW's IAM
  API (``PutUserPolicy``), in a bucket they do not own (an owner's ACL would allow everything).
  RGW enforces every action the SDK needs, the ``s3:prefix`` condition included.

Every run goes through a fault proxy that only counts requests (delta-rs's own included): what
each use sent must be among the operations :mod:`s3commit_sdk.iam` lists for it, as must the
counts the store records (``S3Store.counters``, in ``_SUCCESS``), so the lists cannot drift from
the code.
"""

from __future__ import annotations

import inspect
import json
import re
import uuid

import boto3
import botocore.exceptions
import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUCKET, differs_on

from s3commit_sdk import CommitError, MissingPermissionError, iam, write_committed
from s3commit_sdk.cli import main as cli
from s3commit_sdk.committers import exclusive
from s3commit_sdk.errors import ALL_VISIBLE, UNCHANGED_VISIBLE, AccessDeniedError
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.scan import file_schema, list_table, plan_splits, read_split
from s3commit_sdk.store import open_store
from s3commit_sdk.store import s3 as store_module
from s3commit_sdk.testing.crash import crash_write
from s3commit_sdk.testing.faultproxy import FaultProxy
from s3commit_sdk.testing.sandbox import DUMMY_ENV, S3Sandbox

REGION = DUMMY_ENV["AWS_REGION"]
#: the bucket of this module's users on RGW (they must not own it; the session's is in use)
RGW_BUCKET = "s3commit-iam"
FRAME = pd.DataFrame({"id": [1, 2, 3, 4], "day": ["a", "b", "a", "b"]})
#: a job of each committer, one format each (the format changes no request: iam.write_operations)
JOBS = [
    ("directory", "csv"),
    ("partitioned", "parquet"),
    ("magic", "json"),
    ("manifest", "orc"),
    ("file", "parquet"),
    ("partitioned", "delta"),
]


class Enforcing:
    """A server enforcing IAM user policies: its bucket, an unrestricted client for checks,
    and users made with a given policy."""

    def __init__(
        self,
        kind: str,
        endpoint: str,
        bucket: str,
        admin_keys: tuple[str, str],
        owner_keys: tuple[str, str] | None = None,
    ):
        self.kind, self.endpoint, self.bucket = kind, endpoint, bucket
        #: keys that may do anything in the bucket (checks, clean-ups)
        self.owner_keys = owner_keys or admin_keys
        self.iam = self._client("iam", admin_keys)

    def _client(self, service: str, keys: tuple[str, str]):
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=keys[0],
            aws_secret_access_key=keys[1],
        )

    def s3(self):
        return self._client("s3", self.owner_keys)

    def new_user(self) -> tuple[str, tuple[str, str]]:
        raise NotImplementedError

    def user(self, document: dict) -> tuple[str, str]:
        """The keys of a new user whose one policy is ``document``."""
        name, keys = self.new_user()
        self.iam.put_user_policy(
            UserName=name, PolicyName="s3commit", PolicyDocument=json.dumps(document)
        )
        return keys


class MotoEnforcing(Enforcing):
    def new_user(self) -> tuple[str, tuple[str, str]]:
        name = f"u{uuid.uuid4().hex[:12]}"
        self.iam.create_user(UserName=name)
        key = self.iam.create_access_key(UserName=name)["AccessKey"]
        return name, (key["AccessKeyId"], key["SecretAccessKey"])

    def user(self, document: dict) -> tuple[str, str]:
        """moto authorizes HeadBucket by ``s3:HeadBucket`` where AWS and RGW ask for
        ``s3:ListBucket``: a policy that allows the one gets the other."""
        listing = [s for s in document["Statement"] if s["Action"] == ["s3:ListBucket"]]
        extra = [{**s, "Sid": "MotoHeadBucket", "Action": ["s3:HeadBucket"]} for s in listing]
        return super().user({**document, "Statement": [*document["Statement"], *extra]})


class RGWEnforcing(Enforcing):
    def __init__(self, server, bucket: str, admin_keys: tuple[str, str]):
        super().__init__("rgw", server.endpoint, bucket, admin_keys)
        self.server = server
        # the bucket's owner may not read another user's objects (RGW keeps S3's object ACLs):
        # checks use a user allowed everything in the bucket
        everything = {
            "Effect": "Allow",
            "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        }
        self.owner_keys = self.user({"Version": "2012-10-17", "Statement": [everything]})

    def new_user(self) -> tuple[str, tuple[str, str]]:
        name = f"u{uuid.uuid4().hex[:12]}"
        keys = (name, f"{name}-secret")
        self.server.add_user(name, *keys)
        return name, keys


@pytest.fixture(scope="module")
def enforcing(s3_server):
    if s3_server.kind == "rgw":
        admin = ("s3commit-iam-admin", "s3commit-iam-admin-secret")
        s3_server.add_user(admin[0], *admin, caps="user-policy=*")
        s3_server.client().create_bucket(Bucket=RGW_BUCKET)
        yield RGWEnforcing(s3_server, RGW_BUCKET, admin)
        return
    # requests 1-4 unauthenticated: the bucket (S3Sandbox creates it), then the admin below
    with S3Sandbox(
        bucket=BUCKET, export=False, extra_env={"INITIAL_NO_AUTH_ACTION_COUNT": "4"}
    ) as server:
        setup = boto3.client("iam", endpoint_url=server.endpoint, region_name=REGION)
        setup.create_user(UserName="admin")
        everything = {"Effect": "Allow", "Action": "*", "Resource": "*"}
        setup.put_user_policy(
            UserName="admin",
            PolicyName="all",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [everything]}),
        )
        key = setup.create_access_key(UserName="admin")["AccessKey"]
        yield MotoEnforcing(
            "moto", server.endpoint, BUCKET, (key["AccessKeyId"], key["SecretAccessKey"])
        )


@pytest.fixture(scope="module")
def counting(enforcing):
    """A proxy in front of the enforcing server that counts every request by operation. It
    measures a copy by a HEAD of its source with a client of boto3's default session (made
    once): made here with the keys of the bucket's owner (moto: the admin); the default session is
    then made anew, with the environment's keys again."""
    with FaultProxy(enforcing.endpoint) as proxy, pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", enforcing.owner_keys[0])
        env.setenv("AWS_SECRET_ACCESS_KEY", enforcing.owner_keys[1])
        boto3.setup_default_session()
        proxy.upstream_client()
        env.undo()
        boto3.setup_default_session()
        yield proxy


class Root:
    """This test's destination directory and what it grants."""

    def __init__(self, enforcing: Enforcing, counting: FaultProxy, name: str) -> None:
        self.enforcing, self.counting = enforcing, counting
        self.prefix = f"iam/{name}-{uuid.uuid4().hex[:8]}"
        self.url = f"s3://{enforcing.bucket}/{self.prefix}"

    def options(self, uses: list[str] | None = None, without: str | None = None) -> dict:
        """SDK options with the keys of a new user granted exactly ``iam.policy`` of this
        directory for ``uses`` (minus the action ``without``), through the counting proxy."""
        document = iam.policy(self.url, uses)
        if without:
            for statement in document["Statement"]:
                statement["Action"] = [a for a in statement["Action"] if a != without]
            document["Statement"] = [s for s in document["Statement"] if s["Action"]]
        access, secret = self.enforcing.user(document)
        return {"endpoint": self.counting.endpoint, "access.key": access, "secret.key": secret}

    def sent(self) -> set[str]:
        """The operations sent since the last call."""
        seen = set(self.counting.counts)
        self.counting.reset()
        return seen

    def pending(self) -> list[str]:
        """Keys of the pending uploads under this directory, listed as the bucket's owner."""
        found = self.enforcing.s3().list_multipart_uploads(
            Bucket=self.enforcing.bucket, Prefix=self.prefix + "/"
        )
        return [u["Key"] for u in found.get("Uploads", [])]

    def listed(self) -> list[str]:
        """Keys under this directory (a few: one page), listed as the bucket's owner."""
        found = self.enforcing.s3().list_objects_v2(
            Bucket=self.enforcing.bucket, Prefix=self.prefix + "/"
        )
        return sorted(o["Key"] for o in found.get("Contents", []))


@pytest.fixture
def root(enforcing, counting, request):
    counting.reset()
    made = Root(enforcing, counting, request.node.originalname)
    yield made
    assert made.pending() == [], "pending uploads left"


def rows_read(options: dict, url: str) -> int:
    """Rows of ``url`` read by the s3commit reader (the data source's functions)."""
    store = open_store(options)
    listing = list_table(store, parse_s3_url(url), None)
    data = file_schema(store, listing)
    parts = [
        pa.field(c, t)
        for c, t in zip(listing.partition_columns, listing.partition_types, strict=True)
    ]
    wanted = pa.schema([*data, *parts])
    return sum(
        batch.num_rows
        for split in plan_splits(store, listing, 1 << 30)
        for batch in read_split(store, listing, split, data, wanted, "UTC")
    )


# -- the policy ---------------------------------------------------------------------------------
def test_the_policy_document():
    """Scoped to the bucket and the destination directory; KMS actions only with a key."""
    document = iam.policy("s3://bkt/out/ds1", ["write"])
    assert document["Version"] == "2012-10-17"
    by_sid = {s["Sid"]: s for s in document["Statement"]}
    assert by_sid["ListTheDestination"]["Resource"] == "arn:aws:s3:::bkt"
    assert by_sid["ListTheDestination"]["Condition"] == {
        "StringLikeIfExists": {"s3:prefix": ["out/ds1/*"]}
    }
    assert by_sid["ObjectsUnderTheDestination"]["Resource"] == "arn:aws:s3:::bkt/out/ds1/*"
    assert set(by_sid["ObjectsUnderTheDestination"]["Action"]) == {
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
    }
    assert by_sid["OnTheBucket"]["Action"] == ["s3:ListBucketMultipartUploads", "s3:DeleteObject"]
    assert "kms" not in json.dumps(document)
    key = "arn:aws:kms:eu-west-1:111122223333:key/k"
    kms = iam.policy("s3://bkt/out/ds1", ["read"], kms_key=key)["Statement"][-1]
    assert kms == {
        "Sid": "UseTheEncryptionKey",
        "Effect": "Allow",
        "Action": ["kms:Decrypt"],
        "Resource": key,
    }
    kms = iam.policy("s3://bkt/out/ds1", ["write"], kms_key=key)["Statement"][-1]
    assert kms["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    lifecycle = iam.policy("s3://bkt/", ["lifecycle"])["Statement"]
    assert [s["Action"] for s in lifecycle] == [
        ["s3:GetLifecycleConfiguration", "s3:PutLifecycleConfiguration"]
    ]


def test_the_map_knows_every_operation_the_store_sends():
    """Every boto3 call in the store (the one door every request passes through) is an
    operation the map names: a new kind of request fails here until it is mapped."""
    store = inspect.getsource(store_module)
    methods = set(re.findall(r"self\.client\.(\w+)\b(?!\.)", store)) - {"meta"}
    operations = {
        boto3.client("s3", region_name=REGION).meta.method_to_api_mapping[m] for m in methods
    }
    assert operations and operations <= set(iam.OPERATION_ACTIONS)
    every = set().union(*(u.operations | u.optional for u in iam.USES.values()))
    assert every == set(iam.OPERATION_ACTIONS)


def test_the_cli_prints_the_policy(capsys):
    key = "arn:aws:kms:eu-west-1:111122223333:key/k"
    assert cli(["iam-policy", "s3://bkt/out", "--for", "read", "widgets", "--kms-key", key]) == 0
    assert json.loads(capsys.readouterr().out) == iam.policy(
        "s3://bkt/out", ["read", "widgets"], key
    )
    assert cli(["iam-policy", "s3://bkt/out", "--kms-key", "alias/mine"]) == 2
    assert "not an ARN" in capsys.readouterr().err


# -- every use under exactly its policy -------------------------------------------------------
@pytest.mark.filterwarnings("ignore:the classic file committer on S3")
def test_every_committer_writes_and_reads_under_exactly_its_policy(root):
    """Each committer (one format each, Delta too), then a replace, under ``--for write``;
    the reader under ``--for read``. What each sent is what iam lists for it."""
    writer = root.options(["write"])
    for committer, fmt in JOBS:
        url = f"{root.url}/{committer}-{fmt}"
        result = write_committed(
            FRAME, url, committer=committer, format=fmt, partition_by="day", options=writer
        )
        listed = iam.write_operations(committer)
        assert set(result.requests) <= listed, committer  # S3Store.counters, in _SUCCESS
        assert root.sent() <= listed, committer  # every request (delta-rs's too)
    replaced = f"{root.url}/partitioned-parquet"
    write_committed(
        FRAME,
        replaced,
        committer="partitioned",
        conflict_mode="replace",
        partition_by="day",
        options=writer,
    )
    assert root.sent() <= iam.USES["write"].operations
    reader = root.options(["read"])
    for committer, fmt in JOBS:
        if fmt in ("parquet", "delta"):  # the text formats are read back by their own tests
            assert rows_read(reader, f"{root.url}/{committer}-{fmt}") == len(FRAME), committer
    assert root.sent() <= iam.USES["read"].operations


def test_a_classic_spark_write_under_exactly_the_write_policy(spark, root):
    """``df.write.format("s3commit")``: the driver and Spark's Python workers send only what
    ``--for write`` grants; the reader then reads it back under ``--for read``."""
    from s3commit_sdk import register

    register(spark)
    writer = spark.createDataFrame(FRAME).write.format("s3commit").mode("append")
    for key, value in {
        **root.options(["write"]),
        "committer": "magic",
        "partition_by": "day",
    }.items():
        writer = writer.option(key, value)
    writer.save(root.url)
    assert root.sent() <= iam.write_operations("magic")
    assert rows_read(root.options(["read"]), root.url) == len(FRAME)


def test_listings_stay_under_the_destination(root, s3_server):
    """The ``s3:prefix`` condition: a listing elsewhere in the bucket is refused by RGW (moto
    evaluates no condition), while the HEAD of the bucket (no prefix: ``IfExists``) passes."""
    keys = root.options(["read"])
    s3 = boto3.client(
        "s3",
        endpoint_url=root.enforcing.endpoint,
        region_name=REGION,
        aws_access_key_id=keys["access.key"],
        aws_secret_access_key=keys["secret.key"],
    )
    s3.list_objects_v2(Bucket=root.enforcing.bucket, Prefix=f"{root.prefix}/")
    if differs_on(s3_server, "moto", "moto evaluates no policy condition (s3:prefix)"):
        return
    s3.head_bucket(Bucket=root.enforcing.bucket)
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        s3.list_objects_v2(Bucket=root.enforcing.bucket, Prefix="elsewhere/")


def test_recover_and_abort_under_exactly_their_policy(root, monkeypatch):
    """Two jobs killed before their first completion: ``s3commit recover`` rolls one forward,
    ``s3commit abort`` the other back, as a user granted ``--for recover`` only."""
    writer = root.options(["write"])
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", root.enforcing.endpoint)  # crash_write's upstream
    for name in ("forward", "back"):
        crash_write(
            FRAME,
            f"{root.url}/{name}",
            operation="CompleteMultipartUpload",
            committer="partitioned",
            partition_by="day",
            options={**writer, "tasks": 2},
        )
    root.sent()
    as_user(monkeypatch, root.options(["recover"]))
    assert cli(["--endpoint", root.counting.endpoint, "recover", f"{root.url}/forward"]) == 0
    assert cli(["--endpoint", root.counting.endpoint, "abort", f"{root.url}/back"]) == 0
    assert root.sent() <= iam.USES["recover"].operations
    visible = [k for k in root.listed() if "/__" not in k and "/_" not in k[len(root.prefix) :]]
    assert len(visible) == len(FRAME) and all("/forward/day=" in k for k in visible)


def test_widgets_and_lifecycle_under_exactly_their_policy(root, monkeypatch):
    """The pending-uploads panel lists and aborts an upload, the _SUCCESS viewer reads a job's
    report (``--for widgets``); ``s3commit lifecycle`` installs its rule (``--for lifecycle``)."""
    from s3commit_sdk.widgets.pending import PendingUploads
    from s3commit_sdk.widgets.report import SuccessReport

    write_committed(FRAME, root.url, committer="magic", options=root.options(["write"]))
    left = f"{root.prefix}/left/part-0"
    root.enforcing.s3().create_multipart_upload(Bucket=root.enforcing.bucket, Key=left)
    root.sent()
    viewer = root.options(["widgets"])
    assert SuccessReport(root.url, viewer).summary["committer"] == "magic"
    panel = PendingUploads(root.url, viewer)
    assert [row.key for row in panel.refresh()] == [left]
    panel.select([left])
    assert [done for _, done in panel.abort_selected()] == [True]
    assert root.sent() <= iam.USES["widgets"].operations
    as_user(monkeypatch, root.options(["lifecycle"]))
    days = ["--abort-incomplete-days", "3"]
    assert cli(["--endpoint", root.counting.endpoint, "lifecycle", root.url, *days]) == 0
    assert root.sent() <= iam.USES["lifecycle"].operations


def as_user(monkeypatch, options: dict) -> None:
    """The CLI takes its keys from the environment: these options' keys."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["access.key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["secret.key"])


# -- one action removed -------------------------------------------------------------------------
def test_without_delete_the_setup_probe_names_the_permission(root, monkeypatch):
    """No ``s3:DeleteObject``: job setup's probe object cannot be deleted. The server refuses
    (RGW: the whole DeleteObjects, 403; moto: each key, as AWS); the error names the permission
    and the probe object it leaves, the only object there; nothing is pending."""
    monkeypatch.setattr(exclusive, "_honoured", set())  # this process probes this server again
    options = root.options(["write"], without="s3:DeleteObject")
    with pytest.raises(MissingPermissionError) as info:
        write_committed(
            FRAME, root.url, committer="partitioned", partition_by="day", options=options
        )
    error = info.value
    assert error.permission == "s3:DeleteObject" and "s3:DeleteObject" in str(error)
    assert f"s3://{root.enforcing.bucket}/{error.key}" in str(error)
    assert root.listed() == [error.key] and root.pending() == []
    assert error.visible == f"{UNCHANGED_VISIBLE}, probe object left: {error.key}"
    root.enforcing.s3().delete_object(Bucket=root.enforcing.bucket, Key=error.key)


def test_without_listing_uploads_the_job_names_the_permission(root, monkeypatch):
    """No ``s3:ListBucketMultipartUploads``: the job completes its files, then its clean-up
    cannot list its leftover uploads. The error names the permission and the bucket, says all
    of the job is visible (so it is, by a listing) and nothing is pending; ``recover`` with the
    permission finishes the job."""
    options = root.options(["write"], without="s3:ListBucketMultipartUploads")
    with pytest.raises(CommitError) as info:
        write_committed(
            FRAME, root.url, committer="partitioned", partition_by="day", options=options
        )
    error, refused = info.value, info.value.__cause__
    assert isinstance(refused, AccessDeniedError) and refused.key is None
    assert refused.permission == "s3:ListBucketMultipartUploads"
    assert refused.bucket == root.enforcing.bucket
    assert "s3:ListBucketMultipartUploads" in str(error) and root.enforcing.bucket in str(error)
    assert error.visible == ALL_VISIBLE and error.remedy == f"s3commit recover {root.url}"
    assert len([k for k in root.listed() if "/day=" in k]) == len(FRAME)
    assert root.pending() == []
    as_user(monkeypatch, root.options(["recover"]))
    assert cli(["--endpoint", root.counting.endpoint, "recover", root.url]) == 0
    assert [k for k in root.listed() if "/__s3commit/" in k] == []


def test_without_abort_the_panel_names_the_permission_and_the_upload(root):
    """No ``s3:AbortMultipartUpload``: the panel's clean-up is refused, naming the permission
    and the upload's key; the upload is still pending (listed), until someone may abort it."""
    from s3commit_sdk.widgets.pending import PendingUploads

    left = f"{root.prefix}/left/part-0"
    s3 = root.enforcing.s3()
    upload = s3.create_multipart_upload(Bucket=root.enforcing.bucket, Key=left)["UploadId"]
    panel = PendingUploads(root.url, root.options(["widgets"], without="s3:AbortMultipartUpload"))
    panel.refresh()
    panel.select([left])
    with pytest.raises(AccessDeniedError) as info:
        panel.abort_selected()
    error = info.value
    assert error.permission == "s3:AbortMultipartUpload" and error.key == left
    assert f"s3://{root.enforcing.bucket}/{left}" in str(error)
    assert root.pending() == [left]
    s3.abort_multipart_upload(Bucket=root.enforcing.bucket, Key=left, UploadId=upload)
