"""Checking completed uploads against what the tasks uploaded, at the fewest requests.

A completion's answer is not proof: Ceph RGW answers every completion with an empty ETag, a
gateway may answer with a wrong one, and a retried completion may be told its upload is gone
when its first attempt had landed. Such files (and every file with ``validate.output``) are
checked by size and multipart ETag. One listing returns up to 1000 keys with both, so a
directory holding several files to check is listed (from just before its first such key, with a
page budget that keeps the listing cheaper than the HEADs it replaces); what the listing did not
reach, or a directory with a single file, gets a HEAD.

With ``checksum.algorithm`` every file gets a HEAD (``ChecksumMode=ENABLED``; a listing shows no
checksum values): the checksum the store keeps must be the composite one of the part checksums
the tasks computed from their bytes (:func:`..checksums.composite`), so a part damaged on its
way, by a store that does not check part checksums, is found before the job commits.
"""

from __future__ import annotations

import itertools
import posixpath
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import checksums
from ..errors import CommitError
from ..formats import PendingUpload
from ..store import S3Store
from ..store.s3 import ObjectInfo, RequestCounters, multipart_etag

PAGE = 1000
#: pages one run of files may list: other objects between its keys cost the second
PAGES_PER_RUN = 2


@dataclass(frozen=True, slots=True)
class Completed:
    """A completion that was applied, with what its answer said (None: no answer to trust)."""

    commit: PendingUpload
    answer: str | None

    @property
    def expected(self) -> str | None:
        return multipart_etag(self.commit.etags)

    @property
    def trusted(self) -> bool:
        """The answer proves the object (a checksummed one needs its stored checksum: HEAD)."""
        return bool(self.answer) and _same(self.expected, self.answer) and not self.commit.checksums


def verify(
    store: S3Store, files: list[Completed], threads: int, checks: RequestCounters
) -> dict[str, str]:
    """ETag of each upload's object by upload id; CommitError for one that is not ours.

    A directory's files are checked in runs of up to a page of consecutive keys, each run by
    its own listing, in parallel: 100,000 files in one directory are 100 listings at once, not
    100 pages one after the other.
    """
    by_dir: dict[str, list[Completed]] = defaultdict(list)
    for done in files:
        by_dir[posixpath.dirname(done.commit.destinationKey)].append(done)
    runs = []
    for group in by_dir.values():
        group.sort(key=lambda done: done.commit.destinationKey)
        runs += [group[start : start + PAGE] for start in range(0, len(group), PAGE)]
    found: dict[str, str] = {}

    def check_run(run: list[Completed]) -> list[Completed]:
        """Checks what one listing shows as it goes; returns the files it did not reach."""
        if len(run) < 2 or any(done.commit.checksums for done in run):
            return run
        unseen = {done.commit.destinationKey: done for done in run}
        last = run[-1].commit.destinationKey
        for info in _listing(store, run):
            done = unseen.pop(info.key, None)
            if done is not None:
                found[done.commit.uploadId] = _checked(done, info)
                checks.add("listed")
            if not unseen or info.key >= last:
                break
        return list(unseen.values())

    def head(done: Completed) -> None:
        info = store.head(done.commit.bucket, done.commit.destinationKey)
        found[done.commit.uploadId] = _checked(done, info)
        checks.add("headed")

    with ThreadPoolExecutor(threads, "s3commit-verify") as pool:
        rest = [d for run in pool.map(check_run, runs) for d in run]
        list(pool.map(head, rest))
    return found


def _listing(store: S3Store, run: list[Completed]) -> Iterator[ObjectInfo]:
    """The run's directory as one listing shows it, from just before its first key, within
    a budget of pages that keeps it cheaper than the HEADs it replaces."""
    first = run[0].commit.destinationKey
    prefix = posixpath.dirname(first) + "/"
    listed = store.list_objects(run[0].commit.bucket, prefix, first[:-1])
    yield from itertools.islice(listed, PAGES_PER_RUN * PAGE)


def holds_upload(commit: PendingUpload, info: ObjectInfo | None) -> bool:
    """The object ``info`` describes is the one ``commit``'s upload produced: its size, its
    multipart ETag where the parts' ETags are known, and its checksum where the parts' checksums
    and the stored one are known. Job commit, recover and abort judge alike."""
    return (
        info is not None
        and info.size == commit.length
        and _same(multipart_etag(commit.etags), info.etag)
        and checksums.matches(expected_checksum(commit), info.checksum)
    )


def expected_checksum(commit: PendingUpload) -> str | None:
    """The object checksum the upload's part checksums make (None: no checksums, or an
    algorithm whose object checksum S3 combines itself)."""
    if not commit.checksumAlgorithm:
        return None
    return checksums.composite(commit.checksumAlgorithm, commit.checksums)


def _checked(done: Completed, info: ObjectInfo | None) -> str:
    commit, expected = done.commit, done.expected
    if not holds_upload(commit, info):
        found = "missing" if info is None else f"size {info.size}, ETag {info.etag}"
        wanted = f"size {commit.length}, ETag {expected or 'unknown'}"
        if info is not None and commit.checksumAlgorithm:
            found += f", {commit.checksumAlgorithm} {info.checksum}"
            wanted += f", {commit.checksumAlgorithm} {expected_checksum(commit)}"
        raise CommitError(
            f"{commit.destinationKey!r} is not what the task uploaded after completion: "
            f"{found}; expected {wanted} (the completion answered {done.answer!r})"
        )
    return info.etag


def _same(expected: str | None, etag: str | None) -> bool:
    """ETags compare without their quotes (RGW leaves them off in some answers)."""
    return expected is None or (etag or "").strip('"') == expected.strip('"')
