"""Chat backends behind one interface: ``backend.complete(messages) -> ChatReply``.

``OpenAIChatBackend`` talks to any OpenAI-compatible endpoint (OpenAI, Gemini's
compatible endpoint, vLLM, Ollama) with bounded retries and an on-disk cache;
``TransformersChatBackend`` runs a local chat model.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CHECKSUM_KIND = 'hmac-sha256'  # of a cache entry (ResponseCache)
RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


@dataclass
class ChatReply:
    """A completion; ``truncated``: it stopped at the token limit (``finish_reason``
    "length": never cached); ``usage_reported``: the endpoint sent token counts (else they
    are counted 0 and the run's ``replies_without_usage`` says how many are unknown)."""
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    truncated: bool = False
    usage_reported: bool = True
    served_model: str = ''  # the model the response says answered ('' not said)


class MalformedReplyError(ValueError):
    """A reply that is not a usable chat completion: no choices, ``content`` null or empty,
    token counts that are not counts (``checked_reply``); a request failure, never cached."""


def checked_reply(text, prompt_tokens, completion_tokens, cached: bool = False) -> ChatReply:
    """A :class:`ChatReply` after checking it is usable: ``text`` a non-empty string, token
    counts integers >= 0 (``None`` = not reported = 0); else ``MalformedReplyError``."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedReplyError(f'the reply\'s message content is {text!r}; expected the '
                                  'completion text')
    counts = []
    for name, value in (('prompt_tokens', prompt_tokens),
                        ('completion_tokens', completion_tokens)):
        value = 0 if value is None else value
        if isinstance(value, float) and value.is_integer():  # 100.0: the count 100 in JSON
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MalformedReplyError(f'the reply\'s usage.{name} is {value!r}; expected a '
                                      'token count (an integer >= 0)')
        counts.append(value)
    return ChatReply(text, *counts, cached=cached)


def _raw_usage(raw) -> dict:
    """The ``usage`` object of a raw completion response's JSON body ({} when it has none)."""
    body = json.loads(raw.http_response.text)
    usage = body.get('usage') if isinstance(body, dict) else None
    return usage if isinstance(usage, dict) else {}


class RequestFailedError(RuntimeError):
    """The endpoint did not answer successfully within the retry budget.

    ``kind`` names the cause for the failure counts of a run: ``connection`` (refused, DNS,
    reset), ``timeout``, ``http_<status>`` or ``malformed_response``.
    """

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def _warn(message: str) -> None:
    """A line on stderr that a progress bar in flight does not swallow (tqdm's write)."""
    from tqdm import tqdm
    tqdm.write(message, file=sys.stderr)


class ResponseCache:
    """One JSON file per request under ``root``, keyed by a hash of everything that changes a
    reply: the endpoint (base URL, :func:`cache_endpoint`, or the local model),
    model, messages and sampling params.

    Entries are written atomically (temp file + rename) and only for replies that passed
    :func:`checked_reply`, so an interrupted run leaves only complete entries and a rerun pays
    only for the requests that are missing. An entry that does not read back as a valid reply
    (a damaged disk, another version's format) is named on stderr, deleted and asked again.
    Each entry records its request (:meth:`request_record`: endpoint, model, settings, hash of
    the prompt), its key and a keyed checksum (HMAC-SHA256) of the reply bound to its key and
    request: an entry copied under another key, whose reply was edited after it was written,
    or written without the cache's secret key (by hand, another cache, an older version), is
    named, deleted and asked again too. ``locked(key)`` serialises the runs (processes) that
    share the cache on one key (``<key>.lock`` beside the entry,
    ``vpn_plugin.locks.exclusive_lock``).

    Threat model of the keyed checksum: the secret key (:data:`KEY_FILE`, 32 random bytes made
    with the cache, mode 0600) is readable by its owner only. Whoever can write the cache
    folder but not read the key (a group-writable shared cache, a cache unpacked or synced
    from elsewhere without its key, a hand edit that recomputes a published checksum formula)
    cannot make an entry that is served: the served replies are those this user's runs
    received. It does not protect against the key's owner or root, who can also edit the code.
    A key file readable or writable by others is refused (its entries could be forged).
    """

    KEY_FILE = '.cache_key'  # the secret of the entries' checksums, beside the entry folders

    def __init__(self, root: str | Path):
        from vpn_plugin.errors import check_folder_target
        self.root = Path(root).expanduser()  # '~/x' quoted (as config paths and --model read it)
        check_folder_target(self.root, 'reply cache', 'the cached replies', '--cache-dir',
                            writable=False)  # a read-only cache of earlier replies serves
        self._check_is_a_cache()
        self.root.mkdir(parents=True, exist_ok=True)
        self._secret = self._read_or_make_secret()

    def _check_is_a_cache(self) -> None:
        """An existing folder without the cache's key holds only entry folders (``<2 hex>/``,
        a cache of an older version): ``--cache-dir`` pointed at a dataset or work folder
        would scatter the key and entry folders among its files."""
        import re
        if not self.root.is_dir():
            return
        files = sorted(p.name for p in self.root.iterdir()
                       if re.fullmatch(r'[0-9a-f]{2}', p.name) and not p.is_dir())
        if files:  # an entry would be written into it: the run would stop after paying
            raise ValueError(f'--cache-dir {self.root}: {files[0]} is a file, where the cache '
                             f'keeps its entry folder {files[0]}/ ({len(files)} such file(s)); '
                             'expected folders of cache entries: move the file out')
        if (self.root / self.KEY_FILE).exists():
            return
        foreign = sorted(p.name for p in self.root.iterdir()
                         if not (p.is_dir() and re.fullmatch(r'[0-9a-f]{2}', p.name)))
        if foreign:
            raise ValueError(f'--cache-dir {self.root} holds {foreign[:3]}'
                             f'{" ..." if len(foreign) > 3 else ""} and is no reply cache (no '
                             f'{self.KEY_FILE}; a cache holds it and <2 hex digits>/ entry '
                             'folders): give a new or empty folder for the cached replies')

    def _read_or_make_secret(self) -> bytes:
        """The cache's secret key (``vpn_plugin.secret_keys``: made on first use)."""
        from vpn_plugin.secret_keys import read_or_make_secret
        return read_or_make_secret(self.root / self.KEY_FILE, 'the LLM cache key',
                                   'cache entries', 'the entries are asked again')

    @staticmethod
    def key(endpoint: str, model: str, messages: list, params: dict) -> str:
        blob = json.dumps({'endpoint': endpoint, 'model': model, 'messages': messages,
                           'params': params}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode('utf-8')).hexdigest()

    @staticmethod
    def request_record(endpoint: str, model: str, messages: list, params: dict) -> dict:
        """What an entry records of its request: who answers, the settings and the prompt's
        hash (the messages themselves stay out of the entry)."""
        prompt = json.dumps(messages, sort_keys=True, ensure_ascii=False).encode('utf-8')
        return json.loads(json.dumps({'endpoint': endpoint, 'model': model, 'params': params,
                                      'prompt_sha256': hashlib.sha256(prompt).hexdigest()},
                                     sort_keys=True))

    def checksum(self, key: str, request: dict, text: str, prompt_tokens,
                 completion_tokens, usage_reported: bool = True, served_model: str = '') -> str:
        """HMAC-SHA256, with the cache's secret key, of the reply bound to its request. A reply
        whose endpoint sent no token counts (``usage_reported`` False) signs that too, so that
        neither a true nor a false "no usage reported" can be written in by hand (the entries
        of replies with usage sign what they signed before)."""
        import hmac
        fields = [key, request, text, prompt_tokens, completion_tokens]
        if not usage_reported:
            fields.append({'usage_reported': False})
        if served_model:  # the model the endpoint named (entries without one sign as before)
            fields.append({'served_model': served_model})
        blob = json.dumps(fields, ensure_ascii=False, sort_keys=True)
        return hmac.new(self._secret, blob.encode('utf-8'), hashlib.sha256).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f'{key}.json'

    def holds(self, key: str) -> bool:
        """Whether an entry (of any content, even a damaged one) stands at ``key``'s path."""
        path = self._path(key)
        return path.exists() or path.is_symlink()

    def get(self, key: str, request: dict | None = None) -> ChatReply | None:
        """The cached reply of ``key`` (sent as ``request``, :meth:`request_record`);
        ``None`` when absent, corrupt or not this request's (then named and discarded)."""
        path = self._path(key)
        if path.is_dir() and not path.is_symlink():  # os.replace could never write it
            raise IsADirectoryError(f'reply cache entry {path} is a folder; expected a JSON '
                                    'file written by this cache (remove the folder: the request '
                                    'is sent again)')
        from vpn_plugin.errors import link_problem
        broken = link_problem(path)
        if not path.is_file() and not broken:
            return None
        try:
            entry = json.loads(path.read_text(encoding='utf-8'))
            reply = checked_reply(entry['text'], entry['prompt_tokens'],
                                  entry['completion_tokens'], cached=True)
            reply.usage_reported = entry.get('usage_reported', True)
            reply.served_model = entry.get('served_model', '')
            problem = self._mismatch(entry, key, request)
        except (ValueError, KeyError, TypeError) as err:  # JSON, fields, checked_reply
            problem = repr(err)
        except FileNotFoundError:  # counted as discarded by the caller: named, as any other
            problem = f'it is {broken or "gone (removed while it was read)"}'
        if problem is None:
            return reply
        path.unlink(missing_ok=True)
        _warn(f'warning: discarded the corrupt cache entry {path} ({problem}); the request is '
              'sent again')
        return None

    def _mismatch(self, entry: dict, key: str, request: dict | None) -> str | None:
        """Why ``entry`` is not the reply to ``key`` / ``request``; None when it is."""
        if 'key' not in entry or 'request' not in entry or 'checksum' not in entry:
            return ('it records no request key or checksum (written by an older version, or '
                    'by hand)')
        if entry.get('checksum_kind') != CHECKSUM_KIND:
            return ('its checksum is not keyed with this cache\'s secret key (written by an '
                    'older version, or by hand)')
        if not isinstance(entry.get('served_model', ''), str):
            return (f'its served_model is {entry["served_model"]!r}; expected a model name '
                    '(written by hand)')
        if not isinstance(entry.get('usage_reported', True), bool):
            return (f'its usage_reported is {entry["usage_reported"]!r}; expected true or false '
                    '(written by hand)')
        if entry['key'] != key:
            return f'it holds the reply to another request (key {str(entry["key"])[:12]}...)'
        if request is not None and entry['request'] != request:
            fields = sorted(k for k in set(request) | set(entry['request'])
                            if request.get(k) != entry['request'].get(k))
            return f'it was answered for another request: {", ".join(fields)} differ'
        import hmac
        expected = self.checksum(key, entry['request'], entry['text'], entry['prompt_tokens'],
                                 entry['completion_tokens'], entry.get('usage_reported', True),
                                 entry.get('served_model', ''))
        if not hmac.compare_digest(str(entry['checksum']), expected):
            return ('its reply was edited after it was written, or the entry was not written '
                    'with this cache\'s secret key (checksum mismatch)')
        return None

    @contextlib.contextmanager
    def locked(self, key: str):
        from vpn_plugin.locks import exclusive_lock
        with exclusive_lock(self._path(key).with_suffix('.lock'),
                            what=f'the reply cache entry {key[:12]}...'):
            yield

    def put(self, key: str, reply: ChatReply, request: dict | None = None) -> None:
        path = self._path(key)
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(f'.tmp{os.getpid()}.{threading.get_ident()}')
        request = request or {}
        checksum = self.checksum(key, request, reply.text, reply.prompt_tokens,
                                 reply.completion_tokens, reply.usage_reported,
                                 reply.served_model)
        tmp.write_text(json.dumps({'text': reply.text, 'prompt_tokens': reply.prompt_tokens,
                                   'completion_tokens': reply.completion_tokens, 'key': key,
                                   'request': request, 'checksum': checksum,
                                   'checksum_kind': CHECKSUM_KIND,
                                   'usage_reported': reply.usage_reported,
                                   **({'served_model': reply.served_model}
                                      if reply.served_model else {})}),
                       encoding='utf-8')
        os.replace(tmp, path)


class UsageCounter:
    """Thread-safe counts of requests, retries and tokens (fresh vs from the cache);
    ``cache_discarded``: cached replies found damaged, edited or not their request's
    (:meth:`ResponseCache.get`), discarded and asked again (paid again)."""

    FIELDS = ('requests', 'retries', 'failed', 'cache_hits', 'cache_discarded',
              'prompt_tokens', 'completion_tokens', 'cached_prompt_tokens',
              'cached_completion_tokens', 'replies_without_usage')

    def __init__(self):
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(self.FIELDS, 0)

    def add(self, **deltas):
        with self._lock:
            for name, delta in deltas.items():
                self.counts[name] += delta

    def record_reply(self, reply: ChatReply, asked_model: str = ''):
        """Counts of ``reply``; one answered by another model than ``asked_model`` (the
        response names it: an endpoint routing elsewhere, a dated snapshot) is counted under
        ``replies_from_other_models`` {model: replies}, which the results row keeps."""
        if not reply.usage_reported:
            self.add(replies_without_usage=1)
        if reply.served_model and asked_model and reply.served_model != asked_model:
            with self._lock:
                other = self.counts.setdefault('replies_from_other_models', {})
                other[reply.served_model] = other.get(reply.served_model, 0) + 1
        if reply.cached:
            self.add(cache_hits=1, cached_prompt_tokens=reply.prompt_tokens,
                     cached_completion_tokens=reply.completion_tokens)
        else:
            self.add(prompt_tokens=reply.prompt_tokens,
                     completion_tokens=reply.completion_tokens)


class CachedChatBackend:
    """Cache lookup and usage accounting around ``_request(messages) -> ChatReply``."""

    endpoint: str = ''  # who answers: the base URL, or the backend and its local model
    model: str = ''
    params: dict = {}

    def __init__(self, cache_dir=None):
        self.cache = ResponseCache(cache_dir) if cache_dir else None
        self.usage = UsageCounter()
        self._key_locks: dict = {}
        self._locks_guard = threading.Lock()

    def complete(self, messages: list) -> ChatReply:
        if self.cache is None:
            reply = self._request(messages)
        else:
            reply = self._cached_request(messages)
        self.usage.record_reply(reply, self.model)
        return reply

    def _cached_request(self, messages: list) -> ChatReply:
        """One lock per key (threads, then processes sharing the cache): identical requests
        in flight at once are paid for only once."""
        answerer = cache_endpoint(self.endpoint)
        key = ResponseCache.key(answerer, self.model, messages, self.params)
        request = ResponseCache.request_record(answerer, self.model, messages, self.params)
        with self._locks_guard:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock, self.cache.locked(key):
            held = self.cache.holds(key)
            reply = self.cache.get(key, request)
            if reply is None and held:  # an entry stood there and was discarded
                self.usage.add(cache_discarded=1)
            if reply is None:
                reply = self._request(messages)
                if not reply.truncated:  # a cut-off reply is asked again next time
                    self.cache.put(key, reply, request)
        return reply

    def _request(self, messages: list) -> ChatReply:
        raise NotImplementedError


def cache_endpoint(endpoint: str) -> str:
    """Who answers, as a cache key holds it: an HTTP(S) endpoint with its scheme and host in
    lower case and the scheme's default port left out (``http://H:80/v1`` is ``http://h/v1``),
    another port kept: two servers on one host (two checkpoints served under one model name)
    answer alike only by chance, so one is never scored with the other's replies. Another
    backend's endpoint as it is (a local model: its device and files' hash)."""
    from urllib.parse import urlsplit
    parts = urlsplit(endpoint)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        return endpoint
    host = f'[{parts.hostname}]' if ':' in parts.hostname else parts.hostname
    default = {'http': 80, 'https': 443}[parts.scheme]
    port = '' if parts.port in (None, default) else f':{parts.port}'
    return f'{parts.scheme}://{host}{port}{parts.path.rstrip("/")}'


class OpenAIChatBackend(CachedChatBackend):
    """Chat completions through the ``openai`` client with bounded exponential backoff.

    Retries (at most ``max_retries``) on 408/409/429/5xx, timeouts and connection
    errors; waits ``backoff * 2**attempt`` seconds (capped at ``max_backoff``), or the
    server's ``Retry-After`` (capped too). Other errors (400, 401, 404, a malformed
    response, ...) fail at once: retrying cannot fix them. A failure raises
    ``RequestFailedError``, which the planner counts as ``request_failed``.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 api_key_env: str | None = None, params: dict | None = None,
                 timeout: float = 60.0, max_retries: int = 5, backoff: float = 1.0,
                 max_backoff: float = 60.0, cache_dir=None):
        import openai
        super().__init__(cache_dir)
        self.openai = openai
        self.model, self.params = model, dict(params or {})
        self.endpoint = str(base_url).rstrip('/')
        self.max_retries, self.backoff, self.max_backoff = max_retries, backoff, max_backoff
        api_key = api_key or resolve_api_key(api_key_env, base_url)
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout,
                                    max_retries=0)

    def _request(self, messages: list) -> ChatReply:
        for attempt in range(self.max_retries + 1):
            self.usage.add(requests=1, retries=int(attempt > 0))
            try:
                raw = self.client.chat.completions.with_raw_response.create(
                    model=self.model, messages=messages, **self.params)
                return self._to_reply(raw.parse(), _raw_usage(raw))
            except self.openai.APIError as err:
                if not self._retryable(err) or attempt == self.max_retries:
                    self.usage.add(failed=1)
                    raise RequestFailedError(f'{self.model} at {self.endpoint}: request failed '
                                             f'after {attempt + 1} attempt(s): {err}',
                                             self._failure_kind(err)) from err
                time.sleep(self._wait(err, attempt))
            except ValueError as err:  # a 200 that is no usable completion (checked_reply), or
                # whose body is not JSON (a proxy's error page): retried, never cached
                if attempt == self.max_retries:
                    self.usage.add(failed=1)
                    raise RequestFailedError(f'{self.model} at {self.endpoint}: the response is '
                                             f'not a usable chat completion after {attempt + 1} '
                                             f'attempt(s): {err}', 'malformed_response') from err
                time.sleep(self._wait(err, attempt))
        raise AssertionError('unreachable')

    def _retryable(self, err) -> bool:
        if isinstance(err, self.openai.APIStatusError):
            return err.status_code in RETRYABLE_STATUS
        return isinstance(err, self.openai.APIConnectionError)  # includes timeouts

    def _failure_kind(self, err) -> str:
        if isinstance(err, self.openai.APIStatusError):
            return f'http_{err.status_code}'
        if isinstance(err, self.openai.APITimeoutError):
            return 'timeout'
        if isinstance(err, self.openai.APIConnectionError):
            return 'connection'
        return 'malformed_response'  # an APIError without a status: a body the client rejects

    def _wait(self, err, attempt: int) -> float:
        wait = min(self.backoff * 2 ** attempt, self.max_backoff)
        response = getattr(err, 'response', None)
        retry_after = response.headers.get('retry-after') if response is not None else None
        try:
            asked = float(retry_after) if retry_after else None
        except ValueError:
            return wait
        if asked is None:
            return wait
        if asked > self.max_backoff:
            print(f'warning: {self.endpoint} asked to wait {asked:g} s (Retry-After, which '
                  f'overrides the backoff of {self.backoff:g} s); waiting the cap of '
                  f'{self.max_backoff:g} s (max_backoff) instead', file=sys.stderr)
        return min(asked, self.max_backoff)

    @staticmethod
    def _to_reply(response, usage: dict | None = None) -> ChatReply:
        """The reply of a completion ``response``; ``usage``: its token counts as the endpoint
        wrote them (:func:`_raw_usage`; the client's model reads "100" or true as a count)."""
        if not getattr(response, 'choices', None):
            raise MalformedReplyError(f'response without choices: {response!r:.200}')
        if len(response.choices) > 1:  # n=1 is asked: which one is the answer is not known
            raise MalformedReplyError(f'the response holds {len(response.choices)} choices; '
                                      'expected one (one completion was asked)')
        if usage is None:
            usage = {name: getattr(response.usage, name, None)
                     for name in ('prompt_tokens', 'completion_tokens')}
        reply = checked_reply(response.choices[0].message.content,
                              usage.get('prompt_tokens'), usage.get('completion_tokens'))
        reply.truncated = getattr(response.choices[0], 'finish_reason', None) == 'length'
        served = getattr(response, 'model', None)
        reply.served_model = served if isinstance(served, str) else ''
        reply.usage_reported = None not in (usage.get('prompt_tokens'),
                                            usage.get('completion_tokens'))
        return reply


LOCAL_HOSTS = ('localhost', '127.0.0.1', '0.0.0.0', '::1')


def is_local_endpoint(base_url) -> bool:
    """An endpoint on this machine (a vLLM / Ollama server), which needs no API key."""
    from urllib.parse import urlparse
    host = urlparse(str(base_url or '')).hostname or ''
    return host in LOCAL_HOSTS or host.startswith('127.')


def resolve_api_key(env_name: str | None, base_url=None) -> str:
    """The key from ``env_name``; local servers (vLLM, Ollama) accept any key, hence 'EMPTY'.
    A named variable that is not set is an error that says how to go on: for a local
    endpoint, without ``--api-key-env``; else by setting it."""
    if env_name is None:
        return os.environ.get('OPENAI_API_KEY', 'EMPTY')
    if env_name not in os.environ:
        if is_local_endpoint(base_url):
            raise KeyError(f'--api-key-env {env_name}: environment variable is not set; '
                           f'{base_url} is a local endpoint, which needs no key: run without '
                           '--api-key-env (the placeholder key "EMPTY" is sent)')
        raise KeyError(f'--api-key-env {env_name}: environment variable is not set; set it '
                       f'(export {env_name}=<your key>) for {base_url}')
    return os.environ[env_name]


class TransformersChatBackend(CachedChatBackend):
    """A local ``transformers`` chat model (text only); images in messages are rejected.

    ``model`` is a local path or hub id of a model with a chat template. With a cache, the
    cached replies are keyed by the model's files too (:func:`model_fingerprint`: the SHA-256
    of every file of its folder), not by its name alone: other weights saved at the same path
    (a fine-tune written in place, a relative path read from another folder) are asked afresh,
    never served the replies of the former ones. A generation that stops at ``max_tokens``
    new tokens without ending is ``truncated`` (never cached), as an endpoint's
    ``finish_reason`` "length".
    """

    def __init__(self, model: str, *, params: dict | None = None, cache_dir=None,
                 device: str = 'cpu'):
        if str(model).startswith(('/', '.', '~')) and not Path(model).expanduser().exists():
            raise FileNotFoundError(f'transformers model {model}: no such folder; expected a '
                                    'local model folder (config.json, weights, chat template) '
                                    'or a hub id such as org/name')
        if Path(model).expanduser().is_file():  # torch.load's unpickling advice otherwise
            raise ValueError(f'transformers model {model}: a file; expected a local model '
                             'folder (config.json, weights, tokenizer, chat template) or a hub '
                             'id such as org/name')
        from transformers import pipeline
        super().__init__(cache_dir)
        self.model, self.params = model, dict(params or {})
        try:
            self.pipe = pipeline('text-generation', model=model, device=device)
        except Exception as error:  # transformers / safetensors / tokenizers say neither
            # the model nor what it lacks ("Couldn't instantiate the backend tokenizer")
            first = (str(error).strip().splitlines() or [''])[0]
            raise ValueError(f'transformers model {model}: cannot be loaded '
                             f'({type(error).__name__}: {first}); expected a complete local '
                             'model folder (config.json, weights, tokenizer files, chat '
                             'template) or a hub id such as org/name') from error
        self.endpoint = f'transformers:{device}'
        if self.cache is not None:  # after loading: a hub id is downloaded by then
            self.endpoint += f' files sha256:{model_fingerprint(model, self.cache)}'
        self._lock = threading.Lock()

    def _request(self, messages: list) -> ChatReply:
        for message in messages:
            if not isinstance(message['content'], str):
                raise ValueError('TransformersChatBackend is text-only: messages with images '
                                 '(VLM mode) need an OpenAI-compatible VLM endpoint')
        generate = {'max_new_tokens': self.params.get('max_tokens', 256),
                    'do_sample': self.params.get('temperature', 0) > 0}
        if generate['do_sample']:
            generate['temperature'] = self.params['temperature']
        self.usage.add(requests=1)
        with self._lock:
            output = self.pipe(messages, **generate)
        text = output[0]['generated_text'][-1]['content']
        tokenizer = self.pipe.tokenizer
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        completion_tokens = len(tokenizer(text, add_special_tokens=False)['input_ids'])
        try:
            reply = checked_reply(text, len(tokenizer(prompt)['input_ids']), completion_tokens)
        except MalformedReplyError as err:
            self.usage.add(failed=1)
            raise RequestFailedError(f'{self.model}: {err}', 'malformed_response') from err
        # the end of sequence is not part of the text: a reply as long as the limit was cut
        reply.truncated = completion_tokens >= generate['max_new_tokens']
        return reply


def model_fingerprint(model: str, cache: ResponseCache) -> str:
    """The first 16 hex digits of the SHA-256 of a local model's files (relative names and
    contents, ``datasets.file_digests``: remembered in the cache folder per file stat record,
    so a model is hashed once); a hub id is fingerprinted by its downloaded snapshot folder,
    if any (else by its name: what transformers will download)."""
    from vpn_plugin.datasets.file_digests import folder_digest
    folder = Path(model).expanduser()
    if not folder.is_dir():
        try:
            from huggingface_hub import snapshot_download
            folder = Path(snapshot_download(str(model), local_files_only=True))
        except (ImportError, OSError, ValueError):  # not a downloaded hub id: only its name
            return hashlib.sha256(f'name:{model}'.encode()).hexdigest()[:16]
    cache_root = cache.root.resolve()
    files = sorted(p for p in folder.rglob('*') if p.is_file()
                   and cache_root not in p.resolve().parents)  # a cache inside the model folder
    return folder_digest(folder, files, memo=cache.root / '.model_digests.json',
                         secret=cache._secret)


# the backend options a config sets (configs/llm/*, tools/test.py), checked as llm_eval's
# flags are: a value the endpoint would refuse per request, or read otherwise (a bool as a
# temperature), is refused when the model is built
BACKEND_OPTION_TYPES = {'timeout': 'Positive', 'max_retries': 'NonNegativeInt',
                        'backoff': 'NonNegative', 'max_backoff': 'NonNegative'}
PARAM_TYPES = {'temperature': 'NonNegative', 'max_tokens': 'Count'}


def check_backend_options(cfg: dict) -> None:
    """``backend.<option>=<value>; expected ...`` for a sampling parameter or an OpenAI client
    option of the wrong kind (:data:`BACKEND_OPTION_TYPES`, :data:`PARAM_TYPES`)."""
    from vpn_plugin import config_types
    params = cfg.get('params') or {}
    for where, options, types in (('backend', cfg, BACKEND_OPTION_TYPES),
                                  ('backend.params', params, PARAM_TYPES)):
        if not isinstance(options, dict):
            raise ValueError(f'{where}={options!r}; expected a dict of options')
        for name, kind in types.items():
            if name in options and options[name] is not None:
                config_types.check_value(f'{where}.{name}', options[name],
                                         getattr(config_types, kind))


def build_backend(cfg: dict):
    """``dict(type='openai'|'transformers', ...)`` -> backend."""
    check_backend_options(cfg)
    cfg = dict(cfg)
    kind = cfg.pop('type', 'openai')
    if kind == 'openai':
        return OpenAIChatBackend(**cfg)
    if kind == 'transformers':
        return TransformersChatBackend(**cfg)
    raise ValueError(f"backend type {kind!r}: expected 'openai' or 'transformers'")
