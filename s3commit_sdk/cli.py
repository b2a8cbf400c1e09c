"""``s3commit``: find and clean up pending uploads, read ``_SUCCESS``, install lifecycle rules,
list the streams writing into a destination and expire their old batch records.

The commands users of ``hadoop s3guard uploads`` know, with two differences: a PATH always
means a directory (``s3://b/out/ds1`` never reaches ``s3://b/out/ds10``), and uploads can be
chosen by the job UUID our keys carry. Exit codes: 0 ok, 1 failed (message on stderr), 2 bad
usage or arguments, 46 ``uploads expect`` found another count (as Hadoop's ``-expect``).

Everything printed passes through :func:`~s3commit_sdk.textformat.printable`: keys, job ids and
``_SUCCESS`` fields come from the store, where anyone with write access can put terminal escape
sequences in them; they are shown escaped (``\u001b``), never acted on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TextIO, TypeVar

import botocore.exceptions

from . import iam, layout, recovery
from . import uploads as up
from .errors import InvalidArgumentError, S3CommitError, StoreError
from .options import parse_int, resolve_options
from .paths import parse_s3_url
from .redaction import RedactingFilter, redacted_logs
from .store import S3Settings
from .streaming import ledger
from .streaming.batch import StreamBatch
from .textformat import format_bytes, printable, printable_values

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_EXPECT_MISMATCH = 46

T = TypeVar("T")


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse ``type``: what it refuses is a usage error (exit 2)."""

    def read(text: str) -> T:
        try:
            return parse(text)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return read


