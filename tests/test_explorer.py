"""The fault-schedule explorer (``s3commit_sdk.testing.explorer``) on each S3 server.

A fixed-seed budget runs in CI (marker ``fault``); ``S3COMMIT_EXPLORE_EXAMPLES=N`` runs N random
schedules instead (``make explore N=...``; pytest's ``--hypothesis-seed`` picks the seed), and
``S3COMMIT_EXPLORE_SUMMARY=path`` appends what ran and what it found, one JSON line per server.
"""

from __future__ import annotations

import os
import threading
import time

import boto3
import pytest
from conftest import BUCKET, list_keys
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from s3commit_sdk.testing.explorer import EXAMPLES_ENV, SUMMARY_ENV, Stats, budget, machine_for
from s3commit_sdk.testing.faultproxy import hold

pytestmark = pytest.mark.fault


def violations(exc: BaseException) -> list[str]:
    """Each failure hypothesis raised, with the (minimal) schedule in its notes."""
    group = getattr(exc, "exceptions", None)  # an exception group: several distinct failures
    if isinstance(group, tuple):
        return [text for sub in group for text in violations(sub)]
    return ["\n".join([f"{type(exc).__name__}: {exc}", *getattr(exc, "__notes__", [])])]


# the fixed-seed budget takes minutes; a longer run as long as it takes
@pytest.mark.timeout(0 if os.environ.get(EXAMPLES_ENV) else 900)
@pytest.mark.long
def test_fault_schedules_keep_the_correctness_properties(s3_server, running_proxy):
    stats = Stats(server=s3_server.kind)
    machine = machine_for(s3_server, running_proxy, BUCKET, stats)
    report: list[str] = []
    started = time.monotonic()
    try:
        with with_reporter(lambda text: report.append(str(text))):
            run_state_machine_as_test(machine, settings=budget())
    except BaseException as exc:
        stats.violations += [*report, *violations(exc)]
        raise
    finally:
        running_proxy.reset()
        stats.seconds = round(time.monotonic() - started, 1)
        stats.write(os.environ.get(SUMMARY_ENV))
        print(f"\nexplorer on {stats.server}: {stats.__dict__}")


def test_a_held_request_lands_only_when_released(s3_server, s3, proxy, dest):
    """The proxy's ``hold`` rule, which the explorer's overlapping commits and readers rely on:
    the request waits, unforwarded, until ``release``."""
    proxy.set_rules([hold("PutObject", occurrences=[1])])
    env = s3_server.env
    client = boto3.client(
        "s3",
        endpoint_url=proxy.endpoint,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_REGION"],
    )
    key = dest.dir + "held"
    writer = threading.Thread(target=client.put_object, kwargs={"Bucket": BUCKET, "Key": key})
    writer.start()
    while proxy.counts.get("PutObject", 0) < 1:
        time.sleep(0.01)
    assert writer.is_alive() and list_keys(s3, key) == []
    proxy.release()
    writer.join(30)
    assert list_keys(s3, key) == [key]
    s3.delete_object(Bucket=BUCKET, Key=key)
