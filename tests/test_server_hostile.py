"""The server against hostile clients, on a real `serve` (tests/server_support.py): connections that never finish
their request, uploads over their limit, and more uploads at once than the server will hold (grader/server/http.py,
grader/server/app.py). The attackers connect from 127.0.0.2; the students from 127.0.0.1."""

from __future__ import annotations

import socket
import time

import pytest
from server_support import SOLUTION, TASK, Served, variant  # noqa: E402

from grader.server import http


@pytest.fixture(scope="module")
def server(tmp_path_factory, tokens):
    served = Served(tmp_path_factory.mktemp("hostile"), tokens[0]).start()
    yield served
    served.stop()


def _connect(served: Served, source: str = "127.0.0.2") -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(20)
    s.connect(("127.0.0.1", served.port))
    return s


def _closed(s: socket.socket, wait: float) -> bool:
    """Whether the server closed the connection (or answered) within `wait` seconds."""
    s.settimeout(wait)
    try:
        return s.recv(4096) is not None
    except TimeoutError:
        return False
    except OSError:
        return True


def _response(s: socket.socket, wait: float = 10.0) -> str:
    s.settimeout(wait)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        return ""
    return data.decode(errors="replace")


def test_slow_clients_do_not_keep_students_out(server, tokens, tmp_path):
    """300 connections from one address, each with half a request line, made every student's request answer 503
    (uvicorn's limit_concurrency counted them) until they closed. Now the address keeps 32 of them, each closed
    when its headers' deadline passes, and students submit and read verdicts meanwhile."""
    _, tok = tokens
    slow = []
    try:
        for _ in range(300):
            s = _connect(server)
            s.sendall(b"GET /api/health HT")
            slow.append(s)
        start = time.monotonic()
        assert server.api("GET", "/api/results", tok["ann"]).status_code == 200
        stored = server.api("POST", f"/api/submit?task={TASK}&filename={TASK}.py", tok["ann"],
                            content=variant(SOLUTION, 7, tmp_path).read_bytes())
        assert stored.status_code == 201, stored.text
        assert time.monotonic() - start < http.HEADER_S  # before any slow connection's deadline
        refused = sum(_closed(s, 0.05) for s in slow)
        assert refused >= 300 - http.PER_ADDRESS, refused  # past the address's share: closed at once
        time.sleep(http.HEADER_S + 1)
        assert all(_closed(s, 2.0) for s in slow)  # the rest: closed at their headers' deadline
    finally:
        for s in slow:
            s.close()
    graded = server.wait_graded(tok["ann"], 1)
    assert any(s["state"] == "graded" for s in graded)


def test_an_upload_over_its_limit_is_refused_before_it_is_read(server, tokens):
    """A .py is at most 1 MiB: one that says it is 10 MiB is refused at its headers (it was read up to the
    notebook's 32 MiB limit first), and one sent in chunks with no length is cut at 1 MiB, not at its end."""
    _, tok = tokens
    s = _connect(server, "127.0.0.1")
    s.sendall((f"POST /api/submit?task={TASK}&filename=big.py HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
               f"{tok['bob']}\r\nContent-Length: {10 << 20}\r\n\r\n").encode())
    answer = _response(s)
    assert answer.startswith("HTTP/1.1 413"), answer
    s.close()
    s = _connect(server, "127.0.0.1")
    s.sendall((f"POST /api/submit?task={TASK}&filename=big.py HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
               f"{tok['bob']}\r\nTransfer-Encoding: chunked\r\n\r\n").encode())
    chunk = b"#" * 65536
    for _ in range(17):  # 1 MiB + 64 KiB, and no last chunk: the server must answer without the end
        s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    answer = _response(s)
    assert answer.startswith("HTTP/1.1 413"), answer
    s.close()


def test_the_server_holds_a_bounded_number_of_upload_bytes(server, tokens):
    """Each upload counts its declared length (or its limit) against 256 MiB while it is received: eight
    notebooks that declare 32 MiB and stall hold it all, and the ninth is told to come back (503, Retry-After)
    at once instead of being read into memory beside them."""
    _, tok = tokens
    held = []
    for i in range(8):
        s = _connect(server, f"127.0.0.{10 + i}")
        s.sendall((f"POST /api/submit?task={TASK}&filename=nb{i}.ipynb HTTP/1.1\r\nHost: x\r\nAuthorization: "
                   f"Bearer {tok['cid']}\r\nContent-Length: {32 << 20}\r\n\r\n").encode() + b"{" * 1024)
        held.append(s)
    time.sleep(1.0)  # the eight are being received
    s = _connect(server, "127.0.0.30")
    s.sendall((f"POST /api/submit?task={TASK}&filename=nb.ipynb HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
               f"{tok['cid']}\r\nContent-Length: {1 << 20}\r\n\r\n").encode())
    answer = _response(s)
    assert answer.startswith("HTTP/1.1 503") and "retry-after: 30" in answer.lower(), answer
    for h in held + [s]:
        h.close()
    time.sleep(0.5)
    # once they are gone, uploads are taken again
    assert server.api("GET", "/api/results", tok["cid"]).status_code == 200
