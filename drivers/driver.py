"""The NVDLA register driver: named register/field access over any transport.

One driver, several transports (PeakRDL-python's "callbacks are injected" idea): the
driver knows the register map of a hardware profile and turns names into CSB accesses
on whatever :class:`~nvdla_hil.drivers.transport.Transport` it is given.

Register names: ``"SDP.D_CVT_SCALE"``, ``("SDP", "D_CVT_SCALE")`` or trace style
``"NVDLA_SDP.D_CVT_SCALE_0"``. Field values may be integers or enum names.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import IO

from .precision import PrecisionControl
from .profiles import HardwareProfile, load_profile
from .regmap import FieldRangeError, Register, RegisterMap, RegisterMapError
from .transport import AccessRecord, Transport, TransportTimeoutError

__all__ = ["NvdlaDriver", "RegisterVerifyError", "ReadOnlyFieldError", "AccessLog", "LayerTimeoutError"]


class RegisterVerifyError(RegisterMapError):
    """A write read back differently (``write(..., verify=True)``)."""


class ReadOnlyFieldError(RegisterMapError, ValueError):
    """A write to a read-only register or field."""


class LayerTimeoutError(TransportTimeoutError):
    """A launched layer did not raise its done interrupt in time."""


class AccessLog:
    """Records every register access (time, block, register, value, direction).

    Attach to a transport with ``driver.record(log)``; write it as text with ``dump``.
    Lines look like ``12.000312 W SDP.D_CVT_SCALE 0x9004c=0x00000001``.
    """

    def __init__(self, regmap: RegisterMap, stream: IO[str] | None = None) -> None:
        self.regmap = regmap
        self.records: list[AccessRecord] = []
        self._stream = stream
        self._t0 = time.time()

    def name_of(self, address: int) -> str:
        try:
            return self.regmap.by_address(address).full_name
        except RegisterMapError:
            return "?"

    def format(self, rec: AccessRecord) -> str:
        return f"{rec.time - self._t0:12.6f} {rec.direction} {self.name_of(rec.address):40s} {rec.address:#07x}={rec.value:#010x}"

    def __call__(self, rec: AccessRecord) -> None:
        self.records.append(rec)
        if self._stream is not None:
            self._stream.write(self.format(rec) + "\n")

    def dump(self, stream: IO[str]) -> None:
        for rec in self.records:
            stream.write(self.format(rec) + "\n")

    def tail(self, n: int = 20) -> list[str]:
        return [self.format(r) for r in self.records[-n:]]


class NvdlaDriver:
    """Typed register access to one NVDLA through a transport.

    Args:
        transport: an open transport (model, Verilator, serial).
        profile: hardware profile name or object; defaults to the transport's ``profile_name``.
    """

    def __init__(self, transport: Transport, profile: HardwareProfile | str | None = None) -> None:
        self.transport = transport
        if profile is None:
            profile = transport.profile_name
        self.profile = load_profile(profile) if isinstance(profile, str) else profile
        self.regmap: RegisterMap = self.profile.regmap

    # ---- lookup ---------------------------------------------------------------------
    def register(self, name: str | tuple[str, str], reg: str | None = None) -> Register:
        if isinstance(name, tuple):
            return self.regmap.register(*name)
        return self.regmap.register(name, reg)

    def record(self, log: AccessLog | None = None) -> AccessLog:
        """Start recording every register access into ``log`` (a new one if None)."""
        log = log or AccessLog(self.regmap)
        self.transport.add_observer(log)
        return log

    # ---- whole registers -------------------------------------------------------------
    def read(self, name: str | tuple[str, str], reg: str | None = None) -> int:
        r = self.register(name, reg)
        return self.transport.read32(r.address)

    def write(self, name: str | tuple[str, str], value: int, reg: str | None = None, *,
              verify: bool = False, posted: bool = True) -> None:
        """Write a whole register. Bits outside any field must be 0; read-only registers are refused."""
        if not verify and (a := self.regmap.write_address(name, reg)) >= 0 and 0 <= value < 1 << 32:
            self.transport.write32(a, value, posted=posted)  # a writable register, looked up once
            return
        r = self.register(name, reg)
        if not r.writable:
            raise ReadOnlyFieldError(f"{r.full_name} is read-only")
        if not 0 <= value < 1 << 32:
            raise FieldRangeError(f"{r.full_name}: value {value!r} does not fit 32 bits")
        self.transport.write32(r.address, value, posted=posted and not verify)
        if verify:
            back = self.transport.read32(r.address)
            mask = r.writable_mask
            if (back ^ value) & mask:
                raise RegisterVerifyError(
                    f"{r.full_name}: read back {back:#010x} after writing {value:#010x} (mask {mask:#010x})")

    def write_registers(self, settings: Iterable[tuple[str | tuple[str, str], int]]) -> None:
        """:meth:`write` of each ``(name, value)`` in order (the same accesses and errors; a
        register's name is looked up once per register map)."""
        known, addr = self.regmap.write_addresses().get, self.regmap.write_address
        write32 = self.transport.write32
        for name, value in settings:
            a = known(name)
            if a is None:
                a = addr(name)
            if a >= 0 and 0 <= value < 1 << 32:
                write32(a, value)
            else:
                self.write(name, value)  # refused as write() refuses it

    # ---- fields ---------------------------------------------------------------------
    def read_field(self, name: str | tuple[str, str], field: str, reg: str | None = None) -> int:
        address, lsb, mask = self.regmap.field_slot(name, field, reg)
        return (int(self.transport.read32(address)) >> lsb) & mask

    def read_fields(self, name: str | tuple[str, str], reg: str | None = None) -> dict[str, int]:
        """All fields of one register from a single read."""
        r = self.register(name, reg)
        v = self.transport.read32(r.address)
        return {f.name: f.extract(v) for f in r.fields.values()}

    def encode(self, name: str | tuple[str, str], fields: Mapping[str, int | str], *,
               base: int | None = None, reg: str | None = None) -> int:
        """Register value with ``fields`` set over ``base`` (default: the reset value).

        Range-checked per field; enum names accepted; read-only fields refused."""
        return self._encode_reg(self.register(name, reg), fields, base)

    def _encode_reg(self, r: Register, fields: Mapping[str, int | str], base: int | None = None) -> int:
        """:meth:`encode` of a register already looked up."""
        value = r.reset if base is None else base
        for fname, fval in fields.items():
            f = r.field(fname)
            if f.access == "ro":
                raise ReadOnlyFieldError(f"{r.full_name}.{f.name} is read-only")
            value = f.insert(value, fval)
        return value

    def write_fields(self, name: str | tuple[str, str], reg: str | None = None, *,
                     verify: bool = False, **fields: int | str) -> int:
        """Set fields of a register; the others keep their current value (one read, one write).

        Registers with side effects on write (``trigger``), registers that cannot be read
        back and registers whose every writable field is named (nothing of them is kept: the
        hardware ignores what a write puts in read-only bits) are not read first: unnamed fields
        get their reset value. Returns the
        value written. :meth:`set_fields` takes the fields as a mapping (field names from user
        input, which could be ``reg`` or ``verify``)."""
        return self.set_fields(name, fields, reg, verify=verify)

    def set_fields(self, name: str | tuple[str, str], fields: Mapping[str, int | str], reg: str | None = None, *,
                   verify: bool = False) -> int:
        """:meth:`write_fields` with the fields as a mapping (the register and fields looked up once
        per register map, :meth:`RegisterMap.set_plan`)."""
        try:
            r, address, read_first, flds = self.regmap.set_plan(name, tuple(fields), reg)
        except RegisterMapError:
            flds = None  # refused below as _encode_reg refuses it, field by field
        if flds is not None:
            value = self.transport.read32(r.address) if read_first else r.reset
            for f, v in zip(flds, fields.values()):
                value = f.insert(value, v)
            if address >= 0 and not (verify and not r.trigger):
                self.transport.write32(address, value)
            else:
                self.write((r.block, r.name), value, verify=verify and not r.trigger)
            return value
        r = self.register(name, reg)
        if r.trigger or not r.readable or (len(fields) >= len(r.fields) and fields.keys() >= r.fields.keys()):
            base = r.reset
        else:
            base = self.transport.read32(r.address)
        value = self._encode_reg(r, fields, base)
        self.write((r.block, r.name), value, verify=verify and not r.trigger)
        return value

    @contextlib.contextmanager
    def modify(self, name: str | tuple[str, str], reg: str | None = None) -> Iterator[dict[str, int | str]]:
        """``with drv.modify("SDP.D_DP_BS_CFG") as f: f["BS_BYPASS"] = 0`` — one read, one write."""
        r = self.register(name, reg)
        current = self.transport.read32(r.address)
        fields: dict[str, int | str] = {f.name: f.extract(current) for f in r.fields.values()}
        yield fields
        changed = {k: v for k, v in fields.items() if r.field(k).extract(current) != v or isinstance(v, str)}
        if changed:
            self.write(r.full_name, self.encode(r.full_name, changed, base=current))

    # ---- register groups, launch, completion ------------------------------------------
    def producer_group(self, block: str) -> int:
        return self.read_field((block, "S_POINTER"), "PRODUCER")

    def consumer_group(self, block: str) -> int:
        return self.read_field((block, "S_POINTER"), "CONSUMER")

    def select_group(self, block: str, group: int) -> None:
        """Point CSB accesses of ``block``'s D_* registers at register group 0 or 1."""
        if group not in (0, 1):
            raise FieldRangeError(f"{block}.S_POINTER.PRODUCER: group must be 0 or 1, not {group!r}")
        self.write_fields((block, "S_POINTER"), PRODUCER=group)

    @contextlib.contextmanager
    def group(self, block: str, group: int) -> Iterator[None]:
        """Temporarily select a register group, restoring the producer pointer after."""
        old = self.producer_group(block)
        self.select_group(block, group)
        try:
            yield
        finally:
            if old != group:
                self.select_group(block, old)

    def launch(self, *blocks: str) -> None:
        """Set D_OP_ENABLE of each block (in the order given, RDMA engines first as NVDLA's traces do)."""
        for b in blocks:
            self.write((b, "D_OP_ENABLE"), 1)

    def intr_bit(self, unit: str, group: int) -> int:
        """Mask of GLB S_INTR_STATUS for ``unit``'s done interrupt of ``group``."""
        _, lsb, mask = self.regmap.field_slot(("GLB", "S_INTR_STATUS"), f"{unit}_DONE_STATUS{group}")
        return mask << lsb

    def wait_done(self, unit: str, group: int, *, timeout: float = 10.0, clear: bool = True,
                  poll_interval: float = 0.0) -> int:
        """Wait for ``unit``'s done interrupt for ``group`` (GLB S_INTR_STATUS, masked by
        S_INTR_MASK) and clear it (write-1-to-clear). Returns the status seen.

        Raises LayerTimeoutError naming the unit, group and the status seen."""
        mask_bit = self.intr_bit(unit, group)
        status_reg = self.regmap.register("GLB", "S_INTR_STATUS")
        mask_reg = self.regmap.register("GLB", "S_INTR_MASK")
        deadline = time.monotonic() + timeout
        status = 0
        while True:
            left = deadline - time.monotonic()
            self.transport.wait_irq(max(0.0, min(left, 1.0)))
            imask = self.transport.read32(mask_reg.address)
            status = self.transport.read32(status_reg.address)
            if (status & ~imask) & mask_bit:
                break
            if self.transport.settled():
                raise LayerTimeoutError(
                    f"{unit} group {group}: no done interrupt, and the {self.transport.profile_name} model has no "
                    f"layer in flight: it never comes (GLB S_INTR_STATUS={status:#010x}, S_INTR_MASK={imask:#010x})")
            if time.monotonic() >= deadline:
                raise LayerTimeoutError(
                    f"{unit} group {group}: no done interrupt within {timeout:g} s "
                    f"(GLB S_INTR_STATUS={status:#010x}, S_INTR_MASK={imask:#010x})")
            if poll_interval:
                time.sleep(poll_interval)
        if clear:
            self.transport.write32(status_reg.address, mask_bit, posted=False)
        return status

    def poll_equal(self, name: str | tuple[str, str], value: int, *, timeout: float = 10.0,
                   mask: int = 0xFFFFFFFF) -> int:
        """Read a register until ``(reg & mask) == value``; TransportTimeoutError naming it otherwise."""
        r = self.register(name)
        deadline = time.monotonic() + timeout
        while True:
            v = self.transport.read32(r.address)
            if (v & mask) == (value & mask):
                return v
            if time.monotonic() >= deadline:
                raise TransportTimeoutError(
                    f"{r.full_name}: read {v:#010x}, waited {timeout:g} s for {value:#010x}")

    # ---- precision control ---------------------------------------------------------------
    @functools.cached_property
    def precision(self) -> PrecisionControl:
        """Precision-control API (LUT tables/config, convertors, statistics)."""
        return PrecisionControl(self)

    def dump(self, blocks: list[str] | None = None) -> dict[str, int]:
        """Read every readable register of ``blocks`` (default: all present). For triage dumps.

        LUT data ports are skipped (reading them advances the table address)."""
        out: dict[str, int] = {}
        for b in blocks or list(self.regmap.blocks):
            try:
                block = self.regmap.block(b)
            except RegisterMapError:
                continue
            for r in block.registers.values():
                if not r.readable or r.name == "S_LUT_ACCESS_DATA":
                    continue
                out[r.full_name] = self.transport.read32(r.address)
        return out
