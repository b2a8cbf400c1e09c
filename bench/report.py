"""A finished run as a markdown report with PNG charts, and the targets as met / not met."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .harness import Record, Run, Target

ZERO_RENAME = ("directory", "partitioned", "magic")
#: requests every job makes once, and every task once (README, "S3 requests")
JOB_REQUESTS = 11
TASK_REQUESTS = 2


def cell(record: Record, metric: str, digits: int = 2) -> str:
    found = record.metrics.get(metric)
    if not found:
        return "-"
    return f"{found['median']:.{digits}f} [{found['min']:.{digits}f}-{found['max']:.{digits}f}]"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows]


# -- targets -----------------------------------------------------------------------------------
def evaluate(run: Run) -> list[Target]:
    return [
        _near_direct(run),
        _commit_10k(run),
        _requests_and_copies(run),
        _magic_rss(run),
        _store_fraction(run),
    ]


def _near_direct(run: Run) -> Target:
    ratios = []
    for direct in run.of("end_to_end", writer="direct (unsafe)"):
        labels = direct.labels
        if labels["size_mib"] < 1024:
            continue
        for name in ZERO_RENAME:
            for ours in run.of("end_to_end", **{**labels, "writer": name}):
                ratio = ours.median("seconds") / direct.median("seconds")
                part = "partitioned" if labels["partitioned"] else "flat"
                ratios.append((ratio, f"{name} {labels['size_mib']} MiB {part}: {ratio:.2f}x"))
    return _target(
        "directory, partitioned, magic within 1.10x of direct write at >= 1 GiB",
        ratios,
        lambda r: r <= 1.10,
    )


def _commit_10k(run: Run) -> Target:
    found, limit = [], ""
    for r in run.of("commit_scaling", files=10_000, threads=32):
        text = f"{r.labels['committer']}: {r.median('job_commit_s'):.2f} s"
        if r.labels["committer"] in ZERO_RENAME:
            found.append((r.median("job_commit_s"), text))
        else:
            limit = f" (the endpoint's own limit, {text})"
    target = _target(
        "job commit of 10,000 files under 10 s with 32 threads", found, lambda s: s < 10
    )
    target.measured += limit
    return target


def _requests_and_copies(run: Run) -> Target:
    found = []
    for record in run.of("requests"):
        if record.labels["writer"] not in ZERO_RENAME:
            continue
        notes = record.notes
        counts, files, tasks = notes["requests"], notes["files"], notes["tasks"]
        allowed = counts.get("UploadPart", 0) + 2 * files + TASK_REQUESTS * tasks + JOB_REQUESTS
        total = sum(counts.values())
        ok = notes["copied_bytes"] == 0 and total <= allowed
        found.append(
            (
                ok,
                f"{record.labels['writer']}: {notes['copied_bytes']} B copied, "
                f"{total} requests for {files} files (bound {allowed})",
            )
        )
    return _target(
        "zero bytes copied; at most 2 + parts requests per file plus a per-task constant",
        found,
        bool,
    )


def _magic_rss(run: Run) -> Target:
    magic = sorted(run.of("memory", committer="magic"), key=lambda r: r.labels["size_mib"])
    if len(magic) < 2:
        return Target("magic worker RSS independent of file size (within 10%)", None, "not run")
    small, large = magic[0], magic[-1]
    ratio = large.median("peak_rss_mib") / small.median("peak_rss_mib")
    text = (
        f"{small.labels['size_mib']} MiB: {small.median('peak_rss_mib'):.0f} MiB RSS, "
        f"{large.labels['size_mib']} MiB: {large.median('peak_rss_mib'):.0f} MiB RSS "
        f"({ratio:.2f}x)"
    )
    return Target("magic worker RSS independent of file size (within 10%)", ratio <= 1.10, text)


def _store_fraction(run: Run) -> Target:
    limits = {r.labels["size_mib"]: r for r in run.of("store_limit")}
    top = max(limits, default=None)
    found = []
    if top is not None:
        for name in ZERO_RENAME:
            for ours in run.of("end_to_end", writer=name, size_mib=top, partitioned=False):
                share = ours.median("mib_per_s") / limits[top].median("mib_per_s")
                found.append((share, f"{name} at {top} MiB: {share:.0%} of raw upload"))
    name = f"end-to-end throughput >= 70% of the raw upload limit (at {top or '?'} MiB)"
    return _target(name, found, lambda share: share >= 0.70)


def _target(name: str, found: list, test: Callable) -> Target:
    if not found:
        return Target(name, None, "not measured in this run")
    return Target(name, all(test(value) for value, _ in found), "; ".join(t for _, t in found))


# -- report ------------------------------------------------------------------------------------
def markdown(run: Run, charts: list[str]) -> str:
    m = run.to_json()["machine"]
    lines = [
        f"# s3commit benchmark ({run.mode} run)",
        "",
        f"Machine: {m['cpus']} cores, {m['memory_gib']} GiB RAM, Python {m['python']}, "
        f"PySpark {m['pyspark']}, pyarrow {m['pyarrow']}. Store: moto server on 127.0.0.1 "
        "(objects in memory; multipart completion copies the parts, unlike S3). Spark local[2]. "
        "Every figure: median [min-max] of the repetitions (n in the JSON).",
        "",
        "## Targets",
        "",
        *table(
            ["target", "result", "measured"],
            [[t.name, _verdict(t.met), t.measured] for t in run.targets],
        ),
    ]
    for title, scenario, columns in SECTIONS:
        records = run.of(scenario)
        if not records:
            continue
        labels = list(records[0].labels)
        rows = [[str(r.labels[k]) for k in labels] + [f(r) for _, f in columns] for r in records]
        lines += ["", f"## {title}", "", *table(labels + [c for c, _ in columns], rows)]
    lines += ["", "## Charts", ""] + [f"![{c}]({c})" for c in charts]
    return "\n".join(lines) + "\n"


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**not met**", None: "not measured"}[met]


def _per_file(record: Record) -> str:
    per = record.notes["requests_per_file"]
    return ", ".join(f"{op} {n:g}" for op, n in sorted(per.items()))


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
            ("files", lambda r: str(r.notes["files"])),
        ],
    ),
    (
        "2. Job commit by file count and threads (small files)",
        "commit_scaling",
        [
            ("job commit s", lambda r: cell(r, "job_commit_s", 3)),
            ("driver heap peak MiB", lambda r: cell(r, "driver_heap_peak_mib", 1)),
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
            ("copied MiB", lambda r: f"{r.notes['copied_bytes'] / 2**20:.1f}"),
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
        "5. The store's limit: raw boto3 multipart uploads, same concurrency",
        "store_limit",
        [("s", lambda r: cell(r, "seconds")), ("MiB/s", lambda r: cell(r, "mib_per_s", 1))],
    ),
    (
        "6. Python peers: partitioned overwrite of the same pandas data (in-process)",
        "peers",
        [
            ("s", lambda r: cell(r, "seconds")),
            ("MiB/s", lambda r: cell(r, "mib_per_s", 1)),
            ("protocol", lambda r: r.notes.get("protocol", r.notes.get("error", ""))),
        ],
    ),
    (
        "7. EMULATED S3 latency and copy bandwidth (through the proxy)",
        "latency",
        [
            ("total s", lambda r: cell(r, "seconds")),
            ("job commit s", lambda r: cell(r, "job_commit_s")),
            ("copied MiB", lambda r: f"{r.notes['copied_bytes'] / 2**20:.1f}"),
        ],
    ),
]


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

    e2e = run.of("end_to_end")
    if e2e:
        cases = sorted({(r.labels["size_mib"], r.labels["partitioned"]) for r in e2e})
        fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4), squeeze=False)
        for ax, (size, partitioned) in zip(axes[0], cases, strict=True):
            records = run.of("end_to_end", size_mib=size, partitioned=partitioned)
            names = [r.labels["writer"] for r in records]
            bottom = [0.0] * len(records)
            for phase in ("task_write_s", "task_commit_s", "job_commit_s"):
                values = [r.metrics.get(phase, {}).get("median", 0.0) for r in records]
                ax.bar(names, values, bottom=bottom, label=phase.removesuffix("_s"))
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
            ax.set_title(f"{size} MiB, {'partitioned' if partitioned else 'not partitioned'}")
            ax.set_ylabel("seconds (median)")
            ax.tick_params(axis="x", rotation=45)
        axes[0][0].legend()
        save(fig, "end-to-end")
    scaling = run.of("commit_scaling")
    if scaling:
        fig, ax = plt.subplots(figsize=(6, 4))
        for committer in sorted({r.labels["committer"] for r in scaling}):
            for threads in sorted({r.labels["threads"] for r in scaling}):
                points = run.of("commit_scaling", committer=committer, threads=threads)
                xs = [r.labels["files"] for r in points]
                ax.plot(
                    xs,
                    [r.median("job_commit_s") for r in points],
                    "o-",
                    label=f"{committer}, {threads} threads",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files")
        ax.set_ylabel("job commit seconds (median)")
        ax.legend(fontsize=7)
        save(fig, "commit-scaling")
    simple = [
        (
            "memory",
            "peak_rss_mib",
            "peak RSS MiB",
            lambda r: f"{r.labels['committer']} {r.labels['size_mib']} MiB",
        ),
        ("peers", "seconds", "seconds", lambda r: r.labels["tool"]),
        ("latency", "seconds", "seconds (emulated latency)", lambda r: r.labels["writer"]),
    ]
    for scenario, metric, unit, label in simple:
        records = [r for r in run.of(scenario) if metric in r.metrics]
        if not records:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.bar([label(r) for r in records], [r.median(metric) for r in records])
        ax.set_ylabel(unit)
        ax.set_title(scenario)
        ax.tick_params(axis="x", rotation=45)
        save(fig, scenario)
    return made
