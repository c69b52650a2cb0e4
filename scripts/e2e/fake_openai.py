#!/usr/bin/env python3
"""Fake OpenAI-compatible chat completions upstream for end-to-end tests.

Standard library only. Listens on 127.0.0.1 only.

    python3 fake_openai.py --port 0 --record /tmp/upstream.jsonl [--record-requests /tmp/requests.jsonl]

prints ``listening on 127.0.0.1:PORT`` (flushed) once it accepts connections.

Routes
  POST /v1/chat/completions, POST /chat/completions
      Every received JSON body is appended as one line to --record (if given).
      The reply text is what follows the marker ``REPLY:`` in the last user
      message, up to the end of that message; "ok" when there is no marker.
      ``REPLY64:<base64>`` gives the reply base64-encoded (UTF-8) instead, so
      that a prompt guardrail in front of this upstream does not see it.
      ``"stream": true`` streams the reply as OpenAI SSE
      ``chat.completion.chunk`` objects: a first chunk with
      ``delta: {"role": "assistant", "content": ""}``, one chunk per piece of the
      reply, a final chunk with ``delta: {}`` and ``finish_reason: "stop"``, a
      usage chunk (``choices: []``) when ``stream_options.include_usage`` is
      true, then ``data: [DONE]``.
      Pieces: a marker ``CUTS:3,7,12`` in the last user message cuts the reply
      at those code point offsets (reply[0:3], reply[3:7], reply[7:12],
      reply[12:]); offsets outside (0, len) are ignored. Without it the reply is
      cut into 4-code-point pieces. The marker is looked for in the text
      before ``REPLY:`` (so a reply may itself contain "CUTS:"), or in the whole
      message when there is no ``REPLY:``.
      A marker ``DELAYMS:N`` (before ``REPLY:`` too) sleeps N ms before each
      content piece; --chunk-delay-ms sets the default.
      A marker ``SSESPLIT:K`` (before ``REPLY:`` too) writes every SSE event
      of a streamed reply as K pieces of bytes (cut anywhere, inside a UTF-8
      sequence included), each its own HTTP chunk, flushed, 2 ms apart, so
      that a proxy in between sees events split across reads.
      A marker ``JSONCHUNKS:N`` (before ``REPLY:`` too) writes a non-streamed
      reply's JSON body in N pieces of bytes, flushed, 5 ms apart (its
      Content-Length is that of the whole body).
      A marker ``TOOLCALL:<name>`` (before ``REPLY:`` too) makes the reply a
      tool call instead of text: the reply (``REPLY:`` / ``REPLY64:``) is the
      call's ``function.arguments``, the function is ``<name>``, the call's
      id ``call_<name>``, ``content`` is null and ``finish_reason``
      ``"tool_calls"``. Streamed, the first chunk carries the call with
      ``arguments: ""`` and every piece (cut as above) is a
      ``delta.tool_calls[0].function.arguments`` chunk, as OpenAI streams them.
  Every request, any route: with --record-requests, one JSON line
      ``{"method", "path", "headers": [[name, value], ...], "content_length":
      int or null, "chunked": bool, "body_bytes": int, "body": str}`` (the
      header names as received, the body as read, decoded as UTF-8 with
      replacement), written before the answer.
  GET /health, GET /v1/health -> 200 {"status": "ok"}
  GET /v1/models, GET /models -> a one-model list

Responses use HTTP/1.1: Content-Length for JSON bodies, chunked transfer
encoding for the SSE stream (flushed after every event). The head and the
body are separate writes: with Nagle's algorithm on (the default) a peer that
delays its ACKs can see the body up to ~40 ms after the head; --tcp-nodelay
turns it off, for latency measurements.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY_MARKER = "REPLY:"
# The reply in base64 (UTF-8), so that a prompt guardrail does not see it.
REPLY64_MARKER = "REPLY64:"
CUTS_RE = re.compile(r"CUTS:(\d+(?:,\d+)*)")
DELAY_RE = re.compile(r"DELAYMS:(\d+)")
SSESPLIT_RE = re.compile(r"SSESPLIT:(\d+)")
JSONCHUNKS_RE = re.compile(r"JSONCHUNKS:(\d+)")
TOOLCALL_RE = re.compile(r"TOOLCALL:([A-Za-z0-9_]+)")
DEFAULT_PIECE = 4


def message_text(content) -> str:
    """Text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def last_user_text(body: dict) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def plan_reply(text: str, default_delay_ms: int) -> tuple[str, list[str], int]:
    """(reply, pieces, delay_ms) for the last user message ``text``."""
    idx = text.find(REPLY_MARKER)
    idx64 = text.find(REPLY64_MARKER)
    if idx64 >= 0:
        reply = base64.b64decode(text[idx64 + len(REPLY64_MARKER):].strip()).decode("utf-8")
        control = text[:idx64]
    elif idx >= 0:
        reply = text[idx + len(REPLY_MARKER):]
        control = text[:idx]
    else:
        reply = "ok"
        control = text
    delay_ms = default_delay_ms
    m = DELAY_RE.search(control)
    if m:
        delay_ms = int(m.group(1))
    m = CUTS_RE.search(control)
    if m:
        cuts = sorted({int(c) for c in m.group(1).split(",") if 0 < int(c) < len(reply)})
        bounds = [0, *cuts, len(reply)]
        pieces = [reply[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    else:
        pieces = [reply[i:i + DEFAULT_PIECE] for i in range(0, len(reply), DEFAULT_PIECE)]
    return reply, pieces, delay_ms


def control_of(text: str) -> str:
    """The part of the last user message where markers are looked for."""
    for marker in (REPLY64_MARKER, REPLY_MARKER):
        idx = text.find(marker)
        if idx >= 0:
            return text[:idx]
    return text


def marker_int(regex, text: str, default: int) -> int:
    m = regex.search(control_of(text))
    return int(m.group(1)) if m else default


def split_bytes(data: bytes, parts: int) -> list[bytes]:
    """``data`` cut into ``parts`` pieces of about equal size (none empty)."""
    parts = max(1, min(parts, len(data)))
    bounds = [round(i * len(data) / parts) for i in range(parts + 1)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def rough_tokens(text: str) -> int:
    return max(1, len(text.split())) if text else 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1"
    # set on the class by main()
    record_path: str | None = None
    requests_path: str | None = None
    record_lock = threading.Lock()
    default_delay_ms = 0
    quiet = False

    def log_message(self, fmt, *args):  # noqa: D401 - stdlib signature
        if not self.quiet:
            sys.stderr.write("fake_openai: %s - %s\n" % (self.address_string(), fmt % args))

    # ---- helpers -----------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until blank line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()  # CRLF after the chunk
            return bytes(data)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(self, status: int, obj, parts: int = 1) -> None:
        payload = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        for i, piece in enumerate(split_bytes(payload, parts)):
            if i:
                self.wfile.flush()
                time.sleep(0.005)
            self.wfile.write(piece)
        self.wfile.flush()

    def _record(self, body) -> None:
        if not self.record_path:
            return
        line = json.dumps(body, ensure_ascii=False)
        with self.record_lock:
            with open(self.record_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()

    def _record_request(self, raw: bytes) -> None:
        if not self.requests_path:
            return
        length = self.headers.get("Content-Length")
        try:
            length = int(length) if length is not None else None
        except ValueError:
            pass
        line = json.dumps({
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "content_length": length,
            "chunked": "chunked" in (self.headers.get("Transfer-Encoding") or "").lower(),
            "body_bytes": len(raw),
            "body": raw.decode("utf-8", errors="replace"),
        }, ensure_ascii=False)
        with self.record_lock:
            with open(self.requests_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
        self.wfile.flush()

    def _sse(self, obj, split: int = 1) -> None:
        data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
        event = ("data: " + data + "\n\n").encode("utf-8")
        for i, piece in enumerate(split_bytes(event, split)):
            if i:
                time.sleep(0.002)
            self._write_chunk(piece)

    # ---- routes ------------------------------------------------------------------
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        self._record_request(b"")
        if path in ("/health", "/v1/health", "/healthz"):
            self._send_json(200, {"status": "ok"})
        elif path in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": "fake", "object": "model", "created": 0, "owned_by": "fake"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        raw = self._read_body()
        self._record_request(raw)
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        try:
            body = json.loads(raw.decode("utf-8") or "null")
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            self._send_json(400, {"error": {"message": f"invalid JSON: {e}", "type": "invalid_request_error"}})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "body must be an object", "type": "invalid_request_error"}})
            return
        self._record(body)

        text = last_user_text(body)
        reply, pieces, delay_ms = plan_reply(text, self.default_delay_ms)
        m = TOOLCALL_RE.search(control_of(text))
        tool = m.group(1) if m else None
        sse_split = marker_int(SSESPLIT_RE, text, 1)
        json_chunks = marker_int(JSONCHUNKS_RE, text, 1)
        model = body.get("model") if isinstance(body.get("model"), str) else "fake"
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        prompt_tokens = sum(
            rough_tokens(message_text(m.get("content")))
            for m in body.get("messages") or [] if isinstance(m, dict))
        completion_tokens = rough_tokens(reply)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}

        if body.get("stream") is True:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(delta, finish_reason=None):
                return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                        "system_fingerprint": None,
                        "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish_reason}]}

            try:
                if tool:
                    self._sse(chunk({"role": "assistant", "content": None, "tool_calls": [
                        {"index": 0, "id": f"call_{tool}", "type": "function",
                         "function": {"name": tool, "arguments": ""}}]}), sse_split)
                else:
                    self._sse(chunk({"role": "assistant", "content": ""}), sse_split)
                for piece in pieces:
                    if delay_ms:
                        time.sleep(delay_ms / 1000.0)
                    if tool:
                        delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                    else:
                        delta = {"content": piece}
                    self._sse(chunk(delta), sse_split)
                self._sse(chunk({}, "tool_calls" if tool else "stop"), sse_split)
                opts = body.get("stream_options")
                if isinstance(opts, dict) and opts.get("include_usage") is True:
                    self._sse({"id": cid, "object": "chat.completion.chunk", "created": created,
                               "model": model, "choices": [], "usage": usage})
                self._sse("[DONE]")
                self._write_chunk(b"")  # 0-length chunk ends the body
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            return

        if tool:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{tool}", "type": "function", "function": {"name": tool, "arguments": reply}}]}
        else:
            message = {"role": "assistant", "content": reply}
        self._send_json(200, {
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": message,
                         "logprobs": None, "finish_reason": "tool_calls" if tool else "stop"}],
            "usage": usage,
        }, json_chunks)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = ephemeral)")
    ap.add_argument("--record", default=None, help="append each received JSON body as a line here")
    ap.add_argument("--record-requests", default=None,
                    help="append each request (method, path, headers, body) as a JSON line here")
    ap.add_argument("--chunk-delay-ms", type=int, default=0, help="sleep before each streamed piece")
    ap.add_argument("--quiet", action="store_true", help="no access log on stderr")
    ap.add_argument("--tcp-nodelay", action="store_true",
                    help="set TCP_NODELAY on connections (no Nagle delay between a head and its body)")
    args = ap.parse_args(argv)

    Handler.record_path = args.record
    Handler.requests_path = args.record_requests
    Handler.default_delay_ms = args.chunk_delay_ms
    Handler.quiet = args.quiet
    Handler.disable_nagle_algorithm = args.tcp_nodelay
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening on {host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
