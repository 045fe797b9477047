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
checksums keyed with the cache folder's secret (read_or_make_secret), so an edited memo or cache
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
                 secret: Optional[bytes] = None) -> List[str]:
    """SHA-256 (hex) of each file of ``paths`` (:data:`MISSING` for an absent one), from the
    ``memo`` file where the stat record is unchanged (module docstring), which is updated;
    with ``secret`` (the cache's key, :func:`read_or_make_secret`) a memo entry is used only
    with its keyed checksum (:func:`entry_mac`), so an edited memo costs a re-hash."""
    remembered, digests, changed = read_memo(memo), [], False
    for path in map(Path, paths):
        try:
            status = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
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
        digest = sha256_of(path)
        if _stamp(os.stat(path)) == before:  # not rewritten while it was read
            mac = [] if secret is None else [entry_mac(secret, key, before, digest)]
            remembered[key], changed = before + [digest] + mac, True
        digests.append(digest)
    if changed and memo:
        _write_memo(Path(memo), remembered)
    return digests


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


def read_or_make_secret(path: Path, what: str, forged: str, consequence: str) -> bytes:
    """The secret key at ``path`` of a cache in ``path``'s folder (32 random bytes, hex, mode
    0600; made on first use: written to a private temporary file, linked into place so that
    concurrent first runs agree on one key). Keyed checksums made with it cannot be recomputed
    by whoever edits the cache without the key. (The LLM reply cache, baselines/llm/backends.py,
    keeps its own copy of these checks: that module is imported standalone, stdlib + openai.) ``what`` names the key in messages (e.g. 'the
    LLM cache key'), ``forged`` what a leaked key lets one forge, ``consequence`` what deleting
    it costs."""
    import secrets
    import threading
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f'{path.name}.{os.getpid()}.{threading.get_ident()}.partial')
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, 'w') as handle:
            handle.write(secrets.token_hex(32))
        try:
            os.link(temporary, path)  # never replaces a key another run made meanwhile
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    if not path.is_file():
        raise ValueError(f'{what} {path} is not a file; expected the secret key this cache was '
                         'made with (or no such path: a new key is made)')
    status = path.stat()
    mode = status.st_mode & 0o777
    # a key of another user than this one and the folder's owner (NFS root_squash gives
    # root's files to nobody, the folder's too) was put there by someone who can forge
    if os.name == 'posix' and status.st_uid not in (os.geteuid(), path.parent.stat().st_uid):
        raise PermissionError(f'{what} {path} belongs to user id {status.st_uid}, not to this '
                              f'user ({os.geteuid()}) nor to the owner of the folder: whoever '
                              f'wrote it can forge {forged}; expected a key this user made '
                              f'(delete it: a new key is made and {consequence})')
    if os.name == 'posix' and mode & 0o077:
        raise PermissionError(f'{what} {path} has mode {mode:04o}: others could read it and '
                              f'forge {forged}; expected 0600 (chmod 600 {path}, or delete it: '
                              f'{consequence})')
    secret = path.read_text().strip()
    if len(secret) != 64 or any(c not in '0123456789abcdef' for c in secret):
        raise ValueError(f'{what} {path} is not a key this tool wrote (64 hex digits); delete '
                         f'it: a new key is made and {consequence}')
    return bytes.fromhex(secret)
