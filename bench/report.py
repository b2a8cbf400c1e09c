"""A finished run as a markdown report with PNG charts, and the targets as met / not met.

Targets are judged on the reference endpoint (Ceph RGW, which completes uploads by metadata as
S3 does); the same figures measured on moto stand beside them. Every table and chart names the
endpoint of each figure.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from . import fanout, iceberg, profile, streaming
from .commit_scaling import RAW, RECOVERED
from .end_to_end import SPARK_LOCAL
from .frontends import REFERENCE as FRONTEND_REFERENCE
from .harness import DESCRIPTIONS, KINDS, MIB, Record, Run, Target

REFERENCE = "rgw"
DIRECT = "direct (unsafe)"
SPARK = SPARK_LOCAL.name
ZERO_RENAME = ("directory", "partitioned", "magic")
#: requests every job makes once, and every task once (docs/reference/requests.md)
JOB_REQUESTS = 11
TASK_REQUESTS = 2
#: an append (the end-to-end writes' mode) first reads the destination's schema: a GET of
#: _SUCCESS and, where none records it (an empty destination), one listing for a file
APPEND_SCHEMA_CHECK = 2
#: the job commit's default thread count (option ``threads``)
COMMIT_THREADS = 32

NEAR_DIRECT, COMMIT_RAW, COMMIT_BYTES, RECOVERY = 1.05, 1.10, 1.10, 1.20
#: file counts job commit is judged at against the raw completions; at the largest, its memory
SCALING_FILES = (1000, 10_000, 100_000)
COMMIT_KIB_PER_FILE = 1.0
RSS_FLAT, FRONTEND_RATIO = 1.10, 1.05
#: magic against Spark's own writer onto local disk: wall time and client CPU
NEAR_SPARK, NEAR_SPARK_CPU = 1.25, 1.30
#: pandas input, partitioned overwrite: our time over deltalake's (median of round ratios)
AHEAD_OF_DELTALAKE = 0.95
#: the commit of one micro-batch of 8 files (the median over the stream's batches), ms
STREAM_COMMIT_MS = 150


def cell(record: Record, metric: str, digits: int = 2) -> str:
    found = record.metrics.get(metric)
    if not found:
        return "-"
    return f"{found['median']:.{digits}f} [{found['min']:.{digits}f}-{found['max']:.{digits}f}]"


def cpu_columns(digits: int) -> list[tuple[str, Callable[[Record], str]]]:
    """The client's and the server's CPU seconds, as columns of a scenario's table."""
    return [
        ("client CPU s", lambda r: cell(r, "client_cpu_s", digits)),
        ("server CPU s", lambda r: cell(r, "server_cpu_s", digits)),
    ]


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows]


def last_line(error: str) -> str:
    """A failure's last line, which says what failed: a traceback's lines would break the
    table, and the JSON keeps the whole of it."""
    lines = [line for line in error.splitlines() if line.strip()]
    return (lines[-1] if lines else error).replace("|", "\\|")


def side_by_side(records: list[Record]) -> list[Record]:
    """Records ordered case by case, each case's endpoints together (reference first)."""
    cases: dict[tuple, int] = {}
    for r in records:
        cases.setdefault(_case(r), len(cases))
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(records, key=lambda r: (cases[_case(r)], order.get(r.labels["endpoint"], 99)))


def _case(record: Record) -> tuple:
    return tuple((k, v) for k, v in record.labels.items() if k != "endpoint")


# -- targets -----------------------------------------------------------------------------------
Found = list[tuple[bool, str]]  # per figure: met?, what was measured


def evaluate(run: Run) -> list[Target]:
    """Each target on the reference endpoint, with the same figures from the others beside."""
    targets = []
    for name, check in CHECKS:
        found = {kind: check(run, kind) for kind in run.endpoints}
        mine = found.get(REFERENCE, [])
        met = all(ok for ok, _ in mine) if mine else None
        measured = "; ".join(text for _, text in mine) if mine else _absent(run)
        elsewhere = {
            kind: "; ".join(text for _, text in figures) or "not measured"
            for kind, figures in found.items()
            if kind != REFERENCE
        }
        targets.append(Target(name, met, measured, elsewhere))
    return targets


def _absent(run: Run) -> str:
    if REFERENCE not in run.endpoints:
        return f"{REFERENCE} was not run"
    return "not measured in this run"


def _near_direct(run: Run, kind: str) -> Found:
    found = []
    for direct in run.of("end_to_end", endpoint=kind, writer=DIRECT):
        labels = direct.labels
        if labels["size_mib"] < 1024:
            continue
        for name in ZERO_RENAME:
            for ours in run.of("end_to_end", **{**labels, "writer": name}):
                ratio = ours.median("seconds") / direct.median("seconds")
                layout = "partitioned" if labels["partitioned"] else "flat"
                found.append(
                    (
                        ratio <= NEAR_DIRECT,
                        f"{name} {labels['size_mib']} MiB {layout}: {ratio:.3f}x "
                        f"({ours.median('seconds'):.1f} s vs {direct.median('seconds'):.1f} s"
                        f"{_cpu_ratio(ours, direct)})",
                    )
                )
    return found


