"""Running Spark tasks tell the driver what they have written so far, over UDP.

Spark merges a Python accumulator into the driver only when its task ends (the Python worker
sends its accumulator updates after the task's last row), so a task's progress while it runs
needs a channel of its own: every half second a task sends one datagram with its cumulative
rows and bytes to a socket the driver opened for the job. A datagram never blocks a task, and
losing one is harmless (the next carries the totals); a token drawn per job keeps other
senders out. Any local process can send to the port, so every datagram is parsed as hostile
input: one that is not a well-formed report of this job is dropped, and none can fail or
alter a write. Where executors cannot reach the driver this way, progress moves when tasks end.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import socket
import time
from dataclasses import dataclass

#: At most one report per task in this many seconds.
REPORT_INTERVAL_S = 0.5


#: A report is ``token partition attempt rows bytes``: 32 hex digits and four numbers of at
#: most 19 digits, so anything longer is not one (and is not read past this many bytes).
MAX_DATAGRAM = 128
#: Reports read per drain: a flood of datagrams cannot keep the poller from the rest of its job.
MAX_DATAGRAMS_PER_DRAIN = 4096
#: Spark's partition ids and attempt numbers are Java ints.
MAX_TASK_ID = 2**31 - 1
#: No task writes more rows or bytes than this (a pebibyte); larger numbers are not reports.
MAX_COUNT = 2**50
_NUMBER = re.compile(rb"[0-9]{1,19}")


@dataclass(frozen=True)
class TaskReport:
    """One running attempt's totals so far, as a datagram carried them."""

    partition: int
    attempt: int
    rows: int
    bytes: int


def parse_report(data: bytes, token: bytes, tasks: int | None = None) -> TaskReport | None:
    """The report ``data`` holds, or None if it is not a well-formed report of this job.

    Any local process can send to the inbox's port, so nothing is trusted: the size, the
    token (compared as bytes, in constant time), every number (ASCII digits only, bounded),
    and the partition (one of the job's ``tasks`` when known).
    """
    if len(data) > MAX_DATAGRAM:
        return None
    fields = data.split(b" ")
    if len(fields) != 5 or not secrets.compare_digest(fields[0], token):
        return None
    if not all(_NUMBER.fullmatch(field) for field in fields[1:]):
        return None
    partition, attempt, rows, size = (int(field) for field in fields[1:])
    limit = MAX_TASK_ID if tasks is None else tasks - 1
    if partition > limit or attempt > MAX_TASK_ID or rows > MAX_COUNT or size > MAX_COUNT:
        return None
    return TaskReport(partition, attempt, rows, size)


class ReportInbox:
    """The driver's socket for one job's task reports; ``drain()`` from the progress poller.

    Hostile input is dropped, never raised: a datagram that is not a report of this job
    (:func:`parse_report`) is ignored, and what a partition reports never goes backwards
    within an attempt (datagrams may arrive out of order) nor comes from an older attempt.
    """

    def __init__(self, host: str, bind_host: str | None = None) -> None:
        family, kind, proto, _, address = socket.getaddrinfo(
            bind_host or host, 0, type=socket.SOCK_DGRAM
        )[0]
        self._socket = socket.socket(family, kind, proto)
        try:
            self._socket.bind(address)
            self._socket.setblocking(False)
        except OSError:
            self._socket.close()
            raise
        self.address = TaskReportAddress(host, self._socket.getsockname()[1], secrets.token_hex(16))
        self._token = self.address.token.encode("ascii")
        self._latest: dict[int, TaskReport] = {}

    @classmethod
    def open(cls, host: str | None, bind_host: str | None = None) -> ReportInbox | None:
        """An inbox on the driver's address as executors know it; None if none can be opened."""
        if not host:
            return None
        try:
            return cls(host, bind_host)
        except OSError:
            return None

    def drain(self, tasks: int | None = None) -> dict[int, tuple[int, int]]:
        """Rows and bytes written so far by the newest attempt of each partition heard from.

        ``tasks``: how many tasks the job has, when known; reports of other partitions are
        dropped. Reads at most :data:`MAX_DATAGRAMS_PER_DRAIN` datagrams per call.
        """
        for _ in range(MAX_DATAGRAMS_PER_DRAIN):
            try:
                data = self._socket.recv(MAX_DATAGRAM + 1)  # one byte more: too long is seen
            except OSError:  # nothing waiting (BlockingIOError), or the socket is closed
                break
            report = parse_report(data, self._token, tasks)
            if report is not None:
                self._take(report)
        return {
            partition: (report.rows, report.bytes)
            for partition, report in self._latest.items()
            if tasks is None or partition < tasks
        }

    def _take(self, report: TaskReport) -> None:
        previous = self._latest.get(report.partition)
        if previous is None or report.attempt > previous.attempt:
            self._latest[report.partition] = report
        elif report.attempt == previous.attempt:
            self._latest[report.partition] = TaskReport(
                report.partition,
                report.attempt,
                max(report.rows, previous.rows),
                max(report.bytes, previous.bytes),
            )

    def close(self) -> None:
        self._socket.close()


@dataclass(frozen=True)
class TaskReportAddress:
    """Where tasks send their reports: plain data, pickled into every task's closure."""

    host: str
    port: int
    token: str


class ReportSender:
    """One task attempt's side: its :class:`~s3commit_sdk.attempt_handle.AttemptHandle`'s
    reports, sent at most every interval (the latest totals; the others are dropped)."""

    def __init__(self, address: TaskReportAddress | None, partition: int, attempt: int) -> None:
        self.address, self.partition, self.attempt = address, partition, attempt
        self._sent = 0.0
        self._socket: socket.socket | None = None

    def __call__(self, rows: int, written: int) -> None:
        now = time.monotonic()
        if self.address is None or now - self._sent < REPORT_INTERVAL_S:
            return
        self._sent = now
        message = f"{self.address.token} {self.partition} {self.attempt} {rows} {written}"
        with contextlib.suppress(OSError):  # progress must never fail a task
            if self._socket is None:
                family = socket.getaddrinfo(self.address.host, None, type=socket.SOCK_DGRAM)[0][0]
                self._socket = socket.socket(family, socket.SOCK_DGRAM)
            self._socket.sendto(message.encode("ascii"), (self.address.host, self.address.port))

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
