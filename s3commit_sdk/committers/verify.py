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

import posixpath
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import checksums
from ..errors import CommitError
from ..formats import PendingUpload
from ..store import S3Store
from ..store.s3 import ObjectInfo, RequestCounters, multipart_etag

PAGE = 1000


@dataclass(frozen=True)
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
    """ETag of each upload's object by upload id; CommitError for one that is not ours."""
    by_dir: dict[str, list[Completed]] = defaultdict(list)
    for done in files:
        by_dir[posixpath.dirname(done.commit.destinationKey)].append(done)
    found: dict[str, str] = {}

    def check_dir(group: list[Completed]) -> list[Completed]:
        if len(group) < 2 or any(done.commit.checksums for done in group):
            return group
        listed = _listed(store, group)
        rest = []
        for done in group:
            info = listed.get(done.commit.destinationKey)
            if info is None:
                rest.append(done)
            else:
                found[done.commit.uploadId] = _checked(done, info)
                checks.add("listed")
        return rest

    def head(done: Completed) -> None:
        info = store.head(done.commit.bucket, done.commit.destinationKey)
        found[done.commit.uploadId] = _checked(done, info)
        checks.add("headed")

    with ThreadPoolExecutor(threads, "s3commit-verify") as pool:
        rest = [d for group in pool.map(check_dir, by_dir.values()) for d in group]
        list(pool.map(head, rest))
    return found


def _listed(store: S3Store, group: list[Completed]) -> dict[str, ObjectInfo]:
    """The group's keys as one directory listing shows them, within a page budget."""
    keys = {d.commit.destinationKey for d in group}
    first = min(keys)
    prefix = posixpath.dirname(first) + "/"
    budget = len(keys) // PAGE + 2  # pages: never more requests than the HEADs it saves
    listed: dict[str, ObjectInfo] = {}
    for seen, info in enumerate(store.list_objects(group[0].commit.bucket, prefix, first[:-1])):
        if info.key in keys:
            listed[info.key] = info
            if len(listed) == len(keys):
                break
        if seen + 1 >= budget * PAGE:
            break
    return listed


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
