"""Running Spark tasks tell the driver what they have written so far, over UDP.

Spark merges a Python accumulator into the driver only when its task ends (the Python worker
sends its accumulator updates after the task's last row), so a task's progress while it runs
needs a channel of its own: every half second a task sends one datagram with its cumulative
rows and bytes to a socket the driver opened for the job. A datagram never blocks a task, and
losing one is harmless (the next carries the totals); a token drawn per job keeps other
senders out. Where executors cannot reach the driver this way, progress moves when tasks end.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from dataclasses import dataclass

#: At most one report per task in this many seconds.
REPORT_INTERVAL_S = 0.5


class ReportInbox:
    """The driver's socket for one job's task reports; ``drain()`` from the progress poller."""

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
        self._latest: dict[int, tuple[int, int, int]] = {}  # partition -> attempt, rows, bytes

    @classmethod
    def open(cls, host: str | None, bind_host: str | None = None) -> ReportInbox | None:
        """An inbox on the driver's address as executors know it; None if none can be opened."""
        if not host:
            return None
        try:
            return cls(host, bind_host)
        except OSError:
            return None

    def drain(self) -> dict[int, tuple[int, int]]:
        """Rows and bytes written so far by the newest attempt of each partition heard from."""
        while True:
            try:
                data = self._socket.recv(512)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            self._take(data)
        return {partition: (rows, size) for partition, (_, rows, size) in self._latest.items()}

    def _take(self, data: bytes) -> None:
        fields = data.decode("ascii", "replace").split()
        if len(fields) != 5 or not secrets.compare_digest(fields[0], self.address.token):
            return
        try:
            partition, attempt, rows, size = (int(f) for f in fields[1:])
        except ValueError:
            return
        previous = self._latest.get(partition)
        if previous is None or attempt >= previous[0]:
            self._latest[partition] = (attempt, rows, size)

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
