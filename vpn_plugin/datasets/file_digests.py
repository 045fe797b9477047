"""Content digests of input files, remembered across runs: the observation cache's key.

``file_digests(paths, memo)`` is the SHA-256 of each file's bytes. Hashing every feature file
at every start would cost seconds (CrossTask's 1.3 GB of synthetic features: docs/speed.md),
so each digest is remembered in the ``memo`` JSON file (``{absolute path: [device, inode,
size, mtime_ns, ctime_ns, digest]}``) and re-used while the file's stat record is unchanged.
The ctime is what makes this safe: a file rewritten with the same size and its mtime restored
(``touch -r``, ``cp -p``, ``rsync -a``) has a new ctime (or a new inode), and no user call can
set a ctime back; the file is then read and hashed again. An edited or damaged memo can only
cost a re-hash (a wrong digest misses the cache, it never matches another content).

Pure Python (standard library only). The memo entries and the observation cache files carry
checksums keyed with the cache folder's secret (``vpn_plugin.secret_keys``), so an edited memo or cache
file is re-hashed or rebuilt, never used.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Iterable, List, Optional

MISSING = 'missing'  # the digest of a path with no file
NOT_A_FILE = 'not a regular file'  # the digest of a folder, FIFO or device


def sha256_of(path) -> str:
    with open(path, 'rb') as handle:
        return hashlib.file_digest(handle, 'sha256').hexdigest()


def _stamp(stat) -> list:
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def read_memo(memo: Optional[Path]) -> dict:
    """The remembered digests (``{}`` when absent or unreadable: they are hashed again)."""
    try:
        entries = json.loads(Path(memo).read_text()) if memo else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return entries if isinstance(entries, dict) else {}


def entry_mac(secret: bytes, key: str, stamp: list, digest: str) -> str:
    """The keyed checksum of one memo entry: an entry edited without the key (a digest put back
    on a changed file's new stat record) does not match it."""
    import hmac
    blob = json.dumps([key, stamp, digest]).encode()
    return hmac.new(secret, blob, hashlib.sha256).hexdigest()


def file_digests(paths: Iterable, memo: Optional[Path] = None,
                 secret: Optional[bytes] = None, digest_of=None) -> List[str]:
    """SHA-256 (hex) of each file of ``paths`` (:data:`MISSING` for an absent one), from the
    ``memo`` file where the stat record is unchanged (module docstring), which is updated;
    with ``secret`` (the cache's key, ``vpn_plugin.secret_keys.read_or_make_secret``) a memo entry is used only
    with its keyed checksum (:func:`entry_mac`), so an edited memo costs a re-hash.
    ``digest_of``: another digest of a file than :func:`sha256_of` (a memo file of its own:
    one memo per digest)."""
    remembered, digests, changed = read_memo(memo), [], False
    for path in map(Path, paths):
        try:
            status = os.stat(path)
        except OSError:  # no file, or a link loop (ELOOP): its reader names it
            digests.append(MISSING)
            continue
        if not stat.S_ISREG(status.st_mode):  # a folder, FIFO or device: its reader names it
            digests.append(NOT_A_FILE)
            continue
        before = _stamp(status)
        key = os.path.abspath(path)
        entry = remembered.get(key)
        size = 6 if secret is None else 7
        if isinstance(entry, list) and len(entry) == size and entry[:5] == before and (
                secret is None or entry[6] == entry_mac(secret, key, before, str(entry[5]))):
            digests.append(entry[5])
            continue
        digest = (digest_of or sha256_of)(path)
        if _stamp(os.stat(path)) == before:  # not rewritten while it was read
            mac = [] if secret is None else [entry_mac(secret, key, before, digest)]
            remembered[key], changed = before + [digest] + mac, True
        digests.append(digest)
    if changed and memo:
        _write_memo(Path(memo), remembered)
    return digests


def folder_digest(folder: Path, files: List[Path], memo: Optional[Path] = None,
                  secret: Optional[bytes] = None) -> str:
    """16 hex digits of the SHA-256 of ``files`` of ``folder`` as a listing (each one's name
    relative to ``folder`` and :func:`file_digests` of its bytes, ``memo`` / ``secret`` as
    there): what a model folder holds now, not its name or its files' time stamps."""
    digests = file_digests(files, memo=memo, secret=secret)
    listing = [[str(Path(p).relative_to(folder)), d] for p, d in zip(files, digests)]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]


def _write_memo(memo: Path, entries: dict) -> None:
    """Atomically (concurrent runs lose at most their own entries: a re-hash later)."""
    temporary = memo.with_name(f'.{memo.name}.{os.getpid()}.tmp')
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(entries))
        os.replace(temporary, memo)
    except OSError:  # the cache's own write reports an unwritable folder
        with contextlib.suppress(OSError):
            temporary.unlink()
