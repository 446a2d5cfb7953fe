"""The runtime's CPU emulator (harness/loadables/emulator.py) on INT8 buffers: softmax and power
with their input/output scale factors, saturated to int8.

Oracles: a hand-worked example, and a C++ program compiled here against NVDLA's own
``half_float`` header (``umd/external/include/half.h`` of an nvdla/sw checkout: NVDLA_SW or
../shared/nvdla_src/sw), the host's ``expf``/``powf`` and ``std::min``/``std::max``/``static_cast``,
doing the arithmetic ``Emulator::executeSoftmax``/``executePower`` do (scale in, softmax in half
precision, scale out, saturate). The Python must equal it bit for bit on random vectors and scales."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nvdla_hil.harness.loadables.emulator import EmuBuffer, EmuOp, run_emu_ops, saturate_int8
from nvdla_hil.harness.loadables.fbs import LoadableError

SHARED_SRC = Path(__file__).resolve().parents[1] / ".." / "shared" / "nvdla_src" / "sw"


def _run(op: EmuOp, mem: dict[int, bytearray]) -> None:
    run_emu_ops([op], lambda i, o, n: bytes(mem[i][o:o + n]),
                lambda i, o, d: mem[i].__setitem__(slice(o, o + len(d)), d))


def _softmax(values: list[int], ins: float, outs: float, fmt: int = 0, dst_channel: int | None = None) -> list[int]:
    n = len(values)
    mem = {0: bytearray(struct.pack(f"<{n}b", *values)) + bytearray(64), 1: bytearray(n + 64)}
    op = EmuOp(1, "2019", {"axis": 0, "input_scale": ins, "output_scale": outs},
               EmuBuffer(0, 0, n, fmt, 1, 1, n, 32, 32), EmuBuffer(1, 0, n, fmt, 1, 1, dst_channel or n, 32, 32))
    _run(op, mem)
    return list(struct.unpack(f"<{dst_channel or n}b", bytes(mem[1][:dst_channel or n])))


def test_int8_softmax_of_ten_zeros_by_hand() -> None:
    """max 0, sumexp 10, half(0.1f) = 0x2E66 = 0.0999755859375; / float(1/127) = 12.697 -> 12
    (truncated toward zero); with output scale 1/1000: 99.97 -> 99."""
    assert _softmax([0] * 10, 1.0, 1 / 127) == [12] * 10
    assert _softmax([0] * 10, 0.5, 1 / 1000) == [99] * 10


def test_int8_softmax_saturates_and_scales_the_input() -> None:
    """One channel far above the others: its probability is 1 (half 0x3C00), the rest 0;
    1/0.001 = 1000 saturates to 127. Input scale 0: every x is 0, so every channel 1/n."""
    assert _softmax([100, -100, -100], 1.0, 0.001) == [127, 0, 0]
    assert _softmax([5, -7, 100], 0.0, 1 / 120) == [39, 39, 39]  # half(1/3) = 0.33325 * 120 = 39.99 -> 39


def test_saturate_follows_min_max_then_truncation() -> None:
    y = np.array([127.9, 128.0, 1e30, -128.9, -1e30, -0.9, 0.9, np.nan, np.inf, -np.inf], np.float32)
    assert saturate_int8(y).tolist() == [127, 127, 127, -128, -128, 0, 0, 0, 127, -128]


def test_int8_softmax_refuses_a_destination_wider_than_its_source() -> None:
    with pytest.raises(LoadableError, match="destination channel 5 exceeds source channel 3"):
        _softmax([1, 2, 3], 1.0, 1.0, dst_channel=5)


def test_int8_in_the_2018_layout_is_refused_naming_the_format() -> None:
    mem = {0: bytearray(64), 1: bytearray(64)}
    op = EmuOp(1, "2018", {"axis": 0, "input_scale": 1.0, "output_scale": 1.0},
               EmuBuffer(0, 0, 4, 0, 1, 1, 4, 32, 32), EmuBuffer(1, 0, 4, 0, 1, 1, 4, 32, 32))
    with pytest.raises(LoadableError, match="format 0 of the 2018 layout"):
        _run(op, mem)


# ---- the C++ oracle: NVDLA's half_float, the host's libm ----------------------------------------
ORACLE = r"""
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <vector>
#include "half.h"
using half_float::half;

static signed char sat(float in) {
    return static_cast<signed char>(std::max(std::min(in, static_cast<float>(std::numeric_limits<signed char>::max())),
                                             static_cast<float>(std::numeric_limits<signed char>::lowest())));
}
static float f(unsigned bits) { float v; std::memcpy(&v, &bits, 4); return v; }

