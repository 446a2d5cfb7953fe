"""The firmware's own process: NVDLA's firmware library (:mod:`.firmware`) loaded into a child
Python process, so that a crash, a hang or a runaway allocation of the firmware on a hostile
loadable ends that process, never the harness.

Run as a script, stdlib only (the parent starts it with ``python -I -S``, without the package on
the path)::

    firmware_child.py LIBRARY REQUEST_FD ANSWER_FD PARENT_PID ADDRESS_SPACE_LIMIT

The child loads ``LIBRARY`` (``fw_*`` entry points of ``sims/firmware/fw_shim.c``), installs its
own ctypes callbacks, and then carries out the calls the parent sends, one at a time. Every
callback the firmware makes becomes a message to the parent, which performs it on the target.

The protocol is the one the parent (:mod:`.firmware`) imports from here. A message from the child
is a one-byte tag and a fixed little-endian body. Some carry a payload after the body.

* ``H`` ready (pid). The library is loaded and the calls can begin.
* ``R`` register read (addr), answered by the value (``<I``).
* ``W`` register write (addr, value); ``L`` log (level, length, text). Neither has an answer, so
  both are buffered and sent with the next message that needs one. The parent handles messages
  in the order they were made, so batching never reorders a write against a later read.
* ``D`` descriptor read (address-list index, offset, size), answered by ``<i`` status and, when
  that is 0, ``size`` bytes.
* ``S`` descriptor write (index, offset, size, then ``size`` bytes), answered by ``<i`` status.
* ``A`` DMA address of an address-list index, answered by ``<iQ`` (status, address).
* ``E`` end of the call (return value, task-complete flag).
* ``X`` the child failed (length, text), and it exits next.

A call from the parent is :data:`CALL`: an operation (:data:`OP_INIT` ... :data:`OP_CLEAR`)
and five integer arguments (only ``fw_execute`` uses them). The child ends when the parent closes
its pipe (or kills it), or when the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import struct
import sys

# ---- the protocol (shared with the parent) ------------------------------------------------------
TAG_READY, TAG_REG_READ, TAG_REG_WRITE, TAG_DATA_READ, TAG_DATA_WRITE = b"H", b"R", b"W", b"D", b"S"
TAG_DMA, TAG_LOG, TAG_END, TAG_FAILED = b"A", b"L", b"E", b"X"
READY = struct.Struct("<I")
REG_READ = struct.Struct("<I")
REG_WRITE = struct.Struct("<II")
DATA = struct.Struct("<QQI")
DMA = struct.Struct("<i")
LOG = struct.Struct("<iI")
END = struct.Struct("<iI")
FAILED = struct.Struct("<I")
# the parent's answers and calls
U32 = struct.Struct("<I")
STATUS = struct.Struct("<i")
DMA_ANSWER = struct.Struct("<iQ")
CALL = struct.Struct("<BiIiii")
OP_INIT, OP_EXECUTE, OP_ISR, OP_EVENTS, OP_CLEAR = range(1, 6)
#: buffered messages are sent once they reach this size, even without a message that needs an answer
FLUSH_BYTES = 1 << 16
#: the child's exit status when it stops by itself: the parent went away, or it failed (``X``)
EXIT_PARENT_GONE, EXIT_FAILED = 70, 71

PR_SET_PDEATHSIG = 1


class _Pipe:
    """The child's end of the two pipes; writes are buffered until a message needs an answer."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd
        self.out = bytearray()

    def send(self, tag: bytes, body: bytes, payload: bytes = b"", *, flush: bool = True) -> None:
        self.out += tag
        self.out += body
        self.out += payload
        if flush or len(self.out) >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        view = memoryview(self.out)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]
        view.release()
        del self.out[:]

    def recv(self, n: int) -> bytes:
        data = os.read(self.rfd, n)
        if len(data) == n:
            return data
        buf = bytearray(data)
        while len(buf) < n:
            more = os.read(self.rfd, n - len(buf))
            if not more:  # the parent closed its end or died: nothing left to do
                os._exit(EXIT_PARENT_GONE)
            buf += more
        return bytes(buf)


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the parent dies (if it already has, stop now)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the closed pipe still ends the child between calls
    if os.getppid() != parent:
        os._exit(EXIT_PARENT_GONE)


