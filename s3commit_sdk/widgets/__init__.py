"""Notebook widgets: live commit progress, pending uploads (with abort), the ``_SUCCESS`` report.

```python
from s3commit_sdk.widgets import CommitProgress, PendingUploads, SuccessReport
```

Each is a plain Python object that displays as an ipywidgets panel (``display(obj)`` or as the
last expression of a cell) and can be driven programmatically. Every text that comes from S3
(keys, job ids, error messages) is HTML-escaped before it reaches an HTML widget.
"""

from .pending import PendingUploads, UploadRow
from .progress import CommitProgress
from .report import SuccessReport

__all__ = ["CommitProgress", "PendingUploads", "SuccessReport", "UploadRow"]
