"""Fuzz units of CDP LRN: ``cdp-lrn`` (INT8, or INT16 on profiles with it) and ``cdp-int16``
(the same generator, its constraints fixing INT16)."""

from __future__ import annotations

import numpy as np

from ....drivers.profiles import HardwareProfile
from ...vectors.layer import RAM_TYPE, Draft, Mem, cdp_lrn_registers, place_feature
from ..blocks import (
    Capture,
    cvt_placeholder,
    data,
    geometry,
    pick_cvt,
    place_lut,
    tables,
)
from ..draw import Sampler
from ..legal import CUBE, CVT, LUT, EnumF, IntF, UnitSpec


def gen_cdp_lrn(s: Sampler, prof: HardwareProfile, capture: Capture) -> Draft:
    """CDP LRN, INT8 or (``precision`` int16, profiles with INT16: the ``cdp-int16`` unit) INT16:
    window 3..9, SQSUM/MUL bypass, the input convertor (fit / saturate / random), LUT tables
    aimed at the layer's square sums, the output convertor fitted to the LUT products. INT16
    widths (``refmodel/cdp.py``): 16-bit DATIN offset, 17-bit converted input, square sums up
    to 2^37, 32-bit DATOUT offset, INT16 output."""
    i16 = s["precision"] == "int16"
    dtype = "int16" if i16 else "int8"
    d = Draft(unit="CDP", profile=prof.name, statistics=True)
    if i16:
        d.features = tuple(sorted(set(d.features) | {"int16"}))
    mem = Mem.for_case(s)
    atom = prof.atom_bytes
    geo = geometry(s, atom)
    x = data(s, (geo.c, geo.h, geo.w), np.int16 if i16 else np.int8)
    src = place_feature(d, mem, "src", x, s["src_port"], atom, geo, dtype=dtype)
    dst = place_feature(d, mem, "dst", (geo.c, geo.h, geo.w), s["dst_port"], atom, geo, output=True, dtype=dtype)
    nl = int(s["normalz_len"])
    cdp_lrn_registers(d, geo.w, geo.h, geo.c, src=src, dst=dst, line=geo.line, surf=geo.surf, precision=int(i16),
                      normalz_len=nl, sqsum_bypass=int(s["sqsum_bypass"]), mul_bypass=int(s["mul_bypass"]),
                      src_ram=RAM_TYPE[s["src_port"]], dst_ram=RAM_TYPE[s["dst_port"]])
    rng = s.rng
    mode = s["cvt_in"]
    off_max = 32767 if i16 else 127  # DATIN_OFFSET: 8 bits used at INT8, 16 at INT16
    if mode == "fit":
        o = 512 if i16 else 8
        cin = {"offset": int(rng.integers(-o, o + 1)), "scale": int(rng.integers(1, 4)), "shift": int(rng.integers(0, 3))}
    elif mode == "saturate":
        cin = {"offset": int(rng.integers(-off_max - 1, off_max + 1)),
               "scale": int(rng.integers(8, 400)) * (1 if rng.random() < 0.7 else -1), "shift": int(rng.integers(0, 3))}
    else:
        cin = {"offset": int(rng.integers(-off_max - 1, off_max + 1)), "scale": int(rng.integers(-32768, 32768)),
               "shift": int(s["cvt_in_shift"])}
    d.convertors["cdp_in"] = cin
    cvt_placeholder(d, "cdp_out")
    # aim the tables at this layer's square sums (a first reference run with any LUT)
    d.lut = {"unit": "CDP", "config": {"le_function": "linear", "lo_index_select": 0, "le_index_select": 0}}
    d.lut_tables = {"le": np.zeros(65, np.int16), "lo": np.zeros(257, np.int16)}
    sums = capture(d)["cdp"][0]["s"]
    lanes = np.arange(sums.shape[-1]) < geo.c
    lo_v, hi_v = (float(v) for v in np.percentile(sums[..., lanes], [2, 98]))
    cfg = place_lut(s, lo_v, max(hi_v, lo_v + 64), cdp=True, bits=16 if i16 else 8)
    d.lut = {"unit": "CDP", "config": cfg}
    d.lut_tables = tables(s)
    t = capture(d)["cdp"][0]["t"]
    d.convertors["cdp_out"] = pick_cvt(s, t, mode=s["cvt"], shift=s["cvt_shift"], offset_bits=32 if i16 else 25,
                                        out_max=32767 if i16 else 127)
    d.description = (f"fuzz cdp-lrn{' int16' if i16 else ''}: window {2 * nl + 3}{' sqsum-bypass' if s['sqsum_bypass'] else ''}"
                     f"{' mul-bypass' if s['mul_bypass'] else ''}, LE {cfg['le_function']}, priorities "
                     f"{cfg['uflow_priority']}/{cfg['oflow_priority']}/{cfg['hybrid_priority']}, layout {s['layout']}, "
                     f"cube {geo.c}x{geo.h}x{geo.w}")
    return d


CDP_LRN_SCHEMA = {**CUBE, "precision": EnumF(("int8", "int16"), "int8", needs={"int16": "int16"}),
                  "normalz_len": IntF(0, 3, 0), "sqsum_bypass": EnumF((0, 1), 0), "mul_bypass": EnumF((0, 1), 0),
                  "cvt_in": EnumF(("fit", "saturate", "random")), "cvt_in_shift": IntF(0, 31, 0), **LUT, **CVT}
_GROUPS = ("cdp.lut", "cdp.cvt", "cdp.cube", "cdp.ports")
CDP_LRN = UnitSpec("cdp-lrn", CDP_LRN_SCHEMA, ("cdp",), _GROUPS, gen_cdp_lrn)
#: the same generator, constraints/cdp-int16.yaml fixing precision: int16
CDP_INT16 = UnitSpec("cdp-int16", CDP_LRN_SCHEMA, ("cdp", "int16"), _GROUPS, gen_cdp_lrn)
