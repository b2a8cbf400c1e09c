"""The sandbox's S3 server: moto's, with two changes that make it safe to use from a notebook.

``python -m s3commit_sdk.testing.sandbox_server -H 127.0.0.1 -p PORT`` (what ``S3Sandbox`` starts).

- **Real initiation times.** moto lists every multipart upload as initiated on 2010-11-10, so
  "older than 24h" matches a job still running. Here each upload records when it was created
  and ``ListMultipartUploads`` reports that moment, so age filters mean on the sandbox what
  they mean on S3.
- **It ends with its owner.** The server runs in its own session (a notebook's Kernel >
  Interrupt no longer reaches it) and exits when the process that started it is gone, even if
  that process was killed before it could stop the server (``S3COMMIT_SANDBOX_PARENT``).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timezone

PARENT_ENV = "S3COMMIT_SANDBOX_PARENT"
_INITIATED: dict[str, datetime] = {}


def record_initiation_times() -> None:
    """Patch moto so that listed uploads carry the moment they were created."""
    from moto.core.responses import BaseResponse
    from moto.s3.models import FakeMultipart

    created = FakeMultipart.__init__

    def init(self, *args, **kwargs) -> None:
        created(self, *args, **kwargs)
        _INITIATED[self.id] = datetime.now(timezone.utc)

    serialized = BaseResponse.serialized

    def serialize(self, action_result):
        result = action_result.result
        if isinstance(result, dict) and isinstance(result.get("Uploads"), list):
            for upload in result["Uploads"]:
                moment = _INITIATED.get(upload.get("UploadId", ""))
                if moment is not None:
                    upload["Initiated"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return serialized(self, action_result)

    FakeMultipart.__init__ = init
    BaseResponse.serialized = serialize


def exit_with_parent(parent: int, interval: float = 1.0) -> None:
    """End this process once ``parent`` is gone: it is then re-parented (PIDs get reused, a
    parent's does not come back)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    from moto.server import main as moto_main

    record_initiation_times()
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit():
        exit_with_parent(int(parent))
    moto_main()


if __name__ == "__main__":
    main()