def _near_spark(run: Run, kind: str) -> Found:
    """magic against Spark's own write of the same DataFrame onto local disk, by the ratios of
    each round (they share its load) as scenario 1 records them."""
    found = []
    for ours in run.of("end_to_end", endpoint=kind, writer="magic"):
        labels = ours.labels
        if labels["size_mib"] < 1024 or "x_spark" not in ours.metrics:
            continue
        spark = run.of("end_to_end", **{**labels, "writer": SPARK})[0]
        took, cpu = ours.median("x_spark"), ours.median("cpu_x_spark")
        layout = "partitioned" if labels["partitioned"] else "flat"
        found.append(
            (
                took <= NEAR_SPARK and cpu <= NEAR_SPARK_CPU,
                f"{labels['size_mib']} MiB {layout}: {took:.2f}x time ("
                f"{ours.median('seconds'):.1f} s vs {spark.median('seconds'):.1f} s), client "
                f"CPU {cpu:.2f}x ({ours.median('client_cpu_s'):.1f} s vs "
                f"{spark.median('client_cpu_s'):.1f} s){_shared_cores(run, ours, spark)}",
            )
        )
    return found


def _shared_cores(run: Run, ours: Record, spark: Record) -> str:
    """What the S3 server's own CPU costs a write on cores it shares with Spark: the least time
    an S3 write of Spark's client CPU could take here is that CPU plus the server's during
    ours, over the cores (Spark's local write has no server)."""
    cores = run.machine_info.get("cpus")
    if not cores or "server_cpu_s" not in ours.metrics:
        return ""
    floor = (spark.median("client_cpu_s") + ours.median("server_cpu_s")) / cores
    if floor <= spark.median("seconds"):
        return ""
    return (
        f"; with the S3 server's {ours.median('server_cpu_s'):.1f} s of CPU on the same "
        f"{cores} cores, no S3 write of Spark's CPU takes under {floor:.1f} s: "
        f"{ours.median('seconds') / floor:.2f}x that"
    )


def _cpu_ratio(ours: Record, direct: Record) -> str:
    """The same ratio in CPU seconds (client and server), which load from other work on the
    machine does not stretch as it stretches wall time."""
    metrics = ("client_cpu_s", "server_cpu_s")
    if not all(m in ours.metrics and m in direct.metrics for m in metrics):
        return ""
    cpu = [sum(r.median(m) for m in metrics) for r in (ours, direct)]
    return f"; CPU {cpu[0] / cpu[1]:.2f}x" if cpu[1] else ""


def _commit_vs_raw(run: Run, kind: str) -> Found:
    found = []
    for files in SCALING_FILES:
        raw = run.of(
            "commit_scaling", endpoint=kind, committer=RAW, files=files, threads=COMMIT_THREADS
        )
        if not raw:
            continue
        limit = raw[0].median("job_commit_s")
        listing = raw[0].median("list_s")
        for ours in run.of("commit_scaling", endpoint=kind, files=files, threads=COMMIT_THREADS):
            if ours.labels["committer"] in (RAW, RECOVERED):
                continue
            ratio = ours.median("job_commit_s") / limit
            found.append(
                (
                    ratio <= COMMIT_RAW,
                    f"{ours.labels['committer']} {files:,} files: {ratio:.3f}x "
                    f"({ours.median('job_commit_s'):.2f} s vs raw {limit:.2f} s; one listing "
                    f"of the keys: {listing:.2f} s)",
                )
            )
    return found


def _commit_memory(run: Run, kind: str) -> Found:
    """The driver's RSS growth per file in job commit, at the largest file counts (below them
    the heap the preparation freed is reused and the growth says little)."""
    found = []
    for ours in run.of("commit_scaling", endpoint=kind, files=SCALING_FILES[-1]):
        if ours.labels["committer"] in (RAW, RECOVERED) or "driver_rss_kib_per_file" not in (
            ours.metrics
        ):
            continue
        growth = ours.median("driver_rss_kib_per_file")
        found.append(
            (
                growth <= COMMIT_KIB_PER_FILE,
                f"{ours.labels['committer']} {ours.labels['files']:,} files: {growth:.2f} KiB/file",
            )
        )
    return found


def _recovery_vs_commit(run: Run, kind: str) -> Found:
    """``s3commit recover`` finishing a job commit killed after its journal, against the same
    job commit uninterrupted: the same stages, so within RECOVERY of it."""
    found = []
    for recovered in run.of("commit_scaling", endpoint=kind, committer=RECOVERED):
        files, threads = recovered.labels["files"], recovered.labels["threads"]
        whole = run.of(
            "commit_scaling", endpoint=kind, committer="directory", files=files, threads=threads
        )
        if not whole:
            continue
        took, limit = recovered.median("job_commit_s"), whole[0].median("job_commit_s")
        found.append(
            (
                took / limit <= RECOVERY,
                f"{files:,} files: {took / limit:.3f}x ({took:.2f} s vs {limit:.2f} s)",
            )
        )
    return found


def _commit_flat_in_bytes(run: Run, kind: str) -> Found:
    records = sorted(run.of("commit_bytes", endpoint=kind), key=lambda r: r.labels["total_mib"])
    if len(records) < 2:
        return []
    small, large = records[0], records[-1]
    ratio = large.median("job_commit_s") / small.median("job_commit_s")
    return [
        (
            ratio <= COMMIT_BYTES,
            f"{small.labels['files']} files, {small.labels['total_mib']} MiB: "
            f"{small.median('job_commit_s'):.2f} s, {large.labels['total_mib']} MiB: "
            f"{large.median('job_commit_s'):.2f} s ({ratio:.2f}x)",
        )
    ]


def verification_requests(notes: dict) -> int:
    """What checking completions costs where their answers carry no ETag (RGW): one listing
    per directory written (a HEAD for a lone file); none where the answers are trusted."""
    checks = notes.get("completion_checks", {})
    return notes["directories"] if checks.get("listed") or checks.get("headed") else 0


