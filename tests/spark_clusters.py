"""Multi-process Spark for the fault tests: a driver subprocess and a standalone cluster.

Only one SparkContext can live in a process and the session fixture ``spark`` (``local[2,3]``)
may already run in the pytest process, so these tests drive Spark from a child process:

    python tests/spark_clusters.py '{"master": "local-cluster[2,1,1024]", "conf": {...}}'

The child builds the session, waits for its executors, prints ``@@ {"ready": ...}`` and then
answers one JSON command per stdin line with one ``@@ {...}`` line on stdout. ``write`` runs
``write_committed`` on generated data whose rows carry the attempt number of the task that
wrote them, through a UDF that also injects the fault (exit, sleep, hold) and drops marker files
so the test can see which attempts ran, where, and kill their executor.

``StandaloneCluster`` starts a master on 127.0.0.1 and one worker per extra loopback address
(Spark only places a speculative copy on another host), and stops them by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

PREFIX = "@@ "
ROOT = Path(__file__).resolve().parents[1]


# -- data both sides agree on ---------------------------------------------------------------------
def pad(i: int) -> str:
    """An incompressible, deterministic ~2 KB value, so tasks stream real bytes."""
    return random.Random(i).randbytes(1024).hex()


def group(i: int) -> str:
    return f"g{i % 3}"


def partition_ranges(rows: int, partitions: int) -> list[range]:
    """The ids of each partition of ``spark.range(0, rows, 1, partitions)``."""
    return [range(p * rows // partitions, (p + 1) * rows // partitions) for p in range(partitions)]


# -- processes ----------------------------------------------------------------------------------
def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, children before grandchildren."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _ppid(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


def executor_of(pid: int) -> tuple[int | None, str | None]:
    """The executor JVM above ``pid`` (a Python worker) and the host it registered with."""
    current: int | None = pid
    while current and current > 1:
        args = cmdline(current)
        if any(a.endswith("CoarseGrainedExecutorBackend") for a in args):
            host = args[args.index("--hostname") + 1] if "--hostname" in args else None
            return current, host
        current = _ppid(current)
    return None, None


def is_executor(pid: int) -> bool:
    return any(a.endswith("CoarseGrainedExecutorBackend") for a in cmdline(pid))


def stop_tree(process: subprocess.Popen, grace: float = 20.0) -> None:
    """Stop a child we started and whatever it started, each by its PID."""
    if process.poll() is None:
        tree = descendants(process.pid)
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    else:
        tree = []
    deadline = time.monotonic() + grace
    for pid in reversed(tree):
        while _ppid(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.1)  # most exit with their parent (shutdown hooks, closed stdin)
        with contextlib.suppress(ProcessLookupError):
            if _ppid(pid) is not None:
                os.kill(pid, signal.SIGKILL)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def suite_java_options() -> str:
    """The JVM options the suite's Spark defaults give drivers and executors (for the
    standalone daemons, which read no spark-defaults)."""
    defaults = Path(__file__).parent / "spark-conf" / "spark-defaults.conf"
    for line in defaults.read_text().splitlines():
        if line.startswith("spark.driver.extraJavaOptions"):
            return line.split(None, 1)[1].strip()
    raise AssertionError(f"{defaults} sets no spark.driver.extraJavaOptions")


SUITE_JAVA_OPTS = suite_java_options()


def spark_env(**extra: str) -> dict[str, str]:
    """This process's environment (AWS_* of the moto server included), bound to loopback."""
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONUNBUFFERED="1",
    )
    env.pop("SPARK_HOME", None)
    env.update(extra)
    return env


