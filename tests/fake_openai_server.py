"""A scripted OpenAI chat-completions server on 127.0.0.1 for the LLM baseline tests.

``script(prompt_text, attempt) -> action`` decides each reply, where ``attempt`` counts
earlier requests with the same prompt; an action is ``{'text': str}`` (a 200 reply),
``{'status': 429|500|...}`` (an error reply), ``{'sleep': s, 'text': str}`` (reply late)
or ``{'raw': str}`` (a 200 whose body is not a chat completion).
"""
from __future__ import annotations

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


def count_images(messages: list) -> int:
    return sum(1 for m in messages if not isinstance(m['content'], str)
               for p in m['content'] if p.get('type') == 'image_url')


class FakeOpenAIServer:
    def __init__(self, script):
        self.script = script
        self.requests = []          # (prompt text, number of images) per request received
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
        text = prompt_text(body['messages'])
        with self._lock:
            attempt = self.attempts[text]
            self.attempts[text] += 1
            self.requests.append((text, count_images(body['messages'])))
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
                        'message': f'scripted {action["status"]}', 'type': 'scripted'}})
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

            def _send(self, status: int, payload: dict):
                self._send_bytes(status, json.dumps(payload).encode())

            def _send_bytes(self, status: int, data: bytes):
                try:
                    self.send_response(status)
                    self.send_header('Content-Type', 'application/json')
                    self.send_header('Content-Length', str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