def _whole_number(name: str, minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` reading a whole number of at least ``minimum`` (as options do)."""
    return _argument(lambda text: parse_int(name, text, minimum))


def _option(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``NAME=@FILE``: the file's text, without its final line break)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    if value.startswith("@"):
        try:
            with open(value[1:], encoding="utf-8") as file:
                value = file.read().rstrip("\r\n")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"option {name!r}: {exc}") from exc
    return name.strip(), value


def _stream_id(text: str) -> str:
    """A stream id as batch records are kept under (refused as ``StreamBatch`` refuses it)."""
    return StreamBatch(text, 0).query_id


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; ``--endpoint`` is accepted before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--endpoint",
        default=argparse.SUPPRESS,
        metavar="URL",
        help="S3 endpoint URL (default: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else AWS)",
    )
    common.add_argument(
        "-o",
        "--option",
        action="append",
        type=_option,
        default=argparse.SUPPRESS,
        metavar="NAME=VALUE",
        help="an option as write_committed takes it (repeatable), such as the job's "
        "encryption.algorithm and encryption.key; VALUE @FILE reads it from FILE, so a key "
        "stays out of the process list",
    )
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument(
        "--older-than",
        type=_argument(up.parse_duration),
        metavar="AGE",
        help="only uploads initiated at least AGE ago, e.g. 24h, 90m, 1d12h",
    )
    filters.add_argument(
        "--job",
        type=_argument(up.job_uuid),
        metavar="UUID",
        help="only uploads of this job (its full UUID)",
    )

    parser = argparse.ArgumentParser(
        prog="s3commit",
        description="Inspect and clean up what zero-rename S3 committers leave behind.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    uploads = commands.add_parser("uploads", help="pending multipart uploads under a directory")
    actions = uploads.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common, filters], help="list pending uploads under PATH"
    )
    listing.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a directory)")
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    listing.set_defaults(handler=_uploads_list)

    abort = actions.add_parser(
        "abort", parents=[common, filters], help="abort pending uploads under PATH"
    )
    abort.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a directory)")
    abort.add_argument("--force", action="store_true", help="do not ask for confirmation")
    abort.set_defaults(handler=_uploads_abort)

    expect = actions.add_parser(
        "expect",
        parents=[common, filters],
        help="exit 0 iff exactly N uploads are pending under PATH, else 46",
    )
    expect.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a directory)")
    expect.add_argument(
        "count", metavar="N", type=_whole_number("N", 0), help="expected number of uploads"
    )
    expect.set_defaults(handler=_uploads_expect)

    success = commands.add_parser(
        "success", parents=[common], help="report on the _SUCCESS file under PATH"
    )
    success.add_argument("path", metavar="PATH", help="s3://bucket/prefix of a committed job")
    success.add_argument("--json", action="store_true", help="print the document as JSON")
    success.set_defaults(handler=_success)

    lifecycle = commands.add_parser(
        "lifecycle",
        parents=[common],
        help="install a bucket rule aborting uploads under PATH after N days",
    )
    lifecycle.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a directory)")
    lifecycle.add_argument(
        "--abort-incomplete-days",
        type=_whole_number("--abort-incomplete-days", 1),
        required=True,
        metavar="N",
        dest="days",
    )
    lifecycle.add_argument(
        "--longest-job",
        type=_argument(up.parse_duration),
        metavar="AGE",
        help="warn if N days is not longer than this, e.g. 36h",
    )
    lifecycle.set_defaults(handler=_lifecycle)

    recover = commands.add_parser(
        "recover", parents=[common], help="finish a job commit that crashed at PATH (roll forward)"
    )
    recover.add_argument("path", metavar="PATH", help="s3://bucket/prefix of the job")
    recover.set_defaults(handler=_recover)

    rollback = commands.add_parser(
        "abort", parents=[common], help="undo a job commit that crashed at PATH (roll back)"
    )
    rollback.add_argument("path", metavar="PATH", help="s3://bucket/prefix of the job")
    rollback.add_argument(
        "--dry-run", action="store_true", help="list what abort would do; change nothing"
    )
    visible = rollback.add_mutually_exclusive_group()
    visible.add_argument(
        "--delete-visible",
        dest="visible",
        action="store_const",
        const="delete",
        help="without a usable journal: also delete the visible objects named with the job "
        "UUID (listed first)",
    )
    visible.add_argument(
        "--keep-visible",
        dest="visible",
        action="store_const",
        const="keep",
        help="without a usable journal: keep those objects, clean up the rest",
    )
    rollback.set_defaults(handler=_abort)

    iam_policy = commands.add_parser(
        "iam-policy",
        parents=[common],
        help="print the least-privilege IAM policy for PATH (sends no request)",
    )
    iam_policy.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a directory)")
    iam_policy.add_argument(
        "--for",
        dest="uses",
        nargs="+",
        action="extend",
        choices=list(iam.USES),
        metavar="USE",
        help=f"only what these uses need ({', '.join(iam.USES)}; default: all of them)",
    )
    iam_policy.add_argument(
        "--kms-key", metavar="ARN", help="the SSE-KMS key's ARN: adds the KMS actions on it"
    )
    iam_policy.set_defaults(handler=_iam_policy)

    streams = commands.add_parser(
        "streams", help="the streams writing micro-batches into a destination, and their records"
    )
    stream_actions = streams.add_subparsers(dest="action", required=True, metavar="ACTION")
    stream_list = stream_actions.add_parser(
        "list", parents=[common], help="list the streams with batch records at PATH"
    )
    stream_list.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a destination)")
    stream_list.add_argument("--json", action="store_true", help="print a JSON list")
    stream_list.set_defaults(handler=_streams_list)

    stream_show = stream_actions.add_parser(
        "show", parents=[common], help="list the kept batch records of STREAM at PATH"
    )
    stream_show.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a destination)")
    stream_show.add_argument(
        "stream", metavar="STREAM", type=_argument(_stream_id), help="the stream's id"
    )
    stream_show.add_argument("--json", action="store_true", help="print a JSON list")
    stream_show.set_defaults(handler=_streams_show)

    stream_expire = stream_actions.add_parser(
        "expire",
        parents=[common],
        help="delete the records of all but the newest N batches of STREAM (not their data)",
    )
    stream_expire.add_argument("path", metavar="PATH", help="s3://bucket/prefix (a destination)")
    stream_expire.add_argument(
        "stream", metavar="STREAM", type=_argument(_stream_id), help="the stream's id"
    )
    stream_expire.add_argument(
        "--keep",
        type=_whole_number("--keep", 1),
        default=ledger.DEFAULT_KEEP,
        metavar="N",
        help="keep the records of the newest N batches (at least 1: a replay of the newest "
        f"batch needs its record; default {ledger.DEFAULT_KEEP}, as many batches as Spark "
        "keeps replayable)",
    )
    stream_expire.set_defaults(handler=_streams_expire)
    return parser


def main(argv: list[str] | None = None, *, now: datetime | None = None) -> int:
    """Run one command; returns the exit code instead of raising ``SystemExit``.

    ``now`` fixes the clock that ``--older-than`` measures ages against (for tests).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    options = dict(getattr(args, "option", ()))
    if getattr(args, "endpoint", None):
        options["endpoint"] = args.endpoint
    redacting = RedactingFilter(())  # headers only, until the secrets are known
    out, err = PrintableStream(sys.stdout), PrintableStream(sys.stderr)
    try:
        settings = S3Settings.resolve(resolve_options(options))
        secrets = (settings.secret_key, settings.session_token, *settings.requests.secrets())
        with redacted_logs(*secrets) as redacting:
            return args.handler(args, options, now, out)
    except InvalidArgumentError as exc:
        print(redacting.redact(f"s3commit: error: {exc}"), file=err)
        return EXIT_USAGE
    except S3CommitError as exc:
        print(redacting.redact(f"s3commit: error: {exc}"), file=err)
        if exc.remedy:  # the one line a script or a person acts on
            print(redacting.redact(f"s3commit: next: {exc.remedy}"), file=err)
        return EXIT_FAILED
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        print(redacting.redact(f"s3commit: error: S3 request failed: {exc}"), file=err)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("s3commit: interrupted", file=sys.stderr)
        return 130


class PrintableStream:
    """A text stream writing through :func:`printable`: the lines are ours, every other
    control character is shown escaped."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(printable(text, keep="\n"))

    def flush(self) -> None:
        self.stream.flush()


def _lines(lines: list[str]) -> str:
    """Lines of a report as one text: a line break inside one (a key's) is shown escaped."""
    return "\n".join(printable(line) for line in lines)


# -- commands ----------------------------------------------------------------------------------
def _find(args: argparse.Namespace, options: dict[str, Any], now: datetime | None):
    return up.find_uploads(
        args.path, older_than=args.older_than, job=args.job, now=now, options=options
    )


def _where(args: argparse.Namespace) -> str:
    """``s3://bucket/prefix/`` plus the filters in force, for messages."""
    location = parse_s3_url(args.path)
    text = f"s3://{location.bucket}/{location.dir_prefix}"
    if args.job:
        text += f" of job {args.job}"
    if args.older_than is not None:
        text += f" older than {up.format_duration(args.older_than)}"
    return text


def _table(found, now: datetime | None) -> list[str]:
    rows = [("KEY", "UPLOAD ID", "JOB", "INITIATED", "AGE")]
    for upload in found:
        initiated = up.as_utc(upload.initiated)
        rows.append(
            (
                printable(upload.key),
                printable(upload.upload_id),
                up.job_of_key(upload.key) or "-",
                initiated.strftime("%Y-%m-%d %H:%M:%S UTC") if initiated else "?",
                up.format_duration(up.upload_age(upload, now)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]))
    return lines


def _uploads_list(args, options, now, out: TextIO) -> int:
    found = _find(args, options, now)
    if args.json:
        bucket = parse_s3_url(args.path).bucket
        print(json.dumps([up.describe_upload(u, bucket, now) for u in found], indent=2), file=out)
        return EXIT_OK
    if found:
        print("\n".join(_table(found, now)), file=out)
    print(f"{len(found)} pending upload(s) under {_where(args)}", file=out)
    return EXIT_OK


def _confirm(question: str, out: TextIO) -> str | None:
    """The answer read from stdin, or None when there is nobody to ask (no stdin, EOF)."""
    stdin = sys.stdin
    if stdin is None or stdin.closed:
        return None
    print(question, end="", file=out, flush=True)
    try:
        line = stdin.readline()
    except (OSError, ValueError):
        return None
    if not line:
        print(file=out)  # end the prompt's line
        return None
    return line.strip().lower()


def _uploads_abort(args, options, now, out: TextIO) -> int:
    found = _find(args, options, now)
    where = _where(args)
    if not found:
        print(f"no pending uploads under {where}; nothing to abort", file=out)
        return EXIT_OK
    print("\n".join(_table(found, now)), file=out)
    if not args.force:
        answer = _confirm(f"Abort these {len(found)} pending upload(s)? (yes/no) ", out)
        if answer is None:
            print(
                f"s3commit: refusing to abort {len(found)} pending upload(s) without "
                "confirmation: nothing answered on stdin. Rerun with --force to abort without "
                "asking.",
                file=sys.stderr,
            )
            return EXIT_FAILED
        if answer not in ("yes", "y"):
            print("not confirmed; nothing aborted", file=out)
            return EXIT_FAILED
    results = up.abort_uploads(args.path, found, options=options)
    for upload, aborted in results:
        state = "aborted" if aborted else "already gone"
        print(printable(f"{state}: {upload.key} (upload {upload.upload_id})"), file=out)
    count = sum(1 for _, aborted in results if aborted)
    print(f"aborted {count} pending upload(s) under {where}", file=out)
    return EXIT_OK


def _uploads_expect(args, options, now, out: TextIO) -> int:
    found = _find(args, options, now)
    if len(found) == args.count:
        print(f"{len(found)} pending upload(s) under {_where(args)}, as expected", file=out)
        return EXIT_OK
    print(
        f"expected {args.count} pending upload(s) under {_where(args)}, found {len(found)}",
        file=out,
    )
    return EXIT_EXPECT_MISMATCH


def _success(args, options, now, out: TextIO) -> int:
    location = parse_s3_url(args.path)
    doc = up.read_success(args.path, options)
    if args.json:
        print(doc.to_json() if doc else json.dumps(None), file=out)
        return EXIT_OK
    shown = printable_values(doc.to_dict()) if doc else None  # no line breaks in its fields
    print(printable(f"_SUCCESS of {location.url()}"), file=out)
    print(up.format_success(shown), file=out)
    if shown and "deltaVersion" in shown:
        version, removed = shown["deltaVersion"], shown.get("deltaRemovedFiles", 0)
        print(f"Delta table   version {version}, {removed} files removed", file=out)
    if shown and "icebergSnapshotId" in shown:
        snapshot, removed = shown["icebergSnapshotId"], shown.get("icebergRemovedFiles", 0)
        table = shown.get("icebergTable", "")
        print(f"Iceberg table {table}, snapshot {snapshot}, {removed} files removed", file=out)
    return EXIT_OK


def _lifecycle(args, options, now, out: TextIO) -> int:
    location = parse_s3_url(args.path)
    rule, kept = up.install_abort_rule(args.path, args.days, options=options)
    scope = f"s3://{location.bucket}/{location.dir_prefix}"
    print(
        f"lifecycle rule {rule['ID']!r} installed on bucket {location.bucket!r}: S3 aborts "
        f"multipart uploads under {scope} {args.days} day(s) after they start "
        f"({kept} other rule(s) kept)",
        file=out,
    )
    warning = up.lifecycle_warning(args.days, args.longest_job)
    if warning:
        print(f"s3commit: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _recover(args, options, now, out: TextIO) -> int:
    print(_lines(recovery.recover(args.path, options).lines()), file=out)
    return EXIT_OK


def _interactive() -> bool:
    stdin = sys.stdin
    try:
        return stdin is not None and not stdin.closed and stdin.isatty()
    except (OSError, ValueError):
        return False


def _abort(args, options, now, out: TextIO) -> int:
    """Delete visible objects that no journal vouches for only when told to, listing them first.

    The plan is printed for ``--dry-run`` and whenever such objects exist.
    """
    plan = recovery.plan_abort(args.path, options)
    if args.dry_run or plan.needs_choice:
        print(_lines(plan.lines()), file=out)
    if args.dry_run:
        print("dry run: nothing changed", file=out)
        return EXIT_OK
    if plan.needs_choice and args.visible == "delete" and _interactive():
        answer = _confirm(f"Delete these {len(plan.visible)} visible object(s)? (yes/no) ", out)
        if answer not in ("yes", "y"):
            print("not confirmed; nothing changed", file=out)
            return EXIT_FAILED
    print(_lines(plan.carry_out(args.visible).lines()), file=out)
    return EXIT_OK


def _iam_policy(args, options, now, out: TextIO) -> int:
    print(iam.policy_json(args.path, args.uses, args.kms_key), file=out)
    return EXIT_OK


# -- streams -----------------------------------------------------------------------------------
def _directory(path: str) -> str:
    """``s3://bucket/prefix/``: the destination, for messages."""
    location = parse_s3_url(path)
    return f"s3://{location.bucket}/{location.dir_prefix}"


def _utc(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def _aligned(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    """Columns two spaces apart; those in ``right`` (numbers) aligned right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _id_ranges(ids: list[int]) -> str:
    """``0..3, 7, 9..10``: batch ids (ascending) as runs."""
    runs: list[list[int]] = []
    for batch_id in ids:
        if runs and batch_id == runs[-1][1] + 1:
            runs[-1][1] = batch_id
        else:
            runs.append([batch_id, batch_id])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


def _no_records(args: argparse.Namespace) -> StoreError:
    where = _directory(args.path)
    return StoreError(
        f"no batch records of stream {args.stream!r} under {where}: no batch of it has "
        "committed there, or its records were deleted",
        remedy=f"s3commit streams list {where}",  # the streams that have records there
    )


def _record_count(path: str, stream: str, options: dict[str, Any]) -> int:
    """How many batch records ``stream`` has at ``path``: one listing, no record read."""
    location = parse_s3_url(path)
    prefix = layout.streams_prefix(location, stream)
    listed = up.open_uploads_store(options).list_objects(location.bucket, prefix)
    return sum(1 for o in listed if o.key.endswith(".json") and "/batch-" in o.key)


def _streams_list(args, options, now, out: TextIO) -> int:
    found = ledger.list_streams(args.path, options)
    if args.json:
        print(ledger.records_json(found), file=out)
        return EXIT_OK
    header = ("STREAM", "BATCHES", "FIRST..LAST", "ROWS", "FILES", "BYTES", "LAST COMMIT")
    rows = [(*header, "LAST MS", "MEAN MS")]
    for s in found:
        rows.append(
            (
                printable(s.stream),
                str(s.batches),
                f"{s.first_batch}..{s.last_batch}",
                str(s.rows),
                str(s.files),
                format_bytes(s.bytes),
                _utc(s.last_committed_ms),
                _ms(s.last_commit_s),
                _ms(s.mean_commit_s),
            )
        )
    if found:
        print(_lines(_aligned(rows, right={1, 3, 4, 5, 7, 8})), file=out)
    print(f"{len(found)} stream(s) with batch records under {_directory(args.path)}", file=out)
    return EXIT_OK


def _streams_show(args, options, now, out: TextIO) -> int:
    records = ledger.stream_batches(args.path, args.stream, options)
    if not records:
        raise _no_records(args)
    if args.json:
        print(ledger.records_json(records), file=out)
        return EXIT_OK
    rows = [("BATCH", "JOB", "COMMITTED", "ROWS", "FILES", "BYTES", "COMMIT MS")]
    for r in records:
        rows.append(
            (
                str(r.batch_id),
                printable(r.job_id),
                _utc(r.committed_ms),
                str(r.rows),
                str(r.files),
                format_bytes(r.bytes),
                _ms(r.commit_s),
            )
        )
    print(_lines(_aligned(rows, right={0, 3, 4, 5, 6})), file=out)
    total = ledger.StreamSummary.of(args.stream, records)
    print(
        f"{total.batches} batch record(s) of stream {args.stream!r} under "
        f"{_directory(args.path)}: {total.rows} rows, {total.files} files, "
        f"{format_bytes(total.bytes)}; commit {_ms(total.mean_commit_s)} ms on average",
        file=out,
    )
    return EXIT_OK


def _streams_expire(args, options, now, out: TextIO) -> int:
    expired = ledger.expire_batches(args.path, args.stream, args.keep, options)
    where = _directory(args.path)
    if expired:
        print(
            f"deleted the records of batch(es) {_id_ranges(expired)} of stream "
            f"{args.stream!r} under {where}, keeping the newest {args.keep}",
            file=out,
        )
        print("the data files are untouched: only batch records were deleted", file=out)
        return EXIT_OK
    kept = _record_count(args.path, args.stream, options)
    if not kept:
        raise _no_records(args)
    print(
        f"nothing to expire: stream {args.stream!r} has {kept} batch record(s) under {where}, "
        f"no more than --keep {args.keep}",
        file=out,
    )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