def _requests_and_copies(run: Run, kind: str) -> Found:
    found = []
    for record in run.of("requests", endpoint=kind):
        if record.labels["writer"] not in ZERO_RENAME:
            continue
        notes = record.notes
        counts, files, tasks = notes["requests"], notes["files"], notes["tasks"]
        checks = verification_requests(notes)
        fixed = JOB_REQUESTS + APPEND_SCHEMA_CHECK + TASK_REQUESTS * tasks + checks
        per_file = (sum(counts.values()) - counts.get("UploadPart", 0) - fixed) / files
        checked = f", {checks} checking completions" if checks else ""
        found.append(
            (
                notes["copied_bytes"] == 0 and per_file <= 2,
                f"{record.labels['writer']}: {notes['copied_bytes']} B copied, "
                f"{per_file:.2f} + parts per file ({sum(counts.values())} requests for {files} "
                f"files, {tasks} tasks; per job and task {fixed}: {JOB_REQUESTS} per job, "
                f"{APPEND_SCHEMA_CHECK} for the append's schema check, {TASK_REQUESTS} per "
                f"task{checked})",
            )
        )
    return found


def _magic_rss(run: Run, kind: str) -> Found:
    magic = sorted(
        run.of("memory", endpoint=kind, committer="magic"), key=lambda r: r.labels["size_mib"]
    )
    if len(magic) < 2:
        return []
    small, large = magic[0], magic[-1]
    ratio = large.median("peak_rss_mib") / small.median("peak_rss_mib")
    return [
        (
            ratio <= RSS_FLAT,
            f"{small.labels['size_mib']} MiB file: {small.median('peak_rss_mib'):.0f} MiB RSS, "
            f"{large.labels['size_mib']} MiB file: {large.median('peak_rss_mib'):.0f} MiB RSS "
            f"({ratio:.2f}x)",
        )
    ]


def _frontends(run: Run, kind: str) -> Found:
    reference = run.of("frontends", endpoint=kind, frontend=FRONTEND_REFERENCE)
    if not reference or "seconds" not in reference[0].metrics:
        return []
    base = reference[0].median("seconds")
    found = []
    for record in run.of("frontends", endpoint=kind):
        name = record.labels["frontend"]
        if name == FRONTEND_REFERENCE:
            continue
        if "seconds" not in record.metrics:
            found.append((False, f"{name}: {record.notes.get('error', 'no figures')}"))
            continue
        ratio = record.median("seconds") / base
        found.append(
            (
                ratio <= FRONTEND_RATIO,
                f"{name}: {ratio:.3f}x ({record.median('seconds'):.1f} s vs {base:.1f} s)",
            )
        )
    return found


def _peers(run: Run, kind: str) -> Found:
    return [
        (
            "seconds" in r.metrics,
            f"{r.labels['tool']}: "
            + (f"{r.median('seconds'):.2f} s" if "seconds" in r.metrics else r.notes["error"]),
        )
        for r in run.of("peers", endpoint=kind)
    ]


def _ahead_of_deltalake(run: Run, kind: str) -> Found:
    """Each of our committers against deltalake, round by round (``bench/peers.py``), with
    the CPU each side took where the run measured it."""
    found = []
    theirs = run.of("peers", endpoint=kind, tool="deltalake")
    for record in run.of("peers", endpoint=kind):
        ratio = record.notes.get("round_ratios", {}).get("deltalake")
        if ratio is not None:
            found.append(
                (
                    ratio <= AHEAD_OF_DELTALAKE,
                    f"{record.labels['tool']}: {ratio:.3f}x deltalake "
                    f"({record.median('seconds'):.2f} s; median of per-round ratios)"
                    + _cpu_beside(record, theirs[0] if theirs else None),
                )
            )
    return found


def _cpu_beside(ours: Record, theirs: Record | None) -> str:
    """Client and server CPU, ours then the peer's (medians), where both were measured."""
    metrics = ("client_cpu_s", "server_cpu_s")
    if theirs is None or not all(m in r.metrics for m in metrics for r in (ours, theirs)):
        return ""
    client, server = (f"{ours.median(m):.2f} s vs {theirs.median(m):.2f} s" for m in metrics)
    return f"; client CPU {client}, the server's {server}"


def _stream_commit(run: Run, kind: str) -> Found:
    """The commit of each micro-batch of ``df.writeStream.format("s3commit")`` (Parquet),
    from its record: the median over the stream's batches."""
    found = []
    for record in run.of(streaming.SCENARIO, endpoint=kind, writer=streaming.OURS):
        if "commit_ms" not in record.metrics:
            continue
        commit = record.metrics["commit_ms"]
        found.append(
            (
                commit["median"] <= STREAM_COMMIT_MS,
                f"{commit['median']:.0f} ms median (p90 {commit['p90']:.0f}, max "
                f"{commit['max']:.0f}) over {commit['n']} batches of "
                f"{record.labels['rows_per_batch']:,} rows, "
                f"{record.notes['files_per_batch']} files each",
            )
        )
    return found


