"""Slow or stalled clients cannot hold the service's request slots (a real `serve` and raw sockets).

Before: four connections that sent the headers of a POST and one byte of its body held all four
`service.max_in_flight` slots for as long as they stayed open -- without a token (FastAPI reads a JSON body before
the auth dependency runs) -- and every other request waited: a legitimate POST /trajectories timed out."""

from __future__ import annotations

import socket

from tests.service.helpers import AUTH, Server, trajectory, write_config

STALLED = (b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
           b"Content-Length: 100\r\n%s\r\n[")


def _stall(port: int, n: int, headers: bytes = b"", paths=(b"/runs/run-x/approve",)) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(STALLED % (paths[i % len(paths)], headers))
        socks.append(s)
    return socks


def _answer(s: socket.socket, timeout: float) -> bytes:
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        pass
    return data


def test_stalled_clients_without_a_token_hold_no_slot(tmp_path):
    server = Server(write_config(tmp_path, service={"loop": False, "max_in_flight": 4})).start()
    socks = _stall(server.port, 8, paths=(b"/runs/run-x/approve", b"/trajectories"))
    try:
        for s in socks:  # answered 401 at once, before their bodies
            assert _answer(s, 30).startswith(b"HTTP/1.1 401"), "a request without the token waited for its body"
        with server.client(timeout=30) as c:
            r = c.post("/trajectories", json=[trajectory("t-1")])
        assert r.status_code == 200 and r.json()["stored"] == 1
    finally:
        for s in socks:
            s.close()
        server.stop()


def test_a_stalled_body_is_408_after_body_timeout_and_frees_its_slot(tmp_path):
    server = Server(write_config(tmp_path, service={"loop": False, "max_in_flight": 1, "max_queued": 4,
                                                    "body_timeout_s": 1.0})).start()
    bearer = f"Authorization: {AUTH['Authorization']}\r\n".encode()
    # with the token: admitted, one in the slot, one waiting; a model's body FastAPI reads, and an ingested one
    socks = _stall(server.port, 2, bearer, (b"/runs/run-x/approve", b"/trajectories"))
    try:
        for s in socks:
            head = _answer(s, 60)
            assert head.startswith(b"HTTP/1.1 408"), head[:200]
        with server.client(timeout=60) as c:
            r = c.post("/trajectories", json=[trajectory("t-1")])
            assert r.status_code == 200 and r.json()["stored"] == 1
            assert c.get("/health").json()["worker_alive"] is True
    finally:
        for s in socks:
            s.close()
        server.stop()
