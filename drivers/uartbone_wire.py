"""LiteX UARTBone wire format: command framing, burst sizes and wire byte counts.

Wire format (LiteX ``litex/soc/cores/uart.py`` ``Stream2Wishbone`` and the host side
``litex/tools/remote/comm_uart.py`` ``CommUART``; read at enjoy-digital/litex 37b75bd4):

* One command = ``cmd`` byte, ``length`` byte, address (``address_width//8`` = 4 bytes,
  most significant first), then for writes ``length`` data words.
  uart.py L320-323 / comm_uart.py L14-17: ``CMD_WRITE_BURST_INCR=0x01``,
  ``CMD_READ_BURST_INCR=0x02``, ``CMD_WRITE_BURST_FIXED=0x03``, ``CMD_READ_BURST_FIXED=0x04``
  (fixed bursts since LiteX b44ca6d6, 2020-08).
* The address is a **Wishbone word address**: the bridge's bus is
  ``wishbone.Interface(..., addressing="word")`` (uart.py L333) and the host sends
  ``(addr//4).to_bytes(4, "big")`` (comm_uart.py L88, L111-113). The FSM shifts each
  address byte in below the previous ones, ``address.eq(Cat(sink.data, address))``, so the
  first byte is the most significant.
* Data words are big-endian on the wire both ways: ``data.eq(Cat(sink.data, data))`` on
  receive, and ``source.data.eq(data[8*n:])`` with ``n`` counting down on send
  (uart.py, RECEIVE-DATA / SEND-DATA); the host packs ``value.to_bytes(4, "big")``.
* Incrementing bursts add 1 to the word address after each word, fixed bursts add 0
  (``NextValue(address, address + incr)``). ``length`` is one byte: at most 255 words
  (``UARTBONE_MAX_BURST_LENGTH = 255``). Length 0 never satisfies
  ``words_count == length - 1`` and only ends at the FSM timeout; this driver never sends it.
* A read returns exactly ``4*length`` bytes and nothing else; a write returns nothing.
  There is no checksum, no acknowledgement and no error response.
* An unknown command byte consumes length + address and returns to RECEIVE-CMD.
* The FSM is reset by a ``WaitTimer(100e-3*clk_freq)`` armed whenever it is *not* in
  RECEIVE-CMD (uart.py L351-353): a command must complete within 100 ms of its first
  byte, and a half-received command is dropped 100 ms later. CommUART therefore sizes
  write bursts from the baud rate, keeping half of that budget
  (``_get_max_write_burst_length``, comm_uart.py L38-48); :func:`max_burst_words` does the same.
* The RS232 PHY has no receive FIFO: ``RS232PHYRX`` raises ``source.valid`` for one cycle
  whatever ``ready`` says, and the bridge holds ``sink.ready=0`` outside the RECEIVE states.
  Bytes arriving while a read response is being sent are **lost**, so a read command must
  be the last command of a request; writes can be streamed back to back.

No checksum: what the link cannot detect, and how the transport makes up for it, is
:mod:`.uartbone_policy`; the transport itself is :mod:`.uartbone`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "ADDR_BYTES",
    "CMD_READ_FIXED",
    "CMD_READ_INCR",
    "CMD_WRITE_FIXED",
    "CMD_WRITE_INCR",
    "FSM_TIMEOUT",
    "HEADER_BYTES",
    "MAX_BURST",
    "decode_words",
    "encode_read",
    "encode_write",
    "header",
    "max_burst_words",
    "wire_bytes_read",
    "wire_bytes_write",
]

CMD_WRITE_INCR = 0x01
CMD_READ_INCR = 0x02
CMD_WRITE_FIXED = 0x03
CMD_READ_FIXED = 0x04
MAX_BURST = 255
#: Stream2Wishbone resets its FSM this long after leaving RECEIVE-CMD (uart.py L351).
FSM_TIMEOUT = 0.100
ADDR_BYTES = 4
HEADER_BYTES = 2 + ADDR_BYTES


def header(cmd: int, length: int, word_address: int) -> bytes:
    """The 6-byte command head: ``cmd``, ``length`` (1..255 words), the 32-bit word address
    most significant byte first."""
    if not 1 <= length <= MAX_BURST:
        raise ValueError(f"UARTBone burst length {length} outside 1..{MAX_BURST}")
    if not 0 <= word_address < 1 << 32:
        raise ValueError(f"word address {word_address:#x} does not fit 32 bits")
    return bytes((cmd, length)) + word_address.to_bytes(ADDR_BYTES, "big")


def encode_write(word_address: int, values: Sequence[int] | np.ndarray, *, incr: bool = True) -> bytes:
    """One write command: ``cmd len addr[31:24..7:0] (data[31:24..7:0])*len``."""
    words = np.asarray(values, dtype=np.uint32)
    head = header(CMD_WRITE_INCR if incr else CMD_WRITE_FIXED, int(words.size), word_address)
    return head + words.astype(">u4").tobytes()


def encode_read(word_address: int, count: int, *, incr: bool = True) -> bytes:
    """One read command: ``cmd len addr[31:24..7:0]``; the board answers ``4*len`` bytes."""
    return header(CMD_READ_INCR if incr else CMD_READ_FIXED, count, word_address)


def decode_words(data: bytes | bytearray) -> np.ndarray:
    """Big-endian response bytes to ``uint32`` words."""
    if len(data) % 4:
        raise ValueError(f"response of {len(data)} bytes is not whole words")
    return np.frombuffer(bytes(data), dtype=">u4").astype(np.uint32)


def max_burst_words(baudrate: float, *, write: bool) -> int:
    """Largest burst that finishes inside the bridge's 100 ms FSM timer.

    Writes keep half the budget for host/adapter jitter (CommUART's rule, comm_uart.py
    L38-48); a read response is sent by the board itself, so reads keep 90 %.
    """
    if baudrate <= 0:
        raise ValueError("baudrate must be greater than 0")
    budget = FSM_TIMEOUT * (0.5 if write else 0.9)
    max_bytes = int(budget / (10.0 / baudrate))
    words = (max_bytes - HEADER_BYTES) // 4
    return max(1, min(MAX_BURST, words))


def wire_bytes_write(words: int, max_burst: int = MAX_BURST) -> int:
    """Fewest bytes the framing allows for ``words`` written words."""
    cmds = -(-words // max_burst)
    return cmds * HEADER_BYTES + 4 * words


def wire_bytes_read(words: int, max_burst: int = MAX_BURST) -> tuple[int, int]:
    """Fewest (host->board, board->host) bytes the framing allows for ``words`` read words."""
    cmds = -(-words // max_burst)
    return cmds * HEADER_BYTES, 4 * words
