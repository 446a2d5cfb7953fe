"""NVDLA access through LiteX's ``litex_server``: Etherbone over TCP, as LiteX's ``RemoteClient``.

``litex_server`` (LiteX ``litex/tools/litex_server.py``) owns the board's bridge (``--uart``,
``--udp``, ``--pcie``, ``--jtag``) and serves Etherbone packets on a TCP port, so several tools
(``litex_cli``, ``litescope_cli``, this harness) share one board. The wire format, read at
LiteX 2024.12 (``litex/tools/remote/etherbone.py``, ``litex_client.py``, ``litex_server.py``):

* on connection the server sends an unframed info string (``CommUART:127.0.0.1:1234``);
  ``RemoteClient._receive_server_info`` reads it with one ``recv(128)``;
* a packet: 8-byte header ``4e 6f`` (magic), ``0x10`` (version 1, no probe flags),
  ``0x44`` (address and port size 4 bytes), 4 bytes of padding; then one record: flags,
  byte enable ``0x0f``, ``wcount``, ``rcount``; writes: base address then ``wcount`` data words;
  reads: a return address (0) then ``rcount`` addresses. Every field is big-endian; bus
  addresses are byte addresses (the server divides by 4 for UARTBone);
* the server handles one record per packet (``packet.records.pop()``); writes get no reply,
  a read gets one packet whose record carries ``wcount`` = ``rcount`` data words;
* the server merges the read addresses into incrementing or fixed bursts (``_read_merger``)
  and writes every record as an incrementing burst (``CommUART.write`` has no fixed writes),
  so a fixed-address write (the LUT data port) goes as one single-word record per word.

Design: :class:`EtherbonePort` is a pyserial-like port that takes the UARTBone command bytes
:class:`~nvdla_hil.drivers.uartbone.SerialTransport` writes and turns each command into an
Etherbone record, and turns the server's replies back into UARTBone response bytes. So
:class:`EtherboneTransport` keeps every rule of the serial transport (verify policy, retries,
resynchronisation, :class:`~nvdla_hil.drivers.uartbone.BoardDeadError` for a dead board or
server) without a second copy. The TCP leg is reliable; what lies behind the server (a UART)
is not, and ``litex_server``'s ``CommUART`` has no timeout: a lost byte there hangs the server,
which this transport reports as a dead board after its bounded retries.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time

import numpy as np

from .uartbone import SerialTransport
from .uartbone_wire import CMD_READ_FIXED, CMD_READ_INCR, CMD_WRITE_FIXED, CMD_WRITE_INCR, HEADER_BYTES

__all__ = ["EtherbonePort", "EtherboneTransport", "eb_read_packet", "eb_write_packet", "make_port", "parse_tcp_url"]

EB_MAGIC = 0x4E6F
#: packet header: magic, version 1 (no nr/pr/pf flags), addr_size 4 | port_size 4, padding
EB_HEADER = EB_MAGIC.to_bytes(2, "big") + bytes((0x10, 0x44)) + bytes(4)
EB_RECORD_HEADER = 4
EB_MAX = 255


def eb_write_packet(address: int, values: np.ndarray) -> bytes:
    """One packet, one record writing ``values`` (at most 255) to byte ``address`` onward."""
    n = int(values.size)
    if not 1 <= n <= EB_MAX:
        raise ValueError(f"Etherbone write of {n} words outside 1..{EB_MAX}")
    return (EB_HEADER + bytes((0, 0x0F, n, 0)) + int(address).to_bytes(4, "big")
            + np.asarray(values, dtype=np.uint32).astype(">u4").tobytes())


def eb_read_packet(addresses: np.ndarray) -> bytes:
    """One packet, one record reading the byte ``addresses`` (at most 255)."""
    n = int(addresses.size)
    if not 1 <= n <= EB_MAX:
        raise ValueError(f"Etherbone read of {n} words outside 1..{EB_MAX}")
    return EB_HEADER + bytes((0, 0x0F, 0, n)) + bytes(4) + np.asarray(addresses, dtype=np.uint32).astype(">u4").tobytes()


def parse_tcp_url(url: str) -> tuple[str, int]:
    """``tcp://HOST:PORT`` -> (host, port)."""
    m = re.fullmatch(r"tcp://\[?([^\s/\]]+)\]?:(\d{1,5})", url.strip())
    if not m or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"{url!r} is not tcp://HOST:PORT (a litex_server address)")
    return m.group(1), int(m.group(2))