CHECKS: list[tuple[str, Callable[[Run, str], Found]]] = [
    (
        f"committed / direct write <= {NEAR_DIRECT} (directory, partitioned, magic; "
        "1 and 4 GiB, flat and partitioned)",
        _near_direct,
    ),
    (
        f"magic <= {NEAR_SPARK}x Spark's local-disk write, client CPU <= {NEAR_SPARK_CPU}x "
        "(1 and 4 GiB, flat and partitioned)",
        _near_spark,
    ),
    (
        f"job commit <= {COMMIT_RAW}x raw completion of the same uploads "
        f"({COMMIT_THREADS} threads; 1,000, 10,000 and 100,000 files)",
        _commit_vs_raw,
    ),
    (
        f"job commit of {SCALING_FILES[-1]:,} files: driver RSS growth <= "
        f"{COMMIT_KIB_PER_FILE} KiB per file",
        _commit_memory,
    ),
    (
        f"s3commit recover <= {RECOVERY}x the uninterrupted job commit ({COMMIT_THREADS} threads)",
        _recovery_vs_commit,
    ),
    (
        f"job commit flat in bytes (same file count, 4x the bytes, within {COMMIT_BYTES}x)",
        _commit_flat_in_bytes,
    ),
    (
        "zero bytes copied; requests per file <= 2 + parts, plus per-task and per-job constants",
        _requests_and_copies,
    ),
    (f"magic peak RSS flat in file size (within {RSS_FLAT}x)", _magic_rss),
    (
        f"data source and Delta output within {FRONTEND_RATIO}x of write_committed",
        _frontends,
    ),
    ("peers measured on the same endpoint and data", _peers),
    (
        f"pandas partitioned overwrite: s3commit <= {AHEAD_OF_DELTALAKE}x deltalake's time "
        "(each committer, median of per-round ratios)",
        _ahead_of_deltalake,
    ),
    (
        f"streaming: commit of a micro-batch of 8 files <= {STREAM_COMMIT_MS} ms "
        "(median over the batches, writeStream.format('s3commit'), Parquet)",
        _stream_commit,
    ),
]


# -- headline figures ----------------------------------------------------------------------------
def _e2e_headline(run: Run, kind: str, size: int, partitioned: bool) -> str:
    direct = run.of(
        "end_to_end", endpoint=kind, writer=DIRECT, size_mib=size, partitioned=partitioned
    )
    if not direct:
        return ""
    base = direct[0].median("seconds")
    spark = run.of("end_to_end", **{**direct[0].labels, "writer": SPARK})
    ours = [
        f"{name} {r.median('seconds'):.1f} s ({r.median('seconds') / base:.2f}x"
        + (f", {r.median('x_spark'):.2f}x Spark's)" if "x_spark" in r.metrics else ")")
        for name in ZERO_RENAME
        for r in run.of(
            "end_to_end", endpoint=kind, writer=name, size_mib=size, partitioned=partitioned
        )
    ]
    floor = f", Spark's local-disk write {spark[0].median('seconds'):.1f} s" if spark else ""
    return f"{', '.join(ours)} vs direct {base:.1f} s{floor}"


def _commit_headline(run: Run, kind: str, files: int) -> str:
    found = run.of("commit_scaling", endpoint=kind, files=files, threads=COMMIT_THREADS)
    return ", ".join(f"{r.labels['committer']} {r.median('job_commit_s'):.2f} s" for r in found)


def _copies_headline(run: Run, kind: str) -> str:
    return ", ".join(
        f"{r.labels['writer']} {r.notes['copied_bytes'] / MIB:.1f} MiB"
        for r in run.of("requests", endpoint=kind)
        if r.labels["writer"] != DIRECT
    )


def _seconds_headline(run: Run, kind: str, scenario: str, label: str) -> str:
    return ", ".join(
        f"{r.labels[label]} {r.median('seconds'):.2f} s"
        if "seconds" in r.metrics
        else f"{r.labels[label]}: error"
        for r in run.of(scenario, endpoint=kind)
    )


def _iceberg_commit(run: Run, kind: str) -> str:
    """Job commit per format; for Iceberg, the catalog commit stage in it."""
    found = []
    for r in run.of(iceberg.COMMIT, endpoint=kind):
        stage = r.metrics.get("iceberg_commit_s", {}).get("median")
        snapshot = f" (snapshot {stage:.2f} s)" if stage is not None else ""
        found.append(f"{r.labels['format']} {r.median('job_commit_s'):.2f} s{snapshot}")
    files = {f"{r.labels['files']:,} files" for r in run.of(iceberg.COMMIT, endpoint=kind)}
    return ", ".join(found) + (f" ({', '.join(sorted(files))})" if found else "")


def _limits_headline(run: Run, kind: str) -> str:
    upload = run.of("store_limit", endpoint=kind)
    raw = sorted(
        run.of("commit_scaling", endpoint=kind, committer=RAW, threads=COMMIT_THREADS),
        key=lambda r: r.labels["files"],
    )
    parts = []
    if upload:
        one = upload[0]
        parts.append(
            f"uploads {one.median('mib_per_s'):.0f} MiB/s, one completion of "
            f"{one.notes['file_bytes'] / MIB:.0f} MiB {one.median('complete_s') * 1000:.0f} ms"
        )
    if raw:
        parts.append(f"{raw[-1].median('completions_per_s'):.0f} completions/s")
    return ", ".join(parts)