class DriverProcess:
    """A Spark driver in a child process, spoken to in JSON lines."""

    def __init__(self, master: str, conf: dict[str, str], executors: int, log: Path) -> None:
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        spec = {"master": master, "conf": conf, "executors": executors}
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=spark_env(),
            cwd=str(log.parent),
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                message = f"no answer from the driver in {timeout:.0f} s{self.tail()}"
                raise TimeoutError(message) from None
            if line is None:
                raise RuntimeError(f"the driver exited ({self.process.poll()}){self.tail()}")
            if line.startswith(PREFIX):
                return json.loads(line[len(PREFIX) :])

    def send(self, command: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def request(self, command: dict, timeout: float = 180) -> dict:
        self.send(command)
        return self.receive(timeout)

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            self._log.flush()
            text = self.log_path.read_text(errors="replace").splitlines()
            keep = [t for t in text if not t.startswith("\tat ")][-lines:]
            return "\n--- driver log tail ---\n" + "\n".join(keep)
        return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(Exception):
                self.request({"op": "stop"}, timeout=60)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)
        stop_tree(self.process)
        self._log.close()


class StandaloneCluster:
    """A standalone master on 127.0.0.1 and one single-core worker per given address."""

    def __init__(self, workdir: Path, worker_hosts: tuple[str, ...], java_opts: str = "") -> None:
        import pyspark

        self.spark_home = str(Path(pyspark.__file__).parent)
        self.workdir = workdir
        self.worker_hosts = worker_hosts
        self.java_opts = java_opts
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []
        self._logs: list = []

    def _launch(self, name: str, host: str, args: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        env = spark_env(
            SPARK_LOCAL_IP=host, SPARK_HOME=self.spark_home, SPARK_DAEMON_JAVA_OPTS=self.java_opts
        )
        process = subprocess.Popen(
            [f"{self.spark_home}/bin/spark-class", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(self.workdir),
        )
        self.processes.append(process)

    def start(self, timeout: float = 90) -> StandaloneCluster:
        try:
            self._launch(
                "master",
                "127.0.0.1",
                [
                    "org.apache.spark.deploy.master.Master",
                    *("--host", "127.0.0.1", "--port", str(self.port)),
                    *("--webui-port", str(free_port())),
                ],
            )
            for n, host in enumerate(self.worker_hosts):
                work = self.workdir / f"work-{n}"
                work.mkdir(exist_ok=True)
                self._launch(
                    f"worker-{n}",
                    host,
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        *("--host", host, "--cores", "1", "--memory", "1g"),
                        *("--webui-port", str(free_port(host)), "--work-dir", str(work)),
                        self.url,
                    ],
                )
            self._wait_registered(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_registered(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            logs = [
                (self.workdir / f"worker-{n}.log").read_text(errors="replace")
                for n in range(len(self.worker_hosts))
            ]
            if all("Successfully registered with master" in text for text in logs):
                return
            dead = [p.args[1] for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"standalone cluster did not come up (exited: {dead}); logs in {self.workdir}"
                )
            time.sleep(0.5)

    def stop(self) -> None:
        for process in reversed(self.processes):  # workers first, then the master
            stop_tree(process)
        for log in self._logs:
            log.close()


# -- the driver side (runs in the child process) ------------------------------------------------
def write_marker(directory: str, name: str, **info) -> None:
    path = os.path.join(directory, name + ".json")
    with open(path + ".tmp", "w") as handle:
        json.dump({"time": time.time(), **info}, handle)
    os.replace(path + ".tmp", path)


def make_probe(marker_dir: str, fault: dict | None):
    """The UDF: returns (attempt, pad(id)); injects ``fault`` into one task attempt.

    fault = {"partition": p, "attempts": [0], "after_rows": k, "kind": ..., "seconds": s}:
    ``exit`` ends this Python worker (``os._exit(1)``); ``hold`` stops the attempt until the
    file ``release-p{p}-a{a}`` appears in ``marker_dir`` (or ``seconds`` pass). The attempt's
    writer, a separate Python worker, keeps what it has received and waits for more input.
    With ``"gate": True`` the other attempts of that task wait at their first row until the
    fault has fired (a speculative copy could otherwise win before it does).
    Markers: ``start-p{p}-a{a}`` at an attempt's first row, ``fault-...`` when the fault
    fires, ``woke-...`` when a hold ends.
    """
    state = {"rows": 0}

    def probe(i):
        from pyspark import TaskContext

        context = TaskContext.get()
        p, a = context.partitionId(), context.attemptNumber()
        tag = f"p{p}-a{a}"
        if state["rows"] == 0:
            executor, host = executor_of(os.getpid())
            write_marker(marker_dir, f"start-{tag}", pid=os.getpid(), executor=executor, host=host)
        state["rows"] += 1
        gated = fault and fault.get("gate") and p == fault["partition"]
        if gated and state["rows"] == 1 and a not in fault["attempts"]:
            # another attempt of the faulty task: let the faulty one reach its fault first
            gate = os.path.join(marker_dir, f"fault-p{p}-a{fault['attempts'][0]}.json")
            deadline = time.monotonic() + fault["seconds"]
            while time.monotonic() < deadline and not os.path.exists(gate):
                time.sleep(0.05)
        if (
            fault
            and p == fault["partition"]
            and a in fault["attempts"]
            and state["rows"] == fault["after_rows"]
        ):
            executor, host = executor_of(os.getpid())
            write_marker(marker_dir, f"fault-{tag}", pid=os.getpid(), executor=executor, host=host)
            if fault["kind"] == "exit":
                os._exit(1)
            release = os.path.join(marker_dir, f"release-{tag}")
            deadline = time.monotonic() + fault["seconds"]
            while time.monotonic() < deadline and not os.path.exists(release):
                time.sleep(0.05)
            write_marker(marker_dir, f"woke-{tag}", pid=os.getpid())
        return a, pad(i)

    return probe


def _executors(spark) -> int:
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


def _wait_executors(spark, wanted: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while _executors(spark) < wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    return _executors(spark)


def run_write(spark, command: dict) -> dict:
    from pyspark.sql import functions as F

    from s3commit_sdk import write_committed

    probe = F.udf(
        make_probe(command["markers"], command.get("fault")),
        "struct<attempt:int,pad:string>",
    ).asNondeterministic()
    df = (
        spark.range(0, command["rows"], 1, command["partitions"])
        .withColumn("r", probe("id"))
        .select(
            "id",
            F.concat(F.lit("g"), (F.col("id") % 3).cast("string")).alias("grp"),
            F.col("r.attempt").alias("attempt"),
            F.col("r.pad").alias("pad"),
        )
    )
    started = time.monotonic()
    result = write_committed(
        df,
        command["dest"],
        committer=command["committer"],
        partition_by=command.get("partition_by") or None,
        conflict_mode="fail",
        options=command.get("options") or {},
    )
    return {
        "job_id": result.job_id,
        "rows": result.rows,
        "files": result.success["files"],
        "seconds": round(time.monotonic() - started, 2),
        "committed_at": time.time(),
    }


def _warm_up(batches):
    import s3commit_sdk.protocol  # noqa: F401 - imports boto3 and pyarrow

    yield from batches


def serve(spec: dict) -> None:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(spec["master"])
        .appName("s3commit-cluster-faults")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in spec["conf"].items():
        builder = builder.config(key, value)
    started = time.monotonic()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    executors = _wait_executors(spark, spec["executors"])
    # warm up: Python workers on every executor, with the SDK imported, before the scenarios
    spark.range(0, 64, 1, 2 * spec["executors"]).mapInArrow(_warm_up, "id long").collect()
    out = sys.stdout
    out.write(
        PREFIX
        + json.dumps({"ready": True, "executors": executors, "start_s": time.monotonic() - started})
        + "\n"
    )
    out.flush()
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "stop":
            spark.stop()
            out.write(PREFIX + json.dumps({"stopped": True}) + "\n")
            out.flush()
            return
        answer: dict
        try:
            executors = _wait_executors(spark, spec["executors"])
            if command["op"] == "write":
                answer = {"ok": True, "executors_before": executors, **run_write(spark, command)}
            else:
                answer = {"ok": False, "error": f"unknown op {command['op']!r}"}
        except Exception as exc:
            answer = {"ok": False, "type": type(exc).__name__, "error": str(exc)[:4000]}
        out.write(PREFIX + json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