int main() {
    char kind[16]; unsigned n, ib, ob, pb, sb, hb;
    while (std::scanf("%15s %u %x %x %x %x %x", kind, &n, &ib, &ob, &pb, &sb, &hb) == 7) {
        std::vector<signed char> in(n);
        for (unsigned i = 0; i < n; i++) { int v; std::scanf("%d", &v); in[i] = (signed char)v; }
        float ins = f(ib), outs = f(ob);
        std::vector<int> out(n);
        if (kind[0] == 's') {
            std::vector<half> hs(n), hd(n);
            for (unsigned i = 0; i < n; i++) hs[i] = in[i] * ins;
            float mx = -INFINITY;
            for (unsigned i = 0; i < n; i++) if (float(hs[i]) > mx) mx = float(hs[i]);
            float sum = 0.0f;
            for (unsigned i = 0; i < n; i++) sum += expf(float(hs[i]) - mx);
            for (unsigned i = 0; i < n; i++) hd[i] = static_cast<half>(expf(float(hs[i]) - mx) / sum);
            for (unsigned i = 0; i < n; i++) out[i] = sat(hd[i] / outs);
        } else {
            float power = f(pb), scale = f(sb), shift = f(hb);
            for (unsigned i = 0; i < n; i++) {
                float x = static_cast<float>(in[i]);
                x *= ins;
                float y = powf((shift + (scale * x)), power);
                y /= outs;
                out[i] = sat(y);
            }
        }
        for (unsigned i = 0; i < n; i++) std::printf("%d ", out[i]);
        std::printf("\n");
    }
    return 0;
}
"""


def _half_header() -> Path | None:
    for root in (os.environ.get("NVDLA_SW"), str(SHARED_SRC)):
        if root and (Path(root) / "umd/external/include/half.h").is_file():
            return Path(root) / "umd/external/include"
    return None


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    inc = _half_header()
    cxx = shutil.which("g++") or shutil.which("c++")
    if inc is None or cxx is None:
        pytest.skip("needs a C++ compiler and an nvdla/sw checkout (NVDLA_SW) for umd/external/include/half.h")
    d = tmp_path_factory.mktemp("emu_oracle")
    (d / "oracle.cpp").write_text(ORACLE)
    # -ffp-contract=off: the runtime is built without fused multiply-adds on x86-64 (no -march)
    subprocess.run([cxx, "-O2", "-ffp-contract=off", "-std=c++11", "-w", "-I", str(inc), str(d / "oracle.cpp"),
                    "-o", str(d / "oracle")], check=True, capture_output=True, timeout=300)
    return d / "oracle"


def _bits(x: float) -> str:
    return f"{struct.unpack('<I', struct.pack('<f', x))[0]:x}"


def test_int8_softmax_and_power_equal_the_cpp_arithmetic_bit_for_bit(oracle: Path) -> None:
    rng = random.Random(20261129)
    scales = [1.0, 1 / 127, 1 / 255, 0.05, 0.003, 0.25, 3.7, 64.0, 700.0, 1e-4, 0.0, -0.5]
    cases = []
    for k in range(300):
        n = rng.randint(1, 40)
        vals = [rng.randint(-128, 127) for _ in range(n)]
        if k % 7 == 0:
            vals = [rng.choice((-128, 127, 0)) for _ in range(n)]  # extremes and ties
        kind = "softmax" if k % 3 else "power"
        ins = rng.choice(scales) if k % 5 else rng.uniform(-2, 2)
        outs = rng.choice([s for s in scales if s] + [0.0]) if k % 4 else rng.uniform(1e-3, 1)
        pw = (rng.choice((1.0, 2.0, 0.5, 3.0, -1.0)), rng.uniform(-2, 2), rng.uniform(-3, 3))
        ins, outs = float(np.float32(ins)), float(np.float32(outs))
        pw = tuple(float(np.float32(v)) for v in pw)
        cases.append((kind, vals, ins, outs, pw))
    text = "".join(f"{kind} {len(v)} {_bits(i)} {_bits(o)} {_bits(p[0])} {_bits(p[1])} {_bits(p[2])} "
                   + " ".join(map(str, v)) + "\n" for kind, v, i, o, p in cases)
    got = subprocess.run([str(oracle)], input=text, capture_output=True, text=True, check=True, timeout=60).stdout
    expected = [[int(t) for t in line.split()] for line in got.splitlines()]
    assert len(expected) == len(cases)
    saturated = 0
    for (kind, vals, ins, outs, pw), exp in zip(cases, expected):
        if kind == "softmax":
            mine = _softmax(vals, ins, outs)
        else:
            n = len(vals)
            mem = {0: bytearray(struct.pack(f"<{n}b", *vals)) + bytearray(64), 1: bytearray(n + 64)}
            params = {"power": pw[0], "scale": pw[1], "shift": pw[2], "input_scale": ins, "output_scale": outs}
            # one row of one channel atom each: width n, line stride 32*n (32 int8 per atom)
            op = EmuOp(0, "2019", params, EmuBuffer(0, 0, n, 0, n, 1, 1, 32 * n, 32 * n),
                       EmuBuffer(1, 0, n, 0, n, 1, 1, 32 * n, 32 * n))
            mem = {0: bytearray(32 * n), 1: bytearray(32 * n)}
            for w, v in enumerate(vals):
                mem[0][32 * w] = v & 0xFF
            _run(op, mem)
            mine = [int(np.int8(np.uint8(mem[1][32 * w]))) for w in range(n)]
        assert mine == exp, (kind, vals, ins, outs, pw)
        saturated += sum(v in (127, -128) for v in exp)
    assert saturated > 50  # the saturating branch was exercised, not only the in-range one
