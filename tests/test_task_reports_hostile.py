"""The progress channel takes hostile input: no datagram can fail, stall or alter a write.

Any local process can send to the driver's report port. The receiver is tested for real (a UDP
socket, datagrams sent to it): a fuzz of arbitrary datagrams mixed with real reports, the cases
the probe found (``b'\\xff 1 1 1 1'`` raised in ``compare_digest`` and failed a Spark write),
and a Spark write during which another socket floods the port.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from s3commit_sdk import write_committed
from s3commit_sdk.engines.task_reports import (
    MAX_COUNT,
    MAX_DATAGRAM,
    MAX_DATAGRAMS_PER_DRAIN,
    ReportInbox,
)


def open_inbox() -> ReportInbox:
    inbox = ReportInbox.open("127.0.0.1")
    assert inbox is not None
    return inbox


def sender() -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def send_all(inbox: ReportInbox, datagrams: list[bytes]) -> None:
    """Loopback delivers a datagram into the receiver's queue before ``sendto`` returns."""
    with sender() as out:
        for data in datagrams:
            out.sendto(data, ("127.0.0.1", inbox.address.port))


def report(inbox: ReportInbox, partition: int, attempt: int, rows: int, size: int) -> bytes:
    return f"{inbox.address.token} {partition} {attempt} {rows} {size}".encode("ascii")


def test_the_probes_datagram_and_other_malformed_ones_are_dropped():
    inbox = open_inbox()
    token = inbox.address.token
    wrong = ("0" if token[0] != "0" else "1") + token[1:]
    try:
        send_all(
            inbox,
            [
                b"\xff 1 1 1 1",  # the probe's: compare_digest raised on the non-ASCII text
                f"{token} \u0661 0 5 5".encode(),  # an Arabic-Indic digit: int() reads it
                f"{token} +1 0 5 5".encode(),
                f"{token} 1_0 0 5 5".encode(),
                f"{token} -1 0 5 5".encode(),
                f"{token}  1 0 5 5".encode(),  # two spaces: an empty field
                f"{token} 1 0 5 5 ".encode(),
                f"{token} 1 0 {MAX_COUNT + 1} 5".encode(),
                f"{token} {2**31} 0 5 5".encode(),
                f"{token} 1 0 99999999999999999999 5".encode(),  # 20 digits
                f"{wrong} 1 0 5 5".encode(),
                f"{token[:-1]} 1 0 5 5".encode(),
                f"{token}x 1 0 5 5".encode(),
                f"{token} 1 0 5 5".encode() + b" " * MAX_DATAGRAM,  # too long
                b"",
                b"\x00" * 512,
            ],
        )
        assert inbox.drain() == {}
        send_all(inbox, [report(inbox, 1, 0, 5, 50)])
        assert inbox.drain() == {1: (5, 50)}
    finally:
        inbox.close()


def test_reports_of_partitions_outside_the_job_are_dropped():
    inbox = open_inbox()
    try:
        send_all(inbox, [report(inbox, 0, 0, 1, 10), report(inbox, 4, 0, 2, 20)])
        assert inbox.drain(tasks=4) == {0: (1, 10)}
    finally:
        inbox.close()


def test_a_partitions_totals_never_go_backwards_within_an_attempt():
    inbox = open_inbox()
    try:
        send_all(inbox, [report(inbox, 0, 0, 100, 1000), report(inbox, 0, 0, 40, 400)])
        assert inbox.drain() == {0: (100, 1000)}  # the older datagram arrived late
        send_all(inbox, [report(inbox, 0, 1, 10, 100), report(inbox, 0, 0, 500, 5000)])
        assert inbox.drain() == {0: (10, 100)}  # a retry starts over; the old attempt is gone
    finally:
        inbox.close()


def test_a_flood_never_keeps_drain_from_returning():
    inbox = open_inbox()
    try:
        flood = [b"garbage %d" % i for i in range(MAX_DATAGRAMS_PER_DRAIN + 500)]
        with sender() as out:
            out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            for data in flood:
                out.sendto(data, ("127.0.0.1", inbox.address.port))
        started = time.monotonic()
        assert inbox.drain() == {}
        assert time.monotonic() - started < 5
    finally:
        inbox.close()