def _fail(pipe: _Pipe, text: str) -> None:
    data = text.encode("utf-8", "replace")[:4000]
    try:
        pipe.send(TAG_FAILED, FAILED.pack(len(data)), data)
    except OSError:
        pass
    os._exit(EXIT_FAILED)


def _callbacks(pipe: _Pipe) -> tuple:
    """The six ctypes callbacks of ``fw_set_callbacks``, each a message to the parent. None may
    raise into C: any error (the parent gone, memory exhausted) ends the process."""
    reg_read_t = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32)
    reg_write_t = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)
    data_t = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p)
    dma_t = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64))
    log_t = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p)

    def guarded(fn):  # noqa: ANN001, ANN202 - a callback
        def call(*args):  # noqa: ANN002, ANN202
            try:
                return fn(*args)
            except MemoryError:
                _fail(pipe, f"MemoryError in the firmware process (address-space limit "
                      f"{resource.getrlimit(resource.RLIMIT_AS)[0]} bytes)")
            except BaseException as e:  # noqa: BLE001 - a ctypes callback must not raise
                _fail(pipe, f"{type(e).__name__}: {e}")
        return call

    def reg_read(addr: int) -> int:
        pipe.send(TAG_REG_READ, REG_READ.pack(addr))
        return U32.unpack(pipe.recv(4))[0]

    def reg_write(addr: int, value: int) -> None:
        pipe.send(TAG_REG_WRITE, REG_WRITE.pack(addr, value), flush=False)

    def data_read(index: int, offset: int, size: int, buf: int) -> int:
        pipe.send(TAG_DATA_READ, DATA.pack(index, offset, size))
        status = STATUS.unpack(pipe.recv(4))[0]
        if status == 0 and size:
            ctypes.memmove(buf, pipe.recv(size), size)
        return status

    def data_write(index: int, offset: int, size: int, buf: int) -> int:
        pipe.send(TAG_DATA_WRITE, DATA.pack(index, offset, size), ctypes.string_at(buf, size) if size else b"")
        return STATUS.unpack(pipe.recv(4))[0]

    def dma_address(index: int, out) -> int:  # noqa: ANN001 - POINTER(c_uint64)
        pipe.send(TAG_DMA, DMA.pack(index))
        status, address = DMA_ANSWER.unpack(pipe.recv(DMA_ANSWER.size))
        if status == 0:
            out[0] = address
        return status

    def log(level: int, message: bytes) -> None:
        text = message or b""
        pipe.send(TAG_LOG, LOG.pack(level, len(text)), text, flush=False)

    return (reg_read_t(guarded(reg_read)), reg_write_t(guarded(reg_write)), data_t(guarded(data_read)),
            data_t(guarded(data_write)), dma_t(guarded(dma_address)), log_t(guarded(log)))


def main(argv: list[str]) -> None:
    library, rfd, wfd, parent, limit = argv[1], int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops the child
    _die_with_parent(parent)
    pipe = _Pipe(rfd, wfd)
    try:
        if limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        lib = ctypes.CDLL(library)
        lib.fw_execute.argtypes = [ctypes.c_int32, ctypes.c_uint32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]
        lib.fw_process_events.argtypes = [ctypes.POINTER(ctypes.c_uint32)]
        keep = _callbacks(pipe)  # ctypes callbacks must outlive the C side's use of them
        lib.fw_set_callbacks(*keep)
    except (OSError, AttributeError, ValueError, MemoryError) as e:
        _fail(pipe, f"cannot load {library}: {type(e).__name__}: {e}")
    pipe.send(TAG_READY, READY.pack(os.getpid()))
    done = ctypes.c_uint32(0)
    while True:
        op, a, b, c, d, e_ = CALL.unpack(pipe.recv(CALL.size))
        flag = 0
        if op == OP_INIT:
            ret = lib.fw_init()
        elif op == OP_EXECUTE:
            ret = lib.fw_execute(a, b, c, d, e_)
        elif op == OP_ISR:
            ret = lib.fw_isr()
        elif op == OP_EVENTS:
            done.value = 0
            ret = lib.fw_process_events(ctypes.byref(done))
            flag = done.value
        elif op == OP_CLEAR:
            lib.fw_clear_task()
            ret = 0
        else:
            _fail(pipe, f"unknown call {op}")
        pipe.send(TAG_END, END.pack(ret, flag))


if __name__ == "__main__":
    main(sys.argv)
