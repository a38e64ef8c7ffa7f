"""A fault-injecting, latency-adding HTTP proxy on 127.0.0.1 between an S3 client (s3fs/botocore,
pyarrow's S3FileSystem) and the moto server, for tests/system/test_s3_faults.py and bench/objstore.py.

    with FaultProxy(moto_endpoint, schedule, latency=0.02) as proxy:
        fs = make_s3fs(proxy.endpoint)
        ...
        proxy.log  # every request: time, operation, action taken, status, bytes returned
        proxy.stats.by_operation()  # {"GetObject": 3, "HeadObject": 1, ...}

Every request waits `latency` seconds in the proxy before it is forwarded (the first-byte latency
of an object store; concurrent requests wait concurrently, as on S3).

For every request the proxy calls ``schedule(request)`` with a ``Request`` (its operation name,
method, path, query, the count of earlier requests overall and of the same operation) and does
what it answers:

  "forward"      pass the request to moto and its response back
  "503"          answer 503 SlowDown with S3's XML error body (the body is read first)
  "500"          answer 500 InternalError with S3's XML error body
  "drop"         close the connection right after the request line and headers (nothing read)
  "drop_after"   read the whole request, then close without answering (not forwarded)
  "truncate"     forward, then send the response headers and half its body, then close (a
                 response without a body is cut before its headers)
  "lost_response" forward (moto applies the request), then close without answering: the
                 client cannot tell whether the request took effect

Schedules: ``every_nth``, ``first_of_each``, ``permanent``, ``forward_all`` (below), or any
callable.  Operation names follow the S3 API (GetObject, HeadObject, PutObject, UploadPartCopy,
...) as far as the method, query and headers tell them apart.
"""
from __future__ import annotations

import http.client
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

ACTIONS = ("forward", "503", "500", "drop", "drop_after", "truncate", "lost_response")

_ERRORS = {
    "503": (503, "Service Unavailable", "SlowDown", "Please reduce your request rate."),
    "500": (500, "Internal Server Error", "InternalError",
            "We encountered an internal error. Please try again."),
}


@dataclass(frozen=True)
class Request:
    operation: str
    method: str
    path: str
    query: dict
    index: int  # among all requests the proxy received (0-based)
    op_index: int  # among the requests of this operation (0-based)


@dataclass
class Record:
    time: float
    operation: str
    method: str
    path: str
    action: str
    status: int | None = None
    bytes_out: int = 0  # body bytes sent back to the client


@dataclass
class Stats:
    log: list[Record] = field(default_factory=list)

    def count(self, operation: str | None = None, action: str | None = None) -> int:
        return sum((operation is None or r.operation == operation)
                   and (action is None or r.action == action) for r in self.log)

    def by_operation(self) -> dict[str, int]:
        """Requests received per S3 operation."""
        return dict(Counter(r.operation for r in self.log))

    def bytes_returned(self, operation: str | None = None) -> int:
        """Body bytes sent back (of one operation, or of all)."""
        return sum(r.bytes_out for r in self.log if operation is None or r.operation == operation)


def operation_of(method: str, path: str, query: dict, headers) -> str:
    """The S3 operation a request stands for (the subset s3fs and pageindex use)."""
    key = path.strip("/").split("/", 1)[1] if "/" in path.strip("/") else ""
    if method == "GET":
        if "uploads" in query:
            return "ListMultipartUploads"
        if "uploadId" in query:
            return "ListParts"
        if not key:
            return "ListObjects" if path.strip("/") else "ListBuckets"
        return "GetObject"
    if method == "HEAD":
        return "HeadObject" if key else "HeadBucket"
    if method == "PUT":
        if "partNumber" in query:
            return "UploadPartCopy" if headers.get("x-amz-copy-source") else "UploadPart"
        if not key:
            return "CreateBucket"
        return "CopyObject" if headers.get("x-amz-copy-source") else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        if "delete" in query:
            return "DeleteObjects"
        return "Post"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    return method


# ---------------------------------------------------------------- schedules

Schedule = Callable[[Request], str]


def forward_all(request: Request) -> str:
    return "forward"


def every_nth(n: int, action: str, operations: set[str] | None = None, offset: int = 0) -> Schedule:
    """Every n-th request (of the given operations, or of all) fails with `action`."""
    counter = {"n": 0}
    lock = threading.Lock()

    def schedule(request: Request) -> str:
        if operations is not None and request.operation not in operations:
            return "forward"
        with lock:
            counter["n"] += 1
            k = counter["n"]
        return action if (k + offset) % n == 0 else "forward"
    return schedule