VALID = st.tuples(
    st.integers(0, 7), st.integers(0, 3), st.integers(0, MAX_COUNT), st.integers(0, MAX_COUNT)
)
NOISE = st.one_of(
    st.binary(max_size=2 * MAX_DATAGRAM),
    st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.lists(st.sampled_from([b"1", b"-1", b"\xff", b"", b"9" * 25, b"0x1", b"\xd9\xa1"])).map(
        b" ".join
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(VALID.map(lambda r: ("report", r)), NOISE.map(lambda n: ("noise", n)))))
def test_any_mix_of_noise_and_reports_reads_as_the_reports_alone(sequence):
    """The receiver never raises, and noise changes nothing: what it reports is what the valid
    reports alone give (the newest attempt of each partition, its highest totals)."""
    inbox = open_inbox()  # its token is drawn after the noise: no noise carries it
    expected: dict[int, tuple[int, int, int]] = {}
    datagrams = []
    for kind, value in sequence:
        if kind == "noise":
            datagrams.append(value)
            continue
        partition, attempt, rows, size = value
        datagrams.append(report(inbox, partition, attempt, rows, size))
        seen = expected.get(partition)
        if seen is None or attempt > seen[0]:
            expected[partition] = (attempt, rows, size)
        elif attempt == seen[0]:
            expected[partition] = (attempt, max(rows, seen[1]), max(size, seen[2]))
    try:
        send_all(inbox, datagrams)
        assert inbox.drain() == {p: (r, s) for p, (_, r, s) in expected.items()}
    finally:
        inbox.close()


# -- a Spark write under a flood -----------------------------------------------------------------
def udp_ports_of_this_process() -> set[int]:
    """The local ports of this process's UDP sockets (Linux: /proc), IPv4 and IPv6."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/self/net/udp", "/proc/self/net/udp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class Flood(threading.Thread):
    """Finds the report port the driver opens for the write (the one UDP socket this process
    gains) and sends it garbage and wrong-token reports until stopped."""

    def __init__(self) -> None:
        super().__init__(name="flood", daemon=True)
        self.out = sender()
        self.before = udp_ports_of_this_process()
        self.port: int | None = None
        self.sent = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while self.port is None and not self.halt.wait(0.01):
            new = udp_ports_of_this_process() - self.before
            self.port = min(new) if new else None
        noise = [
            b"\xff 1 1 1 1",
            b"0" * 32 + b" 0 0 999999999 999999999",
            b"f" * 32 + b" 1 9 18446744073709551615 1",
            os.urandom(64),
            b"\x00" * 300,
        ]
        while not self.halt.is_set():
            for data in noise:
                try:
                    self.out.sendto(data, ("127.0.0.1", self.port))
                    self.sent += 1
                except OSError:  # the port closed as the write ended
                    pass

    def stop(self) -> None:
        self.halt.set()
        self.join()
        self.out.close()


def test_a_spark_write_under_a_flood_of_garbage_succeeds_with_exact_rows(spark, dest):
    from pyspark.sql import functions as F

    @F.udf("long")
    def slow(x):
        time.sleep(0.0002)
        return x

    events = []
    flood = Flood()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    flood.start()
    try:
        df = spark.range(0, 20_000, numPartitions=2).withColumn("y", slow("id"))
        result = write_committed(df, dest.url, progress=events.append)
    finally:
        flood.stop()
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert flood.port is not None and flood.sent > 100  # the port was found and flooded
    assert result.rows == 20_000 and sum(f.rows for f in result.files) == 20_000
    rows = [e.rows for e in events]
    assert rows == sorted(rows)  # progress never went backwards
    assert all(e.rows <= 20_000 for e in events)
    assert events[-1].rows == 20_000 and events[-1].phase == "done"
