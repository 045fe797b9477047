"""A scripted OpenAI chat-completions server on 127.0.0.1 for the LLM baseline tests.

``script(prompt_text, attempt) -> action`` decides each reply, where ``attempt`` counts
earlier requests with the same prompt; an action is ``{'text': str}`` (a 200 reply),
``{'status': 429|500|..., 'headers': {...}}`` (an error reply, e.g. with ``retry-after``),
``{'sleep': s, 'text': str}`` (reply late) or ``{'raw': str}`` (a 200 whose body is not a
chat completion). ``requests`` holds (prompt text, number of images) per request received,
``images`` the decoded image bytes of each request and ``times`` its arrival time.
"""
from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def prompt_text(messages: list) -> str:
    parts = []
    for message in messages:
        content = message['content']
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(p['text'] for p in content if p.get('type') == 'text')
    return '\n'.join(parts)


def request_images(messages: list) -> list[bytes]:
    """The bytes of every ``image_url`` content part; only base64 data URLs are accepted."""
    images = []
    for message in messages:
        if isinstance(message['content'], str):
            continue
        for part in message['content']:
            if part.get('type') == 'image_url':
                header, data = part['image_url']['url'].split(',', 1)
                assert header.startswith('data:image/') and header.endswith(';base64'), header
                images.append(base64.b64decode(data, validate=True))
    return images


class FakeOpenAIServer:
    def __init__(self, script):
        self.script = script
        self.requests = []          # (prompt text, number of images) per request received
        self.images = []            # decoded image bytes per request
        self.times = []             # arrival time (time.monotonic) per request
        self.attempts = Counter()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), self._handler_class())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _next_action(self, body: dict) -> dict:
        text, images = prompt_text(body['messages']), request_images(body['messages'])
        with self._lock:
            attempt = self.attempts[text]
            self.attempts[text] += 1
            self.requests.append((text, len(images)))
            self.images.append(images)
            self.times.append(time.monotonic())
        return self.script(text, attempt)

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                if not self.path.endswith('/chat/completions'):
                    return self._send(404, {'error': {'message': f'no route {self.path}'}})
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                action = server._next_action(body)
                if 'raw' in action:
                    return self._send_bytes(200, action['raw'].encode())
                if 'status' in action:
                    return self._send(action['status'], {'error': {
                        'message': f'scripted {action["status"]}', 'type': 'scripted'}},
                        action.get('headers', {}))
                time.sleep(action.get('sleep', 0))
                text = action['text']
                self._send(200, {
                    'id': 'chatcmpl-fake', 'object': 'chat.completion', 'created': 0,
                    'model': body['model'],
                    'choices': [{'index': 0, 'finish_reason': 'stop',
                                 'message': {'role': 'assistant', 'content': text}}],
                    'usage': {'prompt_tokens': len(prompt_text(body['messages']).split()),
                              'completion_tokens': len(text.split()),
                              'total_tokens': 0}})

            def _send(self, status: int, payload: dict, headers=None):
                self._send_bytes(status, json.dumps(payload).encode(), headers)

            def _send_bytes(self, status: int, data: bytes, headers=None):
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header('Content-Type', 'application/json')
                    self.send_header('Content-Length', str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
