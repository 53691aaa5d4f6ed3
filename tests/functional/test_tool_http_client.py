"""The executor's own httpx client on a real loopback socket: what its pool sees of a server."""

from __future__ import annotations

import asyncio

from executor.runtime.outcomes import ToolHttpClient, default_tls_context

_REPLY = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")


async def _serve_then_close(connections: list[int], closed: asyncio.Event):
    """A server that answers one request per connection, keeps it open, then closes it."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections) + 1)
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        writer.write(_REPLY)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed.set()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def test_an_idle_connection_the_server_closed_is_not_reused():
    connections: list[int] = []
    closed = asyncio.Event()
    server = await _serve_then_close(connections, closed)
    port = server.sockets[0].getsockname()[1]
    async with server, ToolHttpClient(verify=default_tls_context()) as client:
        first = await client.post(f"http://127.0.0.1:{port}/x", content=b"{}")
        await closed.wait()  # on loopback its FIN is at the client's socket once this returns
        second = await client.post(f"http://127.0.0.1:{port}/x", content=b"{}")
    assert (first.status_code, second.status_code) == (200, 200)
    assert connections == [1, 2]


async def test_a_live_idle_connection_is_reused():
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while True:
            try:
                await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            await reader.readexactly(2)
            writer.write(_REPLY)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, ToolHttpClient(verify=default_tls_context()) as client:
        statuses = [(await client.post(f"http://127.0.0.1:{port}/x", content=b"{}")).status_code
                    for _ in range(3)]
    assert statuses == [200, 200, 200]
    assert connections == [1]


def test_the_pool_has_the_settings_of_httpx_default_transport():
    import httpx

    tls = default_tls_context()
    ours = ToolHttpClient(verify=tls)._transport._pool
    httpx_own = httpx.AsyncHTTPTransport(verify=tls)._pool
    names = ("_ssl_context", "_max_connections", "_max_keepalive_connections",
             "_keepalive_expiry", "_http1", "_http2", "_retries", "_local_address", "_uds",
             "_socket_options", "_proxy")
    assert [getattr(ours, n) for n in names] == [getattr(httpx_own, n) for n in names]


async def _keep_alive_server(served: list[int]):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(0)
        while True:
            try:
                await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            served[-1] += 1
            writer.write(_REPLY)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def test_a_full_pool_queues_requests_and_replaces_an_idle_connection_for_a_new_origin():
    import httpcore

    from executor.runtime.outcomes import _SocketCheckedBackend, _ToolPool

    served_a: list[int] = []
    served_b: list[int] = []
    server_a, server_b = await _keep_alive_server(served_a), await _keep_alive_server(served_b)
    url_a = f"http://127.0.0.1:{server_a.sockets[0].getsockname()[1]}/x"
    url_b = f"http://127.0.0.1:{server_b.sockets[0].getsockname()[1]}/x"
    pool = _ToolPool(max_connections=1,
                     network_backend=_SocketCheckedBackend(httpcore.AnyIOBackend()))
    async with server_a, server_b, pool:
        together = await asyncio.gather(*(pool.request("GET", url_a) for _ in range(3)))
        then_b = await pool.request("GET", url_b)
        states = [c.info() for c in pool.connections]
    assert [r.status for r in (*together, then_b)] == [200, 200, 200, 200]
    assert served_a == [3]  # one connection, the other two requests queued for it
    assert served_b == [1]  # A's idle connection was closed to open one to B
    assert len(states) == 1 and states[0].startswith(repr(url_b.removesuffix("/x")))


async def test_a_proxy_named_by_the_environment_carries_the_tool_calls(monkeypatch):
    # httpx reads HTTP_PROXY only with its own transport: the client must not lose it.
    requests: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        requests.append(head.split(b"\r\n", 1)[0])
        await reader.readexactly(2)
        writer.write(_REPLY)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{port}")
    async with server, ToolHttpClient(verify=default_tls_context()) as client:
        response = await client.post("http://tool.invalid/capabilities/x", content=b"{}")
    assert response.status_code == 200
    assert requests == [b"POST http://tool.invalid/capabilities/x HTTP/1.1"]


class _RecordingStream:
    """A network stream that records what is written and read, and answers with `reply`."""

    def __init__(self, reply: bytes = _REPLY, *, refuse_writes: bool = False) -> None:
        self.events: list[object] = []
        self._reply = reply
        self._refuse_writes = refuse_writes

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.events.append("read")
        chunk, self._reply = self._reply[:max_bytes], self._reply[max_bytes:]
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        import httpcore

        if self._refuse_writes:
            raise httpcore.WriteError("the server closed the connection")
        if buffer:  # httpcore's own streams return at once for an empty write
            self.events.append(buffer)

    async def aclose(self) -> None:
        self.events.append("close")

    def get_extra_info(self, info: str) -> object:
        return None

    def written(self) -> bytes:
        return b"".join(e for e in self.events if isinstance(e, bytes))


async def _exchange(stream, method: str, body: bytes) -> int:
    """One request over httpcore's own HTTP/1.1 connection on `stream`: the status."""
    import httpcore

    headers = [(b"Host", b"tool.test")]
    if body:
        headers.append((b"Content-Length", str(len(body)).encode()))
    connection = httpcore.AsyncHTTP11Connection(
        httpcore.URL("http://tool.test/").origin, stream
    )
    request = httpcore.Request(method, "http://tool.test/capabilities/x", headers=headers,
                               content=body)
    response = await connection.handle_async_request(request)
    await response.aread()
    await response.aclose()
    return response.status


