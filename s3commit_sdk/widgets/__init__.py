"""Notebook widgets: live commit progress, pending uploads (with abort), the ``_SUCCESS`` report,
a live monitor of a stream's committed micro-batches.

```python
from s3commit_sdk.widgets import CommitProgress, PendingUploads, StreamMonitor, SuccessReport
```

Each is a plain Python object that displays as an ipywidgets panel (``display(obj)`` or as the
last expression of a cell) and can be driven programmatically. Every text that comes from S3
(keys, job ids, error messages) is HTML-escaped before it reaches an HTML widget.
"""

from .pending import PendingUploads, UploadRow
from .progress import CommitProgress
from .report import SuccessReport
from .stream import NoStreamError, StreamFigures, StreamMonitor, stream_figures

__all__ = [
    "CommitProgress",
    "NoStreamError",
    "PendingUploads",
    "StreamFigures",
    "StreamMonitor",
    "SuccessReport",
    "UploadRow",
    "stream_figures",
]
