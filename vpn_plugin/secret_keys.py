"""The secret key of a cache folder: the observation cache (``datasets.planning_dataset``) and
the LLM reply cache (``baselines.llm.backends``) key their checksums with it, so an edited cache
entry cannot carry a recomputed checksum. Standard library only (the LLM backends module is
also loaded on its own, without MMAction2)."""
from __future__ import annotations

import os
import secrets
import threading
from pathlib import Path


def read_or_make_secret(path: Path, what: str, forged: str, consequence: str) -> bytes:
    """The secret key at ``path`` of a cache in ``path``'s folder (32 random bytes, hex, mode
    0600; made on first use: written to a private temporary file, linked into place so that
    concurrent first runs agree on one key). Keyed checksums made with it cannot be recomputed
    by whoever edits the cache without the key. ``what`` names the key in messages (e.g. 'the
    LLM cache key'), ``forged`` what a leaked key lets one forge, ``consequence`` what deleting
    it costs."""
    path = Path(path)
    if not path.exists():
        Path(os.path.realpath(path.parent)).mkdir(parents=True, exist_ok=True)  # a dangling
        # link to a folder: made at its target (as convert_features' --dst)
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
    secret = path.read_bytes().decode('ascii', errors='replace').strip()  # any bytes: named
    if len(secret) != 64 or any(c not in '0123456789abcdef' for c in secret):
        raise ValueError(f'{what} {path} is not a key this tool wrote (64 hex digits); delete '
                         f'it: a new key is made and {consequence}')
    return bytes.fromhex(secret)
