"""Which Python runs Spark's Python workers, and an error that says so when it lacks the SDK.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (a classic session reads it once, as
``SparkContext.pythonExec``; a local Connect server from its environment), else with ``python3``
from the ``PATH``. A notebook or papermill run started as ``.venv/bin/jupyter lab`` without an
activated virtual environment then has workers that cannot import the SDK, and Spark's error
(``ModuleNotFoundError`` deep in a worker's traceback) does not say why.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator

from ..errors import NOTHING_VISIBLE, S3CommitError, WorkerPythonError, first_line

#: the modules a worker imports to run the SDK's tasks: Spark's own, Arrow, then ours
_NEEDED = ("pyspark", "pyarrow", "s3commit_sdk")
_MISSING = re.compile(r"No module named '?([\w.]+)")
_CHECK_TIMEOUT_S = 60


def session_worker_python(session) -> tuple[str, str]:
    """The interpreter ``session``'s workers run, and where that was decided (for messages):
    a classic session's ``pythonExec``, else this process's ``PYSPARK_PYTHON`` (what a local
    Connect server started here inherits), else ``python3`` from the ``PATH``."""
    context = getattr(session, "_sc", None)
    executable = getattr(context, "pythonExec", None)
    if executable:
        return executable, "the session's PYSPARK_PYTHON (SparkContext.pythonExec)"
    if os.environ.get("PYSPARK_PYTHON"):
        return os.environ["PYSPARK_PYTHON"], "PYSPARK_PYTHON"
    return "python3", "python3 from the PATH, as PYSPARK_PYTHON is not set"


def missing_module(python: str) -> str | None:
    """The first module of :data:`_NEEDED` that ``python`` cannot find (a spec lookup, not an
    import: fast), ``"python"`` when it does not run at all, or None."""
    found = shutil.which(python) or python
    probe = (
        "import importlib.util, sys\n"
        f"missing = [m for m in {_NEEDED!r} if importlib.util.find_spec(m) is None]\n"
        "print(missing[0] if missing else '')\n"
    )
    try:
        child = subprocess.run(
            [found, "-c", probe],
            capture_output=True,
            text=True,
            timeout=_CHECK_TIMEOUT_S,
            check=False,
        )
    except OSError:
        return "python"
    if child.returncode != 0:
        return "python"
    return child.stdout.strip() or None


def worker_python_error(
    python: str, decided_by: str, missing: str, visible: str | None = None
) -> WorkerPythonError:
    """The typed error for workers whose interpreter lacks ``missing``."""
    found = shutil.which(python)
    shown = f"{python} ({found})" if found and found != python else python
    lack = "does not run" if missing == "python" else f"cannot import {missing}"
    return WorkerPythonError(
        f"Spark's Python workers run {shown}, chosen by {decided_by}, and it {lack}: set "
        f"PYSPARK_PYTHON to {sys.executable}, the interpreter running the SDK, before the "
        "Spark session starts (s3commit_sdk.testing.sandbox.local_spark does); on a cluster, "
        "set spark.pyspark.python or install the SDK on every node",
        visible=visible,
    )


def require_sdk_in(python: str, decided_by: str) -> None:
    """Refuse, before a session starts, workers that could not run the SDK."""
    missing = missing_module(python)
    if missing is not None:
        raise worker_python_error(python, decided_by, missing)


@contextlib.contextmanager
def explained_worker_failures(session) -> Iterator[None]:
    """A task that failed because its worker could not import Spark or the SDK is raised as
    :class:`WorkerPythonError` naming the interpreter; other failures pass unchanged."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, S3CommitError):
            raise
        match = _MISSING.search(str(exc)) or _MISSING.search(first_line(exc))
        if match is None:
            raise
        python, decided_by = session_worker_python(session)
        raise worker_python_error(python, decided_by, match[1], NOTHING_VISIBLE) from exc
