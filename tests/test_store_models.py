"""Every store of a process shares botocore's parsed service models.

Each task attempt and each job makes its own store; a new client used to parse the S3 service
model and the endpoint rules again (about 0.2 s of CPU each, the largest cost of a small in-process
write, found with py-spy in the peers benchmark).
"""

from __future__ import annotations

import botocore.loaders
from conftest import BUCKET

from s3commit_sdk.options import resolve_options
from s3commit_sdk.store import S3Settings, S3Store


def test_a_new_store_reads_no_model_file(s3_server, monkeypatch):
    settings = S3Settings.resolve(resolve_options(None))
    S3Store(settings).check_bucket(BUCKET)  # the process's first store may read them
    read = []
    original = botocore.loaders.JSONFileLoader.load_file

    def recording(self, file_path, *args, **kwargs):
        read.append(file_path)
        return original(self, file_path, *args, **kwargs)

    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", recording)
    # pools of different sizes: each store builds a client of its own (alike, they would share)
    stores = [S3Store(settings, pool_size=size) for size in (36, 37, 38)]
    for store in stores:
        store.check_bucket(BUCKET)
    assert read == []
    assert len({id(store.client) for store in stores}) == 3
