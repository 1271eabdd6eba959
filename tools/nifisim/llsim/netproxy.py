"""A TCP proxy a drill controls (loopback only), between the services and the broker or PostgreSQL.

Modes (Proxy.set_mode), applied to the connections that exist and to those accepted later:
- "pass":      bytes flow both ways.
- "drop":      every connection is reset (RST: SO_LINGER 0), and each new one is reset at accept.
- "blackhole": connections are accepted and kept, but no byte (nor a close) passes either way
               until the mode changes; what waits is then delivered (TCP's retransmission after a
               network cut). Nothing is buffered beyond one read per direction and connection:
               the proxy stops reading, so the sender's TCP window closes.
- Proxy.half_open(direction): the connections that exist now stop passing bytes in one direction
  ("down": server to client, "up": client to server) for good, while the other direction works;
  connections made afterwards are normal. Such a connection only ends when a side closes it: a
  client without a bounded wait hangs on it forever.

Counters (Proxy.stats()): connections accepted, reset, bytes each way. Every loop is bounded: a
pump waits on the mode with a 0.2 s tick and ends with its connection; stop() closes everything.
The event loop runs in a thread of its own; the methods are called from the test's thread.
"""
import asyncio
import os
import socket
import struct
import subprocess
import threading
import time

TICK_S = 0.2
READ_BYTES = 65536
MODES = ("pass", "drop", "blackhole")


class _Conn:
    """One proxied connection: the client's and the upstream's streams, the stuck directions."""

    def __init__(self, cr, cw, sr, sw):
        self.cr, self.cw, self.sr, self.sw = cr, cw, sr, sw
        self.stuck = set()  # "up" and/or "down"
        self.closed = False


def _reset(writer):
    """Closes a stream with a TCP RST (SO_LINGER 0) instead of a FIN."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    except (OSError, RuntimeError):
        pass


class Proxy:
    """Listens on 127.0.0.1:listen_port (0 = a free port; .port says which) and forwards to
    127.0.0.1:upstream_port. name labels it in messages."""

    def __init__(self, upstream_port, listen_port=0, name="proxy"):
        self.name = name
        self.upstream_port = upstream_port
        self.port = listen_port
        self.mode = "pass"
        self.counters = {"accepted": 0, "reset": 0, "bytes_up": 0, "bytes_down": 0, "refused_upstream": 0}
        self._conns = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netproxy-" + name, daemon=True)
        self._server = None

    # -- control, from the test's thread ----------------------------------------------------------
    def start(self):
        self._thread.start()
        self._call(self._start(), 10)
        return self

    def stop(self):
        """Closes the listener and every connection, then ends the loop (at most ~10 s)."""
        try:
            self._call(self._stop(), 10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def set_mode(self, mode):
        assert mode in MODES, mode
        self._call(self._set_mode(mode), 10)

    def half_open(self, direction="down"):
        """The connections open now stop passing bytes in one direction for good; returns how many."""
        assert direction in ("up", "down"), direction
        return self._call(self._half_open(direction), 10)

    def stats(self):
        """A copy of the counters plus the open connections."""
        return self._call(self._stats(), 10)

    def _call(self, coro, timeout):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- inside the loop --------------------------------------------------------------------------
    async def _start(self):
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self):
        self._server.close()
        for c in list(self._conns):
            self._close(c)
        # the pumps of the closed connections end by themselves; what is left is cancelled
        await asyncio.sleep(TICK_S)
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.wait(rest, timeout=5) if rest else None

    async def _stats(self):
        return dict(self.counters, open=len(self._conns), mode=self.mode)

    async def _set_mode(self, mode):
        self.mode = mode
        if mode == "drop":
            for c in list(self._conns):
                self._close(c, rst=True)

    async def _half_open(self, direction):
        for c in self._conns:
            c.stuck.add(direction)
        return len(self._conns)

    def _close(self, c, rst=False):
        if c.closed:
            return
        c.closed = True
        self._conns.discard(c)
        for w in (c.cw, c.sw):
            if rst:
                _reset(w)
            else:
                w.close()
        if rst:
            self.counters["reset"] += 1

    async def _accept(self, cr, cw):
        self.counters["accepted"] += 1
        if self.mode == "drop":
            self.counters["reset"] += 1
            _reset(cw)
            return
        try:
            sr, sw = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.upstream_port), 10)
        except (OSError, asyncio.TimeoutError):
            self.counters["refused_upstream"] += 1
            _reset(cw)
            return
        c = _Conn(cr, cw, sr, sw)
        self._conns.add(c)
        await asyncio.gather(self._pump(c, cr, sw, "up"), self._pump(c, sr, cw, "down"))
        self._close(c)

    async def _gate(self, c, direction):
        """Waits (tick by tick, while the connection lives) until this direction may pass."""
        while not c.closed and (self.mode == "blackhole" or direction in c.stuck):
            await asyncio.sleep(TICK_S)

    async def _pump(self, c, src, dst, direction):
        key = "bytes_" + direction
        try:
            while not c.closed:
                data = await src.read(READ_BYTES)
                await self._gate(c, direction)  # also holds a close back while the hole lasts
                if not data or c.closed:
                    break
                dst.write(data)
                await dst.drain()
                self.counters[key] += len(data)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._close(c)


def pg_restart(run_dir, bindir, mode="fast", timeout_s=60):
    """Restarts the PostgreSQL cluster of scripts/env.sh in run_dir (pg_ctl restart -m fast or
    immediate; same port and log file); returns the seconds it took. As root it runs as the
    postgres OS user, as env.sh does; setsid keeps the new server out of the test's session."""
    assert mode in ("fast", "immediate"), mode
    pg_dir = os.path.join(run_dir, "pg")
    pg_ctl = os.path.join(bindir, "pg_ctl")
    cmd = [pg_ctl, "restart", "-D", os.path.join(pg_dir, "data"), "-m", mode, "-w", "-t", str(timeout_s), "-s",
           "-l", os.path.join(pg_dir, "postgres.log")]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    t0 = time.time()
    subprocess.run(["setsid", "-w"] + cmd, cwd=pg_dir, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout_s + 30)
    return time.time() - t0
