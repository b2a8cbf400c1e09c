"""Notebook 02 as a scheduled job: papermill runs for two days into one shared dataset.

The dataset already holds three days (written here, as earlier runs would have). Each run
replaces exactly the partition of its ``run_date``; every other partition keeps its files,
byte for byte (same keys, same ETags). The notebook's own report of what changed must agree.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill
import pyarrow as pa
import pytest
from conftest import BUCKET, list_keys

from s3commit_sdk import write_committed
from s3commit_sdk.uploads import job_of_key, pending_uploads

pytestmark = pytest.mark.notebook

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "02_daily_partition_update.ipynb"
NOTEBOOK_07 = Path(__file__).parents[1] / "notebooks" / "07_delta_partition_replace.ipynb"
DAYS = ["2026-11-20", "2026-11-21", "2026-11-22"]


def partitions(s3, prefix: str) -> dict[str, dict[str, str]]:
    """Visible files per partition: {"day=...": {key: etag}}."""
    found: dict[str, dict[str, str]] = {}
    for key in list_keys(s3, prefix + "/"):
        relative = key[len(prefix) + 1 :]
        if any(part[:1] in "_." for part in relative.split("/")):
            continue
        etag = s3.head_object(Bucket=BUCKET, Key=key)["ETag"]
        found.setdefault(relative.split("/")[0], {})[key] = etag
    return found


def seed(url: str, **kwargs) -> None:
    """Version 1 of three days, with the schema the notebooks write (Spark's types)."""
    n = 30
    rows = {
        "id": pa.array([i for _ in DAYS for i in range(n)], pa.int64()),
        "user": [f"user-{i % 97}" for _ in DAYS for i in range(n)],
        "amount": pa.array([float(i) for _ in DAYS for i in range(n)], pa.float64()),
        "version": pa.array([1] * (n * len(DAYS)), pa.int32()),
        "day": [day for day in DAYS for _ in range(n)],
    }
    write_committed(pa.table(rows), url, partition_by=["day"], progress=False, **kwargs)


def run(tmp_path: Path, url: str, run_date: str, notebook: Path = NOTEBOOK, **params) -> dict:
    output = tmp_path / f"{notebook.name[:2]}-{run_date}.ipynb"
    papermill.execute_notebook(
        str(notebook),
        str(output),
        parameters={"run_date": run_date, "dest": url, **params},
        kernel_name="python3",
        cwd=str(NOTEBOOK.parent),
        progress_bar=False,
        log_output=False,
        execution_timeout=300,
    )
    return json.loads(output.read_text())


def changes_of(notebook: dict) -> dict[str, list[str]]:
    for line in printed(notebook):
        if line.startswith("CHANGES "):
            return json.loads(line[len("CHANGES ") :])
    raise AssertionError("the notebook printed no CHANGES line")


def widget_models(notebook: dict) -> list[dict]:
    state = notebook["metadata"].get("widgets", {})
    models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return [m["state"] for m in models.values()]


@pytest.mark.timeout(900)
def test_two_daily_runs_replace_only_their_partition(s3, dest, tmp_path):
    assert os.environ.get("AWS_ENDPOINT_URL"), "the kernel reaches moto through the environment"
    seed(dest.url)
    seeded = partitions(s3, dest.prefix)
    assert sorted(seeded) == [f"day={d}" for d in DAYS]

    first = run(tmp_path, dest.url, "2026-11-21", conflict_mode="replace")
    after_first = partitions(s3, dest.prefix)
    assert after_first["day=2026-11-20"] == seeded["day=2026-11-20"]
    assert after_first["day=2026-11-22"] == seeded["day=2026-11-22"]
    assert not set(after_first["day=2026-11-21"]) & set(seeded["day=2026-11-21"])
    first_jobs = {job_of_key(k) for k in after_first["day=2026-11-21"]}
    assert len(first_jobs) == 1
    assert changes_of(first)["replaced"] == ["day=2026-11-21"]
    assert changes_of(first)["untouched"] == ["day=2026-11-20", "day=2026-11-22"]

    second = run(tmp_path, dest.url, "2026-11-22", conflict_mode="replace")
    after_second = partitions(s3, dest.prefix)
    assert after_second["day=2026-11-20"] == seeded["day=2026-11-20"]
    assert after_second["day=2026-11-21"] == after_first["day=2026-11-21"]  # the first run's
    assert not set(after_second["day=2026-11-22"]) & set(seeded["day=2026-11-22"])
    second_jobs = {job_of_key(k) for k in after_second["day=2026-11-22"]}
    assert len(second_jobs) == 1 and second_jobs != first_jobs
    changes = changes_of(second)
    assert changes["replaced"] == ["day=2026-11-22"]
    assert changes["untouched"] == ["day=2026-11-20", "day=2026-11-21"]
    assert changes["added"] == changes["removed"] == changes["appended"] == []

    success = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    assert {success["jobId"]} == second_jobs and success["partitions"] == ["day=2026-11-22"]
    # progress="auto" under papermill logs text lines (no front end draws widgets there): they
    # move past setup, and the last one is the summary with the file count of the commit
    for notebook in (first, second):
        assert not any(m.get("_model_name") == "IntProgressModel" for m in widget_models(notebook))
        lines = [line for line in printed(notebook) if line.startswith("s3commit write to ")]
        assert any(" tasks done" in line and "setup" not in line for line in lines[:-1]), lines
        assert re.search(r": done in [\d.]+ s: committed 2 file\(s\), 2,000 rows", lines[-1])
        assert lines[-1].endswith("nothing is left pending")
        # `result` as a cell's last line displays as the SuccessReport, with a text fallback
        shown = [
            out["data"]
            for cell in notebook["cells"]
            if "".join(cell["source"]).strip() == "result"
            for out in cell["outputs"]
        ]
        assert len(shown) == 1 and "application/vnd.jupyter.widget-view+json" in shown[0]
        assert "".join(shown[0]["text/plain"]).startswith("SuccessReport of " + dest.url)


def printed(notebook: dict) -> list[str]:
    """The lines each cell printed, per stream. The kernel flushes a stream every 0.2 s, so
    on a loaded machine one print can arrive as two outputs: a cell's text on one stream is
    joined before it is split into lines."""
    lines = []
    for cell in notebook["cells"]:
        streams: dict[str, str] = {}
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                streams[out["name"]] = streams.get(out["name"], "") + "".join(out["text"])
        lines += [line for text in streams.values() for line in text.splitlines()]
    return lines


@pytest.mark.timeout(900)
def test_delta_notebook_replaces_a_day_and_travels_back(s3_server, s3, dest, tmp_path):
    """Notebook 07 on an existing Delta table: one new version; the previous one still reads
    the replaced day's old rows."""
    from deltalake import DeltaTable

    seed(dest.url, format="delta")
    notebook = run(tmp_path, dest.url, "2026-11-21", NOTEBOOK_07)
    lines = printed(notebook)
    assert "this run produced version 1 = 1" in lines
    assert "2026-11-21 {'version 2': 2000}" in lines  # the current version
    assert "2026-11-21 {'version 1': 30}" in lines  # time travel to version 0
    assert "0 pending uploads" in lines
    options = {**s3_server.env, "AWS_ALLOW_HTTP": "true"}
    history = DeltaTable(dest.url, storage_options=options).history()
    assert [h["version"] for h in history] == [1, 0]
    success = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    assert success["deltaVersion"] == 1 and success["jobId"] == history[0]["s3commit.jobId"]


def failed_run(tmp_path: Path, url: str, run_date: str, notebook: Path = NOTEBOOK, **params):
    """A run that must fail the way a scheduler sees it: papermill raises (non-zero exit)."""
    with pytest.raises(papermill.PapermillExecutionError) as failed:
        run(tmp_path, url, run_date, notebook, **params)
    return failed.value


@pytest.mark.parametrize(
    ("run_date", "params", "error", "says"),
    [
        ("2026-13-45", {}, "InvalidArgumentError", "run_date='2026-13-45' is not a date"),
        ("2026-11-21", {"conflict_mode": "overwrite"}, "InvalidArgumentError", "use one of"),
        ("2026-11-21", {"dest": "s3://s3commit-no-such-bucket/x"}, "StoreError", "no-such-bucket"),
        ("2026-11-21", {"dest": "s3:/warehouse"}, "InvalidPathError", "s3:/warehouse"),
    ],
)
def test_a_bad_parameter_fails_the_run_before_anything_is_written(
    s3, dest, tmp_path, run_date, params, error, says
):
    params = dict(params)  # shared by both servers' runs
    url = params.pop("dest", dest.url)
    failure = failed_run(tmp_path, url, run_date, **params)
    assert failure.ename == error and says in failure.evalue
    assert list_keys(s3, dest.prefix + "/") == []
    assert pending_uploads(dest.url) == []


@pytest.mark.timeout(600)
def test_a_conflict_fails_the_run_and_changes_nothing(s3, dest, tmp_path):
    seed(dest.url)
    seeded = partitions(s3, dest.prefix)
    failure = failed_run(tmp_path, dest.url, "2026-11-21", conflict_mode="fail")
    assert failure.ename == "ConflictError" and "day=2026-11-21" in failure.evalue
    assert partitions(s3, dest.prefix) == seeded
    assert pending_uploads(dest.url) == []


@pytest.mark.timeout(600)
def test_a_failed_run_ends_with_the_error_not_the_sdks_frames(s3, dest, tmp_path):
    """The papermill command a scheduler runs: the last line it prints is the error (not a
    note about it), and none of the SDK's frames is printed."""
    seed(dest.url)
    command = [sys.executable, "-m", "papermill", str(NOTEBOOK), str(tmp_path / "out.ipynb")]
    command += ["-k", "python3", "--cwd", str(NOTEBOOK.parent), "--no-progress-bar"]
    parameters = {"run_date": "2026-11-21", "dest": dest.url, "conflict_mode": "fail"}
    for name, value in parameters.items():
        command += ["-p", name, value]
    child = subprocess.run(command, capture_output=True, text=True, timeout=540, check=False)
    assert child.returncode != 0
    lines = [line for line in child.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("ConflictError: "), child.stderr[-3000:]
    assert "day=2026-11-21" in lines[-1]
    assert not [line for line in lines if re.search(r"s3commit_sdk[/\\]\w", line)], lines
    assert pending_uploads(dest.url) == []


def test_a_print_the_kernel_flushed_halfway_is_read_as_one_line(tmp_path):
    """What made a CI run fail: one print reached the notebook as two outputs (the kernel's
    0.2 s flush fell between its writes on a loaded machine). Here a flush inside the print
    splits it every time; the helper the tests read lines with joins it again."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            "import sys\n"
            "class FlushedHalfway:\n"
            "    def __str__(self):\n"
            "        sys.stdout.flush()\n"
            "        return '1'\n"
            "print('nothing aborted;', FlushedHalfway(), 'upload(s) pending')"
        )
    )
    source = tmp_path / "split.ipynb"
    nbformat.write(notebook, source)
    output = tmp_path / "split-run.ipynb"
    papermill.execute_notebook(
        str(source), str(output), kernel_name="python3", progress_bar=False, execution_timeout=120
    )
    executed = json.loads(output.read_text())
    assert len(executed["cells"][0]["outputs"]) == 2  # the split this test is about happened
    assert printed(executed) == ["nothing aborted; 1 upload(s) pending"]


NOTEBOOK_04 = NOTEBOOK.with_name("04_pending_uploads.ipynb")


def test_pending_uploads_notebook_on_a_given_bucket_changes_nothing_by_default(s3, dest, tmp_path):
    """Run as its header suggests, against a bucket holding a running job's upload: the
    upload stays pending and no lifecycle rule appears."""
    key = f"{dest.dir}day=1/part-00000-0b1e8f0e-1111-4222-8333-444455556666.c000.snappy.parquet"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    try:
        output = tmp_path / "04.ipynb"
        papermill.execute_notebook(
            str(NOTEBOOK_04),
            str(output),
            parameters={"dest": dest.url},
            kernel_name="python3",
            cwd=str(NOTEBOOK.parent),
            progress_bar=False,
            execution_timeout=300,
        )
        lines = printed(json.loads(output.read_text()))
        assert "action='list': nothing aborted; 1 upload(s) pending" in lines
        assert "lifecycle_days=0: no lifecycle rule installed" in lines
        assert [u.upload_id for u in pending_uploads(dest.url)] == [upload]
        with pytest.raises(s3.exceptions.ClientError, match="NoSuchLifecycleConfiguration"):
            s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)
    finally:
        s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload)