def headlines(run: Run) -> list[tuple[str, Callable[[str], str]]]:
    """What the performance page quotes: one row per figure, one column per endpoint."""
    rows: list[tuple[str, Callable[[str], str]]] = []
    cases = sorted({(r.labels["size_mib"], r.labels["partitioned"]) for r in run.of("end_to_end")})
    for size, partitioned in cases:
        layout = "partitioned" if partitioned else "flat"
        rows.append(
            (
                f"{size} MiB {layout}: committed vs direct write and Spark's local-disk write",
                lambda kind, s=size, p=partitioned: _e2e_headline(run, kind, s, p),
            )
        )
    for files in sorted({r.labels["files"] for r in run.of("commit_scaling")}):
        rows.append(
            (
                f"job commit of {files:,} files, {COMMIT_THREADS} threads",
                lambda kind, f=files: _commit_headline(run, kind, f),
            )
        )
    rows += [
        (
            "job commit at the same file count, more bytes",
            lambda kind: "; ".join(t for _, t in _commit_flat_in_bytes(run, kind)),
        ),
        ("bytes copied server-side", lambda kind: _copies_headline(run, kind)),
        (
            "requests per file",
            lambda kind: "; ".join(t.split(" (")[0] for _, t in _requests_and_copies(run, kind)),
        ),
        (
            "magic peak RSS by file size",
            lambda kind: "; ".join(t for _, t in _magic_rss(run, kind)),
        ),
        (
            "partitioned overwrite, Python peers",
            lambda kind: _seconds_headline(run, kind, "peers", "tool"),
        ),
        (
            "front ends, same Spark write",
            lambda kind: _seconds_headline(run, kind, "frontends", "frontend"),
        ),
        (
            "Iceberg partitioned overwrite: s3commit vs pyiceberg",
            lambda kind: _seconds_headline(run, kind, iceberg.PEERS, "tool"),
        ),
        ("job commit as an Iceberg snapshot vs Parquet", lambda kind: _iceberg_commit(run, kind)),
        (
            "streaming, 8 files per batch: commit per batch (Spark's sink: addBatch), rows/s",
            lambda kind: "; ".join(
                streaming.commit_summary(r) for r in run.of(streaming.SCENARIO, endpoint=kind)
            ),
        ),
        (
            "job commit fanned out to processes, SIMULATED: completions/s (law's prediction)",
            lambda kind: fanout.summary(run.of(fanout.SCENARIO, endpoint=kind)),
        ),
        ("the endpoint's raw limits", lambda kind: _limits_headline(run, kind)),
    ]
    return rows