def first_of_each(n: int, action: str | Callable[[Request], str],
                  operations: set[str] | None = None) -> Schedule:
    """The first n requests of every operation (or of the given ones) fail with `action`
    (a callable may pick the action per request)."""
    def schedule(request: Request) -> str:
        if operations is not None and request.operation not in operations:
            return "forward"
        if request.op_index < n:
            return action(request) if callable(action) else action
        return "forward"
    return schedule


def permanent(action: str, operations: set[str] | None = None,
              path_contains: str | None = None) -> Schedule:
    """Every matching request fails with `action`."""
    def schedule(request: Request) -> str:
        if operations is not None and request.operation not in operations:
            return "forward"
        if path_contains is not None and path_contains not in request.path:
            return "forward"
        return action
    return schedule


# ---------------------------------------------------------------- the proxy

class FaultProxy:
    def __init__(self, upstream: str, schedule: Schedule = forward_all, latency: float = 0.0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.schedule = schedule
        self.latency = latency
        self.stats = Stats()
        self._lock = threading.Lock()
        self._op_counts: dict[str, int] = {}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle's algorithm a small body waits
            # for the client's delayed ACK of the headers (40 ms on Linux), a stall S3 does not add.
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:  # quiet
                pass

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def log(self) -> list[Record]:
        return self.stats.log

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self, schedule: Schedule | None = None) -> None:
        with self._lock:
            if schedule is not None:
                self.schedule = schedule
            self.stats = Stats()
            self._op_counts = {}

    # -------------------------------------------------------- per request

    def _classify(self, handler: BaseHTTPRequestHandler) -> Request:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        op = operation_of(handler.command, parts.path, query, handler.headers)
        with self._lock:
            index = len(self.stats.log)
            op_index = self._op_counts.get(op, 0)
            self._op_counts[op] = op_index + 1
            record = Record(time.monotonic(), op, handler.command, parts.path, "?")
            self.stats.log.append(record)
        request = Request(op, handler.command, parts.path, query, index, op_index)
        record.action = self.schedule(request)
        assert record.action in ACTIONS, record.action
        handler._record = record  # type: ignore[attr-defined]
        return request

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        self._classify(handler)
        record: Record = handler._record  # type: ignore[attr-defined]
        action = record.action
        if self.latency:
            time.sleep(self.latency)
        if action == "drop":
            _drop(handler)
            return
        body = _read_body(handler)
        if action == "drop_after":
            _drop(handler)
            return
        if action in _ERRORS:
            status, reason, code, message = _ERRORS[action]
            record.status = status
            payload = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                       f"<Message>{message}</Message><RequestId>FAULTPROXY</RequestId>"
                       f"<HostId>faultproxy</HostId></Error>").encode()
            handler.send_response(status, reason)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("x-amz-request-id", "FAULTPROXY")
            if handler.command == "HEAD":
                handler.send_header("Content-Length", "0")
                handler.end_headers()
            else:
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
            handler.wfile.flush()
            return
        status, headers, payload = self._forward(handler, body)
        record.status = status
        if action == "lost_response" or (action == "truncate" and (
                not payload or handler.command == "HEAD")):
            _drop(handler)
            return
        handler.send_response(status)
        for name, value in headers:
            if name.lower() in ("transfer-encoding", "connection", "content-length", "server", "date"):
                continue
            handler.send_header(name, value)
        if handler.command == "HEAD":
            length = dict((k.lower(), v) for k, v in headers).get("content-length", "0")
            handler.send_header("Content-Length", length)
            handler.end_headers()
            handler.wfile.flush()
            return
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        # Counted before writing: the client may act on the last byte before this thread runs again.
        if action == "truncate":
            record.bytes_out = len(payload) // 2
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            _drop(handler)
            return
        record.bytes_out = len(payload)
        handler.wfile.write(payload)
        handler.wfile.flush()

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes):
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        try:
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() not in ("expect", "transfer-encoding", "content-length",
                                            "connection", "proxy-connection")}
            if body or handler.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            return resp.status, resp.getheaders(), payload
        finally:
            conn.close()


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _drop(handler: BaseHTTPRequestHandler) -> None:
    """Close the client's connection abruptly (RST where the OS allows)."""
    handler.close_connection = True
    try:
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        handler.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
