"""What a trace needs of the hardware: the features it programs (:func:`trace_features`) and
the addresses, ports and registers it uses, checked against a profile before anything is sent
(:func:`check_against_profile`)."""

from __future__ import annotations

from ...drivers.profiles import HardwareProfile
from ...drivers.regmap import RegisterMapError, load_regmap
from .limits import TraceError
from .parse import Trace

__all__ = ["trace_features", "check_against_profile"]


def check_against_profile(trace: Trace, profile: HardwareProfile) -> None:
    """What a trace asks of the hardware, checked against ``profile`` before anything is sent
    (a :class:`TraceError` naming file and line):

    * every ``mem_init``, ``mem_load`` base and ``check_crc`` region lies inside the profile's
      ``mem_address_width``-bit address space (nv_small: 32 bits, ``NVDLA_MEM_ADDRESS_WIDTH`` of
      its .spec), on a memory port it has (``sec_mem`` needs the feature);
    * every ``reg_write`` names a register of a unit the profile has, and a read-only register
      is written only with a value it can hold (bits inside its fields). ``regs write`` refuses
      every read-only write; a trace may not, because NVDLA's own trace generator writes every
      register of a layer, status and performance counters included, with the value it expects
      them to hold (7,194 such writes in nvdla/hw's trace_tests, all of them inside the
      fields): a read-only write of any other value cannot be that and is refused. Bits set
      outside the fields of a writable register are accepted as NVDLA's traces set them (the
      register file drops them)."""
    limit = 1 << int(profile.mem_address_width)
    width = int(profile.mem_address_width)
    for c in trace.commands:
        if c.kind in ("mem_init", "mem_load", "check_crc"):
            if c.kind == "mem_init":
                port, addr, size = c.args[0], c.args[1], c.args[2]
            elif c.kind == "mem_load":
                port, addr, size = c.args[0], c.args[1], 1
            else:
                port, addr, size = c.args[1], c.args[2], c.args[3]
            if port == "sec_mem" and not profile.has("sec_mem"):
                raise TraceError(trace.path, c.line, f"{c.kind} on sec_mem, but {profile.name} has no secondary "
                                                     "memory port (sec_mem)")
            if addr + size > limit:
                raise TraceError(trace.path, c.line, f"{c.kind} {port}[{addr:#x}+{size:#x}] lies outside "
                                                     f"{profile.name}'s {width}-bit address space "
                                                     f"(0..{limit - 1:#x})")
        elif c.kind == "reg_write":
            try:
                reg = profile.regmap.register(c.args[0])
            except RegisterMapError as e:
                raise TraceError(trace.path, c.line, str(e)) from None
            if not reg.writable:
                held = 0
                for f in reg.fields.values():
                    held |= ((1 << (f.msb - f.lsb + 1)) - 1) << f.lsb
                if c.args[1] & ~held:
                    raise TraceError(trace.path, c.line, f"{reg.full_name} is read-only and cannot hold "
                                                         f"{c.args[1]:#x} (its fields: {held:#x}); "
                                                         "regs write refuses it too")


def trace_features(trace: Trace) -> set[str]:
    """Hardware features a trace needs, from what it programs: ``sdp_ew`` when it enables
    the SDP element-wise stage, ``sdp_lut`` when that stage's LUT is on, ``sec_mem`` when it
    uses the secondary memory port. (nv_small has neither SDP EW nor its LUT.)"""
    feats: set[str] = set()
    cfg = load_regmap("v2").register("SDP", "D_DP_EW_CFG")
    for c in trace.of_kind("reg_write"):
        name = c.args[0].upper()
        if name.startswith("NVDLA_SDP.D_DP_EW_CFG"):
            v = c.args[1]
            if not cfg.field("EW_BYPASS").extract(v):
                feats.add("sdp_ew")
                if not cfg.field("EW_LUT_BYPASS").extract(v):
                    feats.add("sdp_lut")
    if any(c.kind in ("mem_init", "mem_load", "check_crc") and "sec_mem" in c.args for c in trace.commands):
        feats.add("sec_mem")
    return feats