class EtherbonePort:
    """A pyserial-like port: UARTBone commands in, Etherbone records out (module docstring)."""

    def __init__(self, host: str, port: int, *, connect_timeout: float = 5.0, write_timeout: float = 5.0) -> None:
        self.timeout: float | None = 0.0
        #: a server that stops taking bytes (SIGSTOP, wedged in ``CommUART.read``) fills the socket
        #: buffers; a write then fails after this many seconds instead of blocking forever
        self.write_timeout: float = write_timeout
        self.where = f"litex_server tcp://{host}:{port}"
        self._sock = socket.create_connection((host, port), timeout=connect_timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._cmd = bytearray()  # UARTBone bytes not yet a whole command
        self._raw = bytearray()  # server bytes not yet a whole reply packet
        self._rx = bytearray()  # UARTBone response bytes for the host
        self.server_info = self._server_info(connect_timeout)

    def _server_info(self, wait: float) -> str:
        """The unframed info string the server sends first (read as RemoteClient does, then
        whatever of it arrives within 50 ms more: nothing else is sent before a request)."""
        self._sock.settimeout(wait)
        try:
            info = self._sock.recv(128)
        except TimeoutError:
            info = b""
        self._sock.settimeout(0.05)
        with contextlib.suppress(TimeoutError, BlockingIOError):
            while len(info) < 1024:
                more = self._sock.recv(128)
                if not more:
                    break
                info += more
        return info.decode("ascii", "replace")

    # ---- host -> server ------------------------------------------------------------------------
    def write(self, data: bytes | bytearray) -> int:
        self._cmd += data
        out = bytearray()
        buf = self._cmd
        while len(buf) >= HEADER_BYTES:
            cmd, n = buf[0], buf[1]
            word = int.from_bytes(buf[2:6], "big")
            if cmd in (CMD_WRITE_INCR, CMD_WRITE_FIXED):
                if len(buf) < HEADER_BYTES + 4 * n:
                    break
                vals = np.frombuffer(bytes(buf[6 : 6 + 4 * n]), dtype=">u4").astype(np.uint32)
                del buf[: 6 + 4 * n]
                if n == 0:
                    continue
                if cmd == CMD_WRITE_INCR:
                    out += eb_write_packet(4 * word, vals)
                else:  # the server writes every record as an incrementing burst: one word per record
                    for v in vals:
                        out += eb_write_packet(4 * word, np.array([v], dtype=np.uint32))
            else:
                del buf[:6]
                if cmd in (CMD_READ_INCR, CMD_READ_FIXED) and n:
                    step = 4 if cmd == CMD_READ_INCR else 0
                    addrs = (4 * word + step * np.arange(n, dtype=np.int64)) & 0xFFFF_FFFF
                    out += eb_read_packet(addrs.astype(np.uint32))
        if out:
            self._send_bounded(bytes(out))
        return len(data)

    def _send_bounded(self, out: bytes) -> None:
        """``sendall`` that gives up when the server takes no byte for ``write_timeout`` seconds
        (pyserial's ``SerialTimeoutException``, which the transport reports as a dead board)."""
        import serial

        self._sock.settimeout(self.write_timeout)
        try:
            self._sock.sendall(out)
        except TimeoutError:
            raise serial.SerialTimeoutException(
                f"{self.where} took no bytes for {self.write_timeout:g} s (the server is stopped or wedged)") from None

    # ---- server -> host ------------------------------------------------------------------------
    def _pull(self, timeout: float | None) -> None:
        """Receive what the server sent (waiting up to ``timeout``), unpack whole reply packets."""
        self._sock.settimeout(timeout if timeout else 0.0)
        try:
            chunk = self._sock.recv(65536)
        except (TimeoutError, BlockingIOError):
            return
        if not chunk:
            raise ConnectionResetError("litex_server closed the connection")
        self._raw += chunk
        raw = self._raw
        head = len(EB_HEADER) + EB_RECORD_HEADER
        while len(raw) >= head:
            if raw[:2] != EB_HEADER[:2]:
                raise ConnectionError(f"not an Etherbone reply (starts {bytes(raw[:4]).hex()})")
            wcount = raw[head - 2]
            size = head + (4 * wcount + 4 if wcount else 0)
            if len(raw) < size:
                break
            self._rx += raw[head + 4 : size]  # the data words, big-endian as UARTBone sends them
            del raw[:size]

    @property
    def in_waiting(self) -> int:
        self._pull(None)
        return len(self._rx)

    def read(self, size: int = 1) -> bytes:
        """Up to ``size`` bytes within ``timeout`` seconds (``None``: pyserial's "block" is
        bounded here by ``write_timeout``, so a silent server never blocks a caller forever)."""
        wait = self.write_timeout if self.timeout is None else self.timeout
        deadline = time.monotonic() + wait
        while len(self._rx) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._pull(left)
        out = bytes(self._rx[:size])
        del self._rx[:size]
        return out

    def flush(self) -> None:
        """Nothing is buffered on this side (``write`` sends at once)."""

    def close(self) -> None:
        self._sock.close()


def make_port(url: str, response_timeout: float) -> EtherbonePort:
    """The port to ``litex_server`` at ``url`` with every wait bounded by the link's timeouts:
    connecting and the server's info string (``response_timeout`` + 1 s, at least 1 s), and each
    write (``response_timeout`` + 2 s, as the UART's ``write_timeout``)."""
    host, port = parse_tcp_url(url)
    return EtherbonePort(host, port, connect_timeout=max(1.0, response_timeout + 1.0),
                         write_timeout=response_timeout + 2.0)


class EtherboneTransport(SerialTransport):
    """:class:`SerialTransport` rules over ``litex_server`` (``url``: ``tcp://HOST:PORT``).

    ``board_timeout`` defaults to 5 ms: no bridge FSM sits on this side of the server, the
    quiet period of a resynchronisation only drains stale replies. Bursts are 255 words (an
    Etherbone record's limit); ``baudrate`` is not used on the TCP leg."""

    def __init__(self, url: str, baudrate: int = 3_000_000, **kwargs: object) -> None:
        self.host, self.tcp_port = parse_tcp_url(url)
        kwargs.setdefault("board_timeout", 0.005)
        kwargs.setdefault("max_write_burst", EB_MAX)
        kwargs.setdefault("max_read_burst", EB_MAX)
        super().__init__(url, baudrate, **kwargs)  # type: ignore[arg-type]

    def _make_port(self) -> EtherbonePort:
        return make_port(self.url, self.response_timeout)

    def __repr__(self) -> str:
        return f"EtherboneTransport({self.url!r}, policy={self.policy.mode})"

    def describe(self) -> str:
        info = getattr(self._port, "server_info", "") if self._port is not None else ""
        return f"Etherbone via litex_server {self.url}{f' ({info})' if info else ''} ({self.policy.mode}, {self.profile_name})"