async def test_a_request_head_leaves_with_its_body_in_one_write_the_same_bytes():
    from executor.runtime.outcomes import _SocketCheckedStream

    plain, checked = _RecordingStream(), _RecordingStream()
    assert await _exchange(plain, "POST", b'{"n":1}') == 200
    assert await _exchange(_SocketCheckedStream(checked), "POST", b'{"n":1}') == 200
    head = plain.events[0]
    assert plain.events[:3] == [head, b'{"n":1}', "read"]  # httpcore alone: two writes
    assert checked.events[:2] == [head + b'{"n":1}', "read"]  # here: one, the same bytes


async def test_a_request_without_a_body_is_written_before_its_response_is_read():
    from executor.runtime.outcomes import _SocketCheckedStream

    plain, checked = _RecordingStream(), _RecordingStream()
    assert await _exchange(plain, "GET", b"") == 200
    assert await _exchange(_SocketCheckedStream(checked), "GET", b"") == 200
    assert checked.events[:2] == [plain.written(), "read"]


async def test_a_large_body_is_written_after_its_head_uncopied():
    from executor.runtime.outcomes import _JOINED_WRITE_BYTES, _SocketCheckedStream

    body = b"x" * (_JOINED_WRITE_BYTES + 1)
    plain, checked = _RecordingStream(), _RecordingStream()
    assert await _exchange(plain, "POST", body) == 200
    assert await _exchange(_SocketCheckedStream(checked), "POST", body) == 200
    assert checked.events[:3] == plain.events[:3] == [plain.events[0], body, "read"]


async def test_a_refused_request_write_still_reads_the_response_as_httpcore_does():
    from executor.runtime.outcomes import _SocketCheckedStream

    for method, body in (("POST", b"{}"), ("GET", b"")):
        plain = _RecordingStream(refuse_writes=True)
        checked = _RecordingStream(refuse_writes=True)
        assert await _exchange(plain, method, body) == 200
        assert await _exchange(_SocketCheckedStream(checked), method, body) == 200
        assert checked.events[0] == plain.events[0] == "read"


async def test_a_server_receives_the_same_bytes_from_the_tool_client_as_from_httpx():
    import httpx

    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            data += head + await reader.readexactly(length)
            writer.write(_REPLY)
            await writer.drain()
            if data.count(b"POST ") == 3:
                break
        received.append(data)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/capabilities/x"
    posts = (b'{"n":1}', b"{}", b"y" * 70_000)
    async with server:
        for client in (ToolHttpClient(verify=default_tls_context()), httpx.AsyncClient()):
            async with client:
                for body in posts:
                    response = await client.post(url, content=body,
                                                 headers={"X-TruvaG3-Step-ID": "step-1"})
                    assert response.status_code == 200
    assert len(received) == 2 and received[0] == received[1]


async def _loop_passes_per_request(client, url: str) -> int:
    """How many times the event loop runs once while `client` posts to `url`, warmed up."""
    loop = asyncio.get_running_loop()
    await client.post(url, content=b"{}")  # the connection is open and idle from here on
    passes = 0
    run_once = loop._run_once

    def counted() -> None:
        nonlocal passes
        passes += 1
        run_once()

    loop._run_once = counted
    try:
        response = await client.post(url, content=b"{}")
    finally:
        del loop._run_once
    assert response.status_code == 200
    return passes


async def test_a_pooled_request_takes_fewer_passes_of_the_event_loop_than_httpx():
    # httpcore's anyio locks yield to the loop at each acquire, even when free; ours do not.
    import httpx

    served: list[int] = []
    server = await _keep_alive_server(served)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
    async with server, ToolHttpClient(verify=default_tls_context()) as ours, \
            httpx.AsyncClient() as theirs:
        ours_passes = await _loop_passes_per_request(ours, url)
        theirs_passes = await _loop_passes_per_request(theirs, url)
    assert ours_passes <= theirs_passes - 3, (ours_passes, theirs_passes)


async def test_a_silent_or_closing_server_fails_a_request_as_it_fails_httpx():
    # The stream reads and writes anyio's socket itself: the same errors, the same words.
    import httpx

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.read(100)  # never answers; the client gives up first

    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    async def failure(client_class, handler) -> tuple[str, str]:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        async with server, client_class(timeout=httpx.Timeout(0.05)) as client:
            try:
                await client.post(url, content=b"{}")
            except httpx.TransportError as error:
                return type(error).__name__, str(error)
        raise AssertionError("the request succeeded")

    for handler in (silent, closing):
        assert await failure(ToolHttpClient, handler) == await failure(httpx.AsyncClient, handler)
    assert (await failure(ToolHttpClient, silent))[0] == "ReadTimeout"
    assert (await failure(ToolHttpClient, closing))[0] == "RemoteProtocolError"
