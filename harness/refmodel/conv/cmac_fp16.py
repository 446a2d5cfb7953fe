"""CMAC FP16: the block-floating-point MAC of the nvdlav1 C model, bit for bit, vectorised.

One CMAC step takes one 64-channel slice (PARALLEL_CHANNEL_NUM) of FP16 data and weights
(cmod/cmac/NV_NVDLA_cmac.h, calculation_fp16 / cal_fp16_nan / cal_fp16_exp / cal_fp16_mul /
cal_fp16_booth). A channel takes part when neither its datum nor its weight is +-0 (the CSC
masks, cmod/csc/NV_NVDLA_csc.cpp "Both +0 and -0"). Each FP16 exponent e splits into a coarse
part e >> 2 and a fine part e & 3 (1 for subnormals) that pre-shifts the 11-bit significand;
the products of one step are aligned to the largest coarse exponent sum, in steps of 4 bits,
by a radix-4 Booth multiplier whose two carry-save outputs are shifted right separately and
re-joined with a sign-compensation constant, so the truncation differs from an exact shift
by at most one unit. The step result is "FP44": a 6-bit exponent (4 x the largest coarse sum)
over a 38-bit two's-complement sum, value = sum * 2^(exp - 50). A NaN weight (the first in
channel order) or else a NaN datum makes the step a NaN carrying that sign and payload.
INF is not special here: exponent 31, significand 1.0 (= 65536).

How the multiplier is computed here (each step exact, the identities stated where used):

* Booth recoding depends on the weight and the product sign only, so it is done once per weight
  (:func:`booth_tables`), not per product: partial product ``i`` of ``cal_fp16_booth`` is
  ``m*dm | 0x10000`` or ``~(m*dm) & 0xFFFF`` (``m`` = 0, 1 or 2), i.e. ``+-m*dm + key`` since
  ``m*dm < 2^15``; placed at bit ``2i`` with the previous digit's inversion bit below it (no
  bit overlaps, so ``|`` is ``+``), carry-save input ``j`` is ``dm * A_j + K_j`` (mod 2^32, the
  true value lies in 0 .. 2^31). Negating the product mirrors every digit code (``code ^ 7``):
  ``m`` is unchanged and the sign of every nonzero digit flips, so ``A_j`` of a negative
  datum is ``-A_j``: the datum's sign goes into ``dm`` and only ``K_j`` depends on it.
* A 3:2 carry-save adder gives ``s = a ^ b ^ c`` and ``carry = maj(a, b, c) << 1`` (32 bits).
  The sum and carry words themselves are kept (their separate right shifts set the rounding).
* The products of a step are one compiled loop over the pixels per weight (:func:`_mac_kernel`,
  numba, :mod:`..jit`): the weight's tables are loaded once, every intermediate word stays in a
  vector register, 32-bit lanes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..jit import add32, and32, kernel, mul32, or32, sext64, shl32, shr32, sub32, xor32

__all__ = ["FP44_NAN_EXP", "booth_product", "booth_tables", "fp16_mac_groups", "fp16_mac_step", "fp16_mac_steps",
           "nan_steps"]

FP44_NAN_EXP = 0x3F
U32 = np.uint32
_OFF4 = -200  # 4 x the coarse exponent of a masked (+-0) operand: its products align by >= 144 bits, i.e. to 0
# cal_fp16_booth's sign-compensation constant for alignment shift sh (0, 4 .. 28) is the table
# 0xAAAB0000, 0xFAAAB000, .. 0xFFFFAAAB, 0xFFFFFAAB, 0xFFFFFFAB, 0xFFFFFFFB, i.e. ceil(C / 2^sh)
# for C = 0xAAAB0000 as int32 = -0x55550000 (C's low 16 bits are 0: exact up to sh = 16, the
# next power rounded up above), = -(0x55550000 >> sh) mod 2^32; 0 for sh >= 32 as well
_COMP_NEG = np.uint32(0x55550000)
_ONE, _U31, _U32 = np.uint32(1), np.uint32(31), np.uint32(32)
_SM = np.array([0, 1, 1, 2, -2, -1, -1, 0], dtype=np.int64)  # Booth code -> signed multiple of dm
_INV = np.array([0, 0, 0, 0, 1, 1, 1, 0], dtype=np.int64)  # Booth code -> partial product inverted


def _booth_half(high: bool) -> np.ndarray:
    """Recoding table of one half of the weight: rows ``neg * n + v`` for the ``n`` values ``v``
    of the bits the half's four Booth digits read (low half: digits 0-3, ``wm & 0xFF`` with the
    appended 0 below; high half: digits 4-7, ``wm >> 7``), columns ``A`` of the four digits,
    then ``K`` of carry-save inputs 0-4 (low) or 5-9 (high), then ``K`` of the opposite sign
    minus ``K`` (mod 2^32): shape (14, 2n), uint32."""
    n = 128 if high else 256
    v = np.arange(2 * n, dtype=np.int64) % n
    rev = (np.arange(2 * n) // n) * 7
    w2 = v if high else v << 1
    first = 4 if high else 0
    tab = np.zeros((9, 2 * n), dtype=np.int64)
    inv_prev = np.zeros(2 * n, dtype=np.int64)
    for d in range(4):
        i = first + d  # digit i sits at bit 2i; its inversion bit goes one input up, at bit 2i
        code = ((w2 >> (2 * d)) & 7) ^ rev
        inv = _INV[code]
        tab[d] = _SM[code] << (2 * i)
        tab[4 + d] = ((0x10000 - inv) << (2 * i)) + (inv_prev << (2 * i - 2) if d else 0)
        inv_prev = inv
    tab[8] = inv_prev << (2 * first + 6)  # input 4 / 9: the last digit's inversion bit alone
    dk = np.roll(tab[4:9], n, axis=1) - tab[4:9]  # rows neg and 1 - neg swapped by the roll
    return (np.concatenate([tab, dk]) & 0xFFFFFFFF).astype(U32)


_BOOTH_LO, _BOOTH_HI = _booth_half(False), _booth_half(True)
_BOOTH_LO.flags.writeable = False
_BOOTH_HI.flags.writeable = False


def booth_tables(wm: np.ndarray, neg: np.ndarray, *, diff: bool = False, out: np.ndarray | None = None
                 ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray] | None]:  # fmt: skip
    """Booth recoding of pre-shifted weight significands ``wm`` (< 2^14) for product sign ``neg``,
    looked up per half of the weight (digits 0-3 read ``wm`` bits 0-7, digits 4-7 bits 7-13;
    no carry-save input mixes the halves): ``(A, K, dK)``, 8, 10 (and 10 with ``diff``) uint32
    arrays of ``wm``'s shape such that carry-save input ``j`` of ``cal_fp16_booth`` is
    ``dm * A[i] + K[j]`` (mod 2^32) for the partial product ``i`` it holds (inputs 4 and 9 hold
    only inversion bits), ``K + dK`` for the opposite product sign. ``out``: a flat uint32
    work array of at least 28 x ``wm.size`` elements to fill (else new arrays)."""
    wm = np.asarray(wm)
    neg = np.asarray(neg) & 1
    ncol = 14 if diff else 9
    tabs = []
    for tab, idx, half in ((_BOOTH_LO, (wm & 0xFF) + neg * 256, 0), (_BOOTH_HI, (wm >> 7) + neg * 128, 1)):
        o = None if out is None else out[half * 14 * wm.size : (half * 14 + ncol) * wm.size].reshape(ncol, *wm.shape)
        tabs.append(np.take(tab[:ncol], idx, axis=1, out=o, mode="clip"))  # indices are in range
    lo, hi = tabs
    a = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
    return a, [*lo[4:9], *hi[4:9]], [*lo[9:], *hi[9:]] if diff else None


@njit(inline="always")
def _csa(a: np.uint32, b: np.uint32, c: np.uint32) -> tuple[np.uint32, np.uint32]:
    """One 3:2 carry-save adder: sum ``a ^ b ^ c``, carry ``maj(a, b, c) << 1`` (32 bits)."""
    return xor32(xor32(a, b), c), shl32(or32(or32(and32(a, b), and32(a, c)), and32(b, c)), _ONE)


@njit(inline="always")
def _booth_words(x: np.uint32, m: np.uint32, a: tuple[np.uint32, ...], k: tuple[np.uint32, ...],
                 dk: tuple[np.uint32, ...]) -> tuple[np.uint32, np.uint32]:  # fmt: skip
    """The ten partial products of one product through ``cal_fp16_booth``'s carry-save tree
    (inputs 0-4 and 5-9 each by three adders, then two more, in the C model's order): the final
    sum and carry words. ``x``: the datum's significand, negated (mod 2^32) for a negative
    datum; ``m``: all ones for a negative datum, else 0; ``a``, ``k``, ``dk``: the weight's
    :func:`booth_tables` (8, 10 and 10 words), ``dk`` added where ``m`` is set."""
    p0 = add32(add32(mul32(x, a[0]), k[0]), and32(m, dk[0]))
    p1 = add32(add32(mul32(x, a[1]), k[1]), and32(m, dk[1]))
    p2 = add32(add32(mul32(x, a[2]), k[2]), and32(m, dk[2]))
    p3 = add32(add32(mul32(x, a[3]), k[3]), and32(m, dk[3]))
    p4 = add32(k[4], and32(m, dk[4]))  # inversion bits only
    p5 = add32(add32(mul32(x, a[4]), k[5]), and32(m, dk[5]))
    p6 = add32(add32(mul32(x, a[5]), k[6]), and32(m, dk[6]))
    p7 = add32(add32(mul32(x, a[6]), k[7]), and32(m, dk[7]))
    p8 = add32(add32(mul32(x, a[7]), k[8]), and32(m, dk[8]))
    p9 = add32(k[9], and32(m, dk[9]))  # inversion bits only
    s0, c0 = _csa(p0, p1, p2)
    s0, c0 = _csa(s0, c0, p3)
    s0, c0 = _csa(s0, c0, p4)
    s1, c1 = _csa(p5, p6, p7)
    s1, c1 = _csa(s1, c1, p8)
    s1, c1 = _csa(s1, c1, p9)
    s0, c0 = _csa(s0, c0, s1)  # (sum, carry) of 0-4 with the sum, then the carry of 5-9
    return _csa(s0, c0, c1)


@njit(inline="always")
def _aligned(s: np.uint32, c: np.uint32, sh: np.uint32, comp: bool) -> int:
    """``(s >> sh) + (c >> sh)`` minus the sign-compensation constant shifted alike (``comp``),
    as a signed 32-bit value (int64); 0 for ``sh >= 32`` (``sh`` unsigned)."""
    shc = sh if sh < _U31 else _U31
    v = add32(shr32(s, shc), shr32(c, shc))
    v = sub32(v, shr32(_COMP_NEG, shc)) if comp else v
    return sext64(v) if sh < _U32 else 0


@kernel
def _booth_elementwise(a: np.ndarray, k: np.ndarray, x: np.ndarray, sft: np.ndarray, out: np.ndarray) -> None:
    """:func:`booth_product` for flat operands: tables ``a`` (8, n), ``k`` (10, n), data ``x``."""
    zero = np.uint32(0)
    for i in range(x.size):
        s, c = _booth_words(x[i], zero, (a[0, i], a[1, i], a[2, i], a[3, i], a[4, i], a[5, i], a[6, i], a[7, i]),
                            (k[0, i], k[1, i], k[2, i], k[3, i], k[4, i], k[5, i], k[6, i], k[7, i], k[8, i], k[9, i]),
                            (zero, zero, zero, zero, zero, zero, zero, zero, zero, zero))  # fmt: skip
        sh = sft[i]
        out[i] = _aligned(s, c, np.uint32(sh) if 0 <= sh < 32 else _U32, (sh & 3) == 0)


def booth_product(neg: np.ndarray, wm: np.ndarray, dm: np.ndarray, sft: np.ndarray) -> np.ndarray:
    """``(+-wm * dm) >> sft`` as the C model's Booth/carry-save multiplier computes it (int64).

    ``wm``/``dm``: pre-shifted significands (< 2^14), ``neg``: product sign, ``sft``: alignment
    shift (a multiple of 4 in the MAC; no compensation constant for other shifts; >= 32 gives 0).
    cmod/cmac/NV_NVDLA_cmac.h ``cal_fp16_booth``."""
    neg, wm, dm, sft = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in (neg, wm, dm, sft)))
    a, k, _ = booth_tables(wm.ravel(), neg.ravel())
    out = np.empty(neg.size, dtype=np.int64)
    _booth_elementwise(np.stack(a), np.stack(k), dm.ravel().astype(U32), sft.ravel(), out)
    return out.reshape(neg.shape)


def _operands(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per FP16 operand: (4 x the coarse exponent, _OFF4 for +-0; pre-shifted significand
    (< 2^14, ``cal_fp16_mul``); sign bit), all int32 (every value fits); NaN mask."""
    bits = bits.astype(np.int32)  # 16-bit patterns
    e = (bits >> 10) & 31
    coarse = np.where((bits & 0x7FFF) != 0, e & 0x1C, _OFF4)
    mts = ((bits & 0x3FF) | ((e != 0).astype(np.int32) << 10)) << np.where(e == 0, 1, e & 3)
    return coarse, mts, (bits >> 15) & 1, (e == 31) & ((bits & 0x3FF) != 0)


def nan_steps(w: np.ndarray, d: np.ndarray, wnan: np.ndarray, dnan: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``cal_fp16_nan`` of S steps, weights (S, K, Cs) and data (S, Cs, N) as FP16 patterns with
    their NaN masks: the first NaN weight of the kernel, else the first NaN datum of the pixel,
    makes the step NaN. Returns (S, K, N) masks of the NaN steps and their FP44 mantissas
    (sign << 37 | payload << 27; the exponent is :data:`FP44_NAN_EXP`)."""
    nan_mant = lambda v: (((v >> 15) & 1) << 37) | ((v & 0x3FF) << 27)  # noqa: E731
    wv = np.take_along_axis(w, np.argmax(wnan, axis=2)[:, :, None], axis=2)  # (S, K, 1)
    dv = np.take_along_axis(d, np.argmax(dnan, axis=1)[:, None, :], axis=1)  # (S, 1, N)
    w_any, d_any = np.any(wnan, axis=2)[:, :, None], np.any(dnan, axis=1)[:, None, :]
    return w_any | d_any, np.where(w_any, nan_mant(wv), nan_mant(dv))


def fp16_mac_steps(w_bits: np.ndarray, d_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S FP16 CMAC steps at once: weights (S, K, Cs) and data (S, Cs, N) as FP16 bit patterns
    (Cs <= 64 channels of one slice). Returns FP44 ``(exp, mant)`` int64 arrays (S, K, N):
    ``exp`` 0..56 (or 63 = NaN, ``mant`` then holding sign << 37 | payload << 27), ``mant``
    38-bit signed (the exact int64 sum of the channels' products, as ``calculation_fp16``)."""
    w = np.asarray(w_bits, dtype=np.int64) & 0xFFFF
    d = np.asarray(d_bits, dtype=np.int64) & 0xFFFF
    ns, k, cs = w.shape
    exp, mant, wnan, dnan = _mac_core(w, d, max(cs, 1))
    mant = mant[..., 0] if cs else np.zeros(exp.shape, dtype=np.int64)
    if wnan.any() or dnan.any():
        is_nan, nm = nan_steps(w, d, wnan, dnan)
        mant[...] = np.where(is_nan, nm, mant)
        exp[is_nan] = FP44_NAN_EXP
    return exp, mant


def fp16_mac_groups(w_bits: np.ndarray, d_bits: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """S FP16 CMAC steps whose products are aligned to the largest coarse exponent sum of the
    whole step, as in :func:`fp16_mac_steps`, but summed in consecutive groups of ``group``
    channels (the Winograd step: 16 positions x 4 channels, ``calculation_fp16`` ``pp_phase1``):
    weights (S, K, Cs), data (S, Cs, N) -> ``exp`` (S, K, N), ``mant`` (S, K, N, Cs // group).
    NaN operands are not applied (:func:`nan_steps`: the caller's output transform comes first)."""
    w = np.asarray(w_bits, dtype=np.int64) & 0xFFFF
    d = np.asarray(d_bits, dtype=np.int64) & 0xFFFF
    ns, k, cs = w.shape
    if cs % group:
        raise ValueError(f"{cs} channels are not whole groups of {group}")
    exp, mant, _, _ = _mac_core(w, d, group)
    return exp, mant


@kernel
def _mac_kernel(lo: np.ndarray, hi: np.ndarray, wc: np.ndarray, wm: np.ndarray, ws: np.ndarray, dc: np.ndarray,
                dx: np.ndarray, dneg: np.ndarray, group: int, exp: np.ndarray, mant: np.ndarray) -> None:  # fmt: skip
    """Exponent alignment, Booth products and channel sums of S steps, in place: weights' 4 x
    coarse exponents ``wc``, pre-shifted significands ``wm`` and signs ``ws`` (S, K, Cs), their
    Booth recoding looked up per weight in the half tables ``lo``/``hi`` (:func:`_booth_half`);
    data 4 x coarse exponents ``dc``, signed significands ``dx`` (mod 2^32) and sign masks
    ``dneg`` (S, Cs, N); ``exp`` (S, K, N) gets the largest coarse sum, ``mant`` (S, K, N,
    Cs // group) the sums of consecutive ``group`` channels. A weight of +-0 adds nothing and
    is skipped."""
    ns, nk, cs = wc.shape
    nn = dc.shape[2]
    mx = np.empty(nn, dtype=np.int32)
    acc = np.empty((cs // group, nn), dtype=np.int64)
    for s in range(ns):
        dcu = dc[s].view(np.uint32)
        for k in range(nk):
            mx[:] = 0
            for c in range(cs):
                w4 = wc[s, k, c]
                if w4 != _OFF4:
                    for n in range(nn):
                        mx[n] = max(mx[n], w4 + dc[s, c, n])
            acc[:] = 0
            mxu = mx.view(np.uint32)
            for c in range(cs):
                if wc[s, k, c] == _OFF4:
                    continue
                w4u = np.uint32(wc[s, k, c])
                g = c // group
                il = (wm[s, k, c] & 0xFF) + ws[s, k, c] * 256  # booth_tables' lookup, per weight
                ih = (wm[s, k, c] >> 7) + ws[s, k, c] * 128
                aw = (lo[0, il], lo[1, il], lo[2, il], lo[3, il], hi[0, ih], hi[1, ih], hi[2, ih], hi[3, ih])
                kw = (lo[4, il], lo[5, il], lo[6, il], lo[7, il], lo[8, il], hi[4, ih], hi[5, ih], hi[6, ih], hi[7, ih],
                      hi[8, ih])  # fmt: skip
                dw = (lo[9, il], lo[10, il], lo[11, il], lo[12, il], lo[13, il], hi[9, ih], hi[10, ih], hi[11, ih],
                      hi[12, ih], hi[13, ih])  # fmt: skip
                for n in range(nn):
                    sh = sub32(sub32(mxu[n], w4u), dcu[c, n])  # mx4 - c4 >= 0 (a masked datum: >= 144)
                    sw, cw = _booth_words(dx[s, c, n], dneg[s, c, n], aw, kw, dw)
                    acc[g, n] += _aligned(sw, cw, sh, True)
            for g in range(acc.shape[0]):
                for n in range(nn):
                    mant[s, k, n, g] = acc[g, n]
            for n in range(nn):
                exp[s, k, n] = mx[n]


def _mac_core(w: np.ndarray, d: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_mac_kernel` on FP16 patterns, weights (S, K, Cs) and data (S, Cs, N): ``exp``
    (S, K, N), ``mant`` (S, K, N, Cs // group) and the operands' NaN masks. The weights' Booth
    recoding is that of a positive datum with its difference for a negative one (the datum's
    sign goes into its significand, ``A`` of the mirrored codes being ``-A``)."""
    ns, nk, cs = w.shape
    wc, wm, ws, wnan = _operands(w)
    dc, dm, ds, dnan = _operands(d)
    dx = np.where(ds == 1, -dm, dm).astype(U32)
    exp = np.empty((ns, nk, d.shape[2]), dtype=np.int64)
    mant = np.empty((*exp.shape, cs // group), dtype=np.int64)
    _mac_kernel(_BOOTH_LO, _BOOTH_HI, wc, wm, ws, np.ascontiguousarray(dc), dx, (-ds).astype(U32), group, exp, mant)
    return exp, mant, wnan, dnan


def fp16_mac_step(w_bits: np.ndarray, d_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One FP16 CMAC step: weights (K, Cs) and data (Cs, N) as FP16 bit patterns (Cs <= 64
    channels of one slice). Returns FP44 ``(exp, mant)`` int64 arrays (K, N): ``exp`` 0..56
    (or 63 = NaN, ``mant`` then holding sign << 37 | payload << 27), ``mant`` 38-bit signed.
    :func:`fp16_mac_steps` with one step."""
    exp, mant = fp16_mac_steps(np.asarray(w_bits)[None], np.asarray(d_bits)[None])
    return exp[0], mant[0]