# -- report ------------------------------------------------------------------------------------
def _parts(run: Run) -> list[str]:
    """A run merged from parts (``python -m bench.merge``) says when each ran, on which code."""
    if not run.parts:
        return [f"Code: commit {run.machine_info.get('commit', 'unknown')}.", ""]
    rows = [
        [
            str(n),
            datetime.fromtimestamp(p["started"], timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            p["commit"],
            f"{p['seconds'] / 60:.0f} min" if p["seconds"] else "-",
            "; ".join(p["cases"]),
        ]
        for n, p in enumerate(run.parts, 1)
    ]
    return [
        f"Made in {len(run.parts)} parts (`python -m bench.merge`); a later part's scenario "
        "on an endpoint replaces an earlier part's.",
        "",
        *table(["part", "started", "commit", "time", "cases"], rows),
        "",
    ]


def markdown(run: Run, charts: list[str]) -> str:
    m = run.machine_info
    others = [k for k in run.endpoints if k != REFERENCE]
    lines = [
        f"# s3commit benchmark ({run.mode} run)",
        "",
        f"Machine: {m['cpus']} cores, {m['memory_gib']} GiB RAM, Python {m['python']}, "
        f"PySpark {m['pyspark']}, pyarrow {m['pyarrow']}. Spark local[2]; the S3 server, Spark "
        "and the Python workers share the cores. Every scenario ran on each endpoint in turn "
        "(servers on 127.0.0.1, bucket emptied in between), with the same data. Every figure: "
        "median [min-max] of the repetitions (n in the JSON).",
        "",
        *[f"- **{kind}**: {DESCRIPTIONS[kind]}" for kind in run.endpoints],
        "",
        *_parts(run),
        "## Headline figures",
        "",
        *table(
            ["", *run.endpoints],
            [row for row in _headline_rows(run) if any(cell != "-" for cell in row[1:])],
        ),
        "",
        "## The endpoints' own limits (raw boto3, same run)",
        "",
        *_limits(run),
        "",
        f"## Targets (judged on {REFERENCE})",
        "",
        *table(
            ["target", f"result on {REFERENCE}", f"measured on {REFERENCE}"]
            + [f"same figures on {k}" for k in others],
            [
                [t.name, _verdict(t.met), t.measured] + [t.elsewhere.get(k, "") for k in others]
                for t in run.targets
            ],
        ),
    ]
    for title, scenario, columns in SECTIONS:
        records = side_by_side(run.of(scenario))
        if not records:
            continue
        labels = list(records[0].labels)
        rows = [[str(r.labels[k]) for k in labels] + [f(r) for _, f in columns] for r in records]
        lines += ["", f"## {title}", "", *table(labels + [c for c, _ in columns], rows)]
    lines += _profile_section(run)
    if run.failures:
        lines += ["", "## Failed scenarios (their figures are missing above)", ""]
        rows = [[k, last_line(v)] for k, v in run.failures.items()]
        lines += table(["scenario", "error (its last line; the whole of it in the JSON)"], rows)
    lines += ["", "## Wall time per scenario (s)", ""]
    lines += table(["scenario", "s"], [[k, f"{v:.0f}"] for k, v in run.seconds.items()])
    lines += ["", "## Charts", ""] + [f"![{c}]({c})" for c in charts]
    return "\n".join(lines) + "\n"


def _profile_section(run: Run) -> list[str]:
    """The phases of one magic write's Python samples, per endpoint (bench/profile.py)."""
    records = side_by_side(run.of(profile.SCENARIO))
    if not records:
        return []
    lines = [
        "",
        "## Where the time goes (py-spy profile of one case)",
        "",
        f"One flat {records[0].labels['writer']} write of {records[0].labels['size_mib']} MiB "
        "per endpoint, sampled by py-spy (raw collapsed stacks beside this report) in the "
        "driver and every Python process under it. A sample is one Python thread running or "
        "ready to run (py-spy leaves threads waiting on I/O or locks out), so on loaded cores "
        "the counts stretch like wall time. A stack counts for commit when commit code is on "
        "it, otherwise for the innermost frame that names a phase: Arrow transfer (reading "
        "the batches from the JVM), encoding (pyarrow's Parquet writer), buffering (filling "
        "and copying the part buffers), upload (boto3/botocore/urllib3, request signing "
        "included), between tasks (a reused worker in PySpark's daemon loop, which runs "
        "gc.collect() after each task). Spark's JVM is not Python: py-spy cannot sample it, "
        "so its reading of the rows and its side of the Arrow hand-over show only as the "
        "time the workers wait.",
        "",
    ]
    for r in records:
        kind = r.labels["endpoint"]
        if "error" in r.notes:
            lines.append(f"- **{kind}**: no profile: {r.notes['error']}")
            continue
        lines.append(
            f"- **{kind}**: write {r.median('seconds'):.1f} s under sampling; "
            f"{r.notes['rate']} samples/s per thread; "
            f"{r.median('busy_worker_threads'):.2f} worker threads at work on average; "
            f"`{r.notes['raw']}`; py-spy: {r.notes['py_spy']}"
        )
    sampled = [r for r in records if "phases" in r.notes]
    rows = []
    for phase in profile.PHASES:
        row = [phase]
        for r in sampled:
            counts = r.notes["phases"][phase]
            workers = r.median("worker_samples")
            share = counts["worker"] / workers if workers else 0.0
            row += [f"{counts['worker']} ({share:.0%})", str(counts["driver"])]
        rows.append(row)
    head = ["phase"]
    for r in sampled:
        kind = r.labels["endpoint"]
        head += [f"{kind}: worker samples (share)", f"{kind}: driver samples"]
    return [*lines, "", *table(head, rows)] if sampled else lines


def _headline_rows(run: Run) -> list[list[str]]:
    return [
        [name, *[figure(kind) or "-" for kind in run.endpoints]] for name, figure in headlines(run)
    ]


def _limits(run: Run) -> list[str]:
    rows = []
    for kind in run.endpoints:
        upload = run.of("store_limit", endpoint=kind)
        raw = sorted(
            run.of("commit_scaling", endpoint=kind, committer=RAW, threads=COMMIT_THREADS),
            key=lambda r: r.labels["files"],
        )
        rows.append(
            [
                kind,
                cell(upload[0], "mib_per_s", 1) if upload else "-",
                (
                    f"{upload[0].median('complete_s') * 1000:.0f} ms "
                    f"({upload[0].notes['file_bytes'] / MIB:.0f} MiB)"
                    if upload
                    else "-"
                ),
                f"{cell(raw[-1], 'completions_per_s', 0)} ({raw[-1].labels['files']:,})"
                if raw
                else "-",
            ]
        )
    return table(
        [
            "endpoint",
            "multipart upload MiB/s",
            "one completion",
            f"completions/s at {COMMIT_THREADS} threads (uploads)",
        ],
        rows,
    )


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**not met**", None: "not measured"}[met]


def _per_file(record: Record) -> str:
    per = record.notes["requests_per_file"]
    return ", ".join(f"{op} {n:g}" for op, n in sorted(per.items()))


def _frontend_cell(record: Record) -> str:
    return record.notes.get("error", "")


SECTIONS: list[tuple[str, str, list[tuple[str, Callable[[Record], str]]]]] = [
    (
        "1. End to end by data size (seconds; phases from the tasks' own timings)",
        "end_to_end",
        [
            ("total s", lambda r: cell(r, "seconds")),
            ("MiB/s", lambda r: cell(r, "mib_per_s", 1)),
            ("task write s", lambda r: cell(r, "task_write_s")),
            ("task commit s", lambda r: cell(r, "task_commit_s")),
            ("job commit s", lambda r: cell(r, "job_commit_s")),
            *cpu_columns(1),
            ("x Spark's writer", lambda r: cell(r, "x_spark")),
            ("CPU x Spark's", lambda r: cell(r, "cpu_x_spark")),
            ("files", lambda r: str(r.notes["files"])),
        ],
    ),
    (
        "2. Job commit by file count and threads (small files)",
        "commit_scaling",
        [
            ("job commit s", lambda r: cell(r, "job_commit_s", 3)),
            ("completions/s", lambda r: cell(r, "completions_per_s", 0)),
            ("one listing of the keys s", lambda r: cell(r, "list_s", 3)),
            ("driver heap peak MiB", lambda r: cell(r, "driver_heap_peak_mib", 1)),
            ("driver heap KiB/file", lambda r: cell(r, "driver_heap_kib_per_file", 2)),
            ("driver RSS growth KiB/file", lambda r: cell(r, "driver_rss_kib_per_file", 2)),
        ],
    ),
    (
        "2b. Job commit at the same file count, different bytes",
        "commit_bytes",
        [("job commit s", lambda r: cell(r, "job_commit_s", 3))],
    ),
    (
        "3. Requests per committed file and bytes copied server-side (counted by the proxy)",
        "requests",
        [
            ("files", lambda r: str(r.notes["files"])),
            ("requests per file", _per_file),
            ("copied MiB", lambda r: f"{r.notes['copied_bytes'] / MIB:.1f}"),
        ],
    ),
    (
        "4. Memory and local disk, one large file (one process)",
        "memory",
        [
            ("peak RSS MiB", lambda r: cell(r, "peak_rss_mib", 0)),
            ("local disk MiB", lambda r: cell(r, "peak_local_disk_mib", 0)),
            ("s", lambda r: cell(r, "seconds", 1)),
        ],
    ),
    (
        "5. The store's limit: raw boto3 multipart uploads, same part size and concurrency",
        "store_limit",
        [
            ("s", lambda r: cell(r, "seconds")),
            ("MiB/s", lambda r: cell(r, "mib_per_s", 1)),
            ("one completion s", lambda r: cell(r, "complete_s", 3)),
        ],
    ),
    (
        "6. Python peers: partitioned overwrite of the same pandas data (in-process)",
        "peers",
        [
            ("s", lambda r: cell(r, "seconds")),
            ("MiB/s", lambda r: cell(r, "mib_per_s", 1)),
            *cpu_columns(2),
            ("protocol", lambda r: r.notes.get("protocol", r.notes.get("error", ""))),
        ],
    ),
    (
        "7. EMULATED S3 latency and copy bandwidth (through the proxy)",
        "latency",
        [
            ("total s", lambda r: cell(r, "seconds")),
            ("job commit s", lambda r: cell(r, "job_commit_s")),
            ("copied MiB", lambda r: f"{r.notes['copied_bytes'] / MIB:.1f}"),
        ],
    ),
    (
        "8. Front ends: the same partitioned Spark write",
        "frontends",
        [
            ("s", lambda r: cell(r, "seconds")),
            ("MiB/s", lambda r: cell(r, "mib_per_s", 1)),
            ("error", _frontend_cell),
        ],
    ),
    (
        "9. Iceberg: partitioned overwrite by s3commit and by pyiceberg (same data as 6)",
        iceberg.PEERS,
        [
            ("s", lambda r: cell(r, "seconds")),
            ("MiB/s", lambda r: cell(r, "mib_per_s", 1)),
            ("job commit s", lambda r: cell(r, "job_commit_s")),
            ("iceberg commit s", lambda r: cell(r, "iceberg_commit_s")),
            *cpu_columns(2),
            ("S3 requests of one commit", iceberg.requests_cell),
            ("by operation", iceberg.operations_cell),
            ("files / snapshots per write", iceberg.shape_cell),
            ("protocol", lambda r: r.notes.get("protocol", r.notes.get("error", ""))),
        ],
    ),
    (
        "10. Job commit of the same one-row files as an Iceberg snapshot and as plain Parquet",
        iceberg.COMMIT,
        [
            ("job commit s", lambda r: cell(r, "job_commit_s", 3)),
            ("complete uploads s", lambda r: cell(r, "complete_uploads_s", 3)),
            ("iceberg commit s", lambda r: cell(r, "iceberg_commit_s", 3)),
            ("cleanup s", lambda r: cell(r, "cleanup_s", 3)),
        ],
    ),
    (
        "11. Streaming: micro-batches of 8 files (one source file per batch, availableNow); "
        "per-batch ms as median / p90 / max",
        streaming.SCENARIO,
        [
            ("rows/s", lambda r: cell(r, "rows_per_s", 0)),
            ("query s", lambda r: cell(r, "seconds")),
            ("commit ms", streaming.ms_cell("commit_ms")),
            ("addBatch ms", streaming.ms_cell("add_batch_ms")),
            ("batch ms (triggerExecution)", streaming.ms_cell("batch_ms")),
            ("commit measured by", lambda r: r.notes.get("commit_measured_by", "")),
            ("destination", lambda r: r.notes.get("destination", "")),
        ],
    ),
    (
        "12. Job commit fanned out to worker processes, SIMULATED: emulated latency per "
        "completion (fault proxy; 0 ms: no proxy), completions/s measured vs the law "
        "(docs/DESIGN.md)",
        fanout.SCENARIO,
        [
            ("completions/s", lambda r: cell(r, "completions_per_s", 0)),
            ("law/s", lambda r: cell(r, "law_predicted_per_s", 0)),
            ("bound", lambda r: r.notes["bound"]),
            ("ms per completion (Little)", lambda r: cell(r, "completion_ms_observed", 1)),
            ("client CPU ms/completion", lambda r: cell(r, "client_cpu_ms_per_completion", 2)),
            ("proxy CPU ms", lambda r: cell(r, "proxy_cpu_ms_per_completion", 2)),
            ("server CPU ms", lambda r: cell(r, "server_cpu_ms_per_completion", 2)),
            ("cores used", lambda r: cell(r, "cores_used", 2)),
        ],
    ),
]


# -- charts ------------------------------------------------------------------------------------
def charts(run: Run, folder: Path, stem: str) -> list[str]:
    """PNG charts next to the report; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(folder / f"{stem}-{name}.png", dpi=110)
        plt.close(fig)
        made.append(f"{stem}-{name}.png")

    if run.of("end_to_end"):
        save(_end_to_end_chart(run, plt), "end-to-end")
    if run.of("commit_scaling"):
        save(_scaling_chart(run, plt), "commit-scaling")
    if run.of(fanout.SCENARIO):
        save(_fanout_chart(run, plt), "fanout")
    simple: list[tuple[str, str, str, Callable[[dict], str]]] = [
        (
            "memory",
            "peak_rss_mib",
            "peak RSS MiB",
            lambda x: f"{x['committer']} {x['size_mib']} MiB",
        ),
        ("peers", "seconds", "seconds", lambda x: x["tool"]),
        ("latency", "seconds", "seconds (emulated latency)", lambda x: x["writer"]),
        ("frontends", "seconds", "seconds", lambda x: x["frontend"]),
        (iceberg.PEERS, "seconds", "seconds", lambda x: x["tool"]),
        (streaming.SCENARIO, "rows_per_s", "rows/s (end to end)", lambda x: x["writer"]),
        (
            "store_limit",
            "mib_per_s",
            "raw multipart upload MiB/s",
            lambda x: f"{x['size_mib']} MiB",
        ),
    ]
    for scenario, metric, unit, name in simple:
        records = [r for r in side_by_side(run.of(scenario)) if metric in r.metrics]
        if not records:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(records)), 4))
        ax.bar(
            [f"{name(r.labels)} ({r.labels['endpoint']})" for r in records],
            [r.median(metric) for r in records],
            color=[_color(r.labels["endpoint"]) for r in records],
        )
        ax.set_ylabel(unit)
        ax.set_title(f"{scenario} ({' vs '.join(run.endpoints)})")
        ax.tick_params(axis="x", rotation=45)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        save(fig, scenario.replace("_", "-"))
    return made


def _color(kind: str) -> str:
    return {"rgw": "tab:blue", "moto": "tab:orange"}.get(kind, "tab:gray")


def _end_to_end_chart(run: Run, plt):
    """One panel per endpoint and case: the phases of each writer, stacked, and above each bar
    its time as a multiple of Spark's own write onto local disk (the first bar)."""
    records = run.of("end_to_end")
    kinds = [k for k in run.endpoints if run.of("end_to_end", endpoint=k)]
    cases = sorted({(r.labels["size_mib"], r.labels["partitioned"]) for r in records})
    fig, axes = plt.subplots(
        len(kinds), len(cases), figsize=(4.5 * len(cases), 4 * len(kinds)), squeeze=False
    )
    for row, kind in enumerate(kinds):
        for col, (size, partitioned) in enumerate(cases):
            ax = axes[row][col]
            case = run.of("end_to_end", endpoint=kind, size_mib=size, partitioned=partitioned)
            names = [r.labels["writer"] for r in case]
            bottom = [0.0] * len(case)
            for phase in ("task_write_s", "task_commit_s", "job_commit_s"):
                values = [r.metrics.get(phase, {}).get("median", 0.0) for r in case]
                ax.bar(names, values, bottom=bottom, label=phase.removesuffix("_s"))
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
            for x, (r, top) in enumerate(zip(case, bottom, strict=True)):
                if "x_spark" in r.metrics:
                    label = f"{r.median('x_spark'):.2f}x"
                    ax.annotate(label, (x, top), ha="center", va="bottom", fontsize=7)
            ax.margins(y=0.1)  # room for those labels
            layout = "partitioned" if partitioned else "flat"
            ax.set_title(f"{kind}: {size} MiB, {layout}")
            ax.set_ylabel("seconds (median)")
            ax.tick_params(axis="x", rotation=45)
    axes[0][0].legend(fontsize=7, loc="best")
    return fig


def _scaling_chart(run: Run, plt):
    """Job commit vs files (default threads), vs threads, and driver heap vs files."""
    records = run.of("commit_scaling")
    fig, (by_files, by_threads, heap) = plt.subplots(1, 3, figsize=(16, 4.5))
    styles = {"rgw": "-", "moto": "--"}
    committers = list(dict.fromkeys(r.labels["committer"] for r in records))
    threaded = max(
        {r.labels["files"] for r in records},
        key=lambda f: (len({r.labels["threads"] for r in records if r.labels["files"] == f}), f),
    )
    colors = {c: f"C{i}" for i, c in enumerate(committers)}
    for kind in run.endpoints:
        for committer in committers:
            label = f"{committer} ({kind})"
            style = {
                "marker": "o",
                "linestyle": styles.get(kind, ":"),
                "color": colors[committer],
                "label": label,
            }
            points = sorted(
                run.of(
                    "commit_scaling", endpoint=kind, committer=committer, threads=COMMIT_THREADS
                ),
                key=lambda r: r.labels["files"],
            )
            if points:
                files = [r.labels["files"] for r in points]
                by_files.plot(files, [r.median("job_commit_s") for r in points], **style)
                traced = [r for r in points if "driver_heap_peak_mib" in r.metrics]
                if traced:
                    heap.plot(
                        [r.labels["files"] for r in traced],
                        [r.median("driver_heap_peak_mib") for r in traced],
                        **style,
                    )
            points = sorted(
                run.of("commit_scaling", endpoint=kind, committer=committer, files=threaded),
                key=lambda r: r.labels["threads"],
            )
            if len(points) > 1:
                by_threads.plot(
                    [r.labels["threads"] for r in points],
                    [r.median("job_commit_s") for r in points],
                    **style,
                )
    by_files.set(
        xscale="log",
        yscale="log",
        xlabel="files",
        ylabel="job commit s (median)",
        title=f"job commit vs files, {COMMIT_THREADS} threads",
    )
    by_threads.set(
        xlabel="threads", ylabel="job commit s (median)", title=f"vs threads, {threaded:,} files"
    )
    heap.set(
        xscale="log",
        xlabel="files",
        ylabel="driver Python heap peak MiB",
        title="driver memory vs files",
    )
    for ax in (by_files, by_threads, heap):
        ax.legend(fontsize=7)
    return fig


def _fanout_chart(run: Run, plt):
    """Per endpoint, each case's completions/s as bars and the law's prediction as marks."""
    kinds = [k for k in run.endpoints if run.of(fanout.SCENARIO, endpoint=k)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(7 * len(kinds), 4.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        records = run.of(fanout.SCENARIO, endpoint=kind)
        names = [fanout.case_name(r) for r in records]
        ax.bar(names, [r.median("completions_per_s") for r in records], color=_color(kind))
        predicted = [r.median("law_predicted_per_s") for r in records]
        ax.plot(names, predicted, "k_", markersize=18, mew=2, linestyle="", label="law")
        ax.set(ylabel="completions/s", title=f"{kind}: fanned-out completion, simulated")
        ax.tick_params(axis="x", rotation=45)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        ax.legend(fontsize=7)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Render the report of a run's JSON again (targets evaluated anew), next to the JSON."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("results", type=Path, help="a run's JSON, e.g. bench/reports/<stamp>.json")
    args = parser.parse_args(argv)
    run = Run.from_json(json.loads(args.results.read_text()))
    run.targets = evaluate(run)
    stem = args.results.stem
    text = markdown(run, charts(run, args.results.parent, stem))
    args.results.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
