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
* A 3:2 carry-save adder gives ``s = a ^ b ^ c`` and ``carry = maj(a, b, c) << 1``; since
  ``a + b + c = s + 2 maj(a, b, c)`` for integers, ``carry = (a + b + c - s) mod 2^32``, and
  a chain of adders keeps the running total ``T`` of its inputs (``s + carry = T`` mod 2^32).
  The sum and carry words themselves are kept (their separate right shifts set the rounding).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["FP44_NAN_EXP", "booth_product", "booth_tables", "fp16_mac_groups", "fp16_mac_steps", "nan_steps"]

FP44_NAN_EXP = 0x3F
U32 = np.uint32
_OFF4 = -200  # 4 x the coarse exponent of a masked (+-0) operand: its products align by >= 144 bits, i.e. to 0
_CHUNK = 1 << 15  # products per chunk (13 uint32 work arrays of 128 KiB stay in a 2 MiB L2)
# cal_fp16_booth's sign-compensation constant for alignment shift sh (0, 4 .. 28) is the table
# 0xAAAB0000, 0xFAAAB000, .. 0xFFFFAAAB, 0xFFFFFAAB, 0xFFFFFFAB, 0xFFFFFFFB, i.e. ceil(C / 2^sh)
# for C = 0xAAAB0000 as int32 = -0x55550000 (C's low 16 bits are 0: exact up to sh = 16, the
# next power rounded up above), = -(0x55550000 >> sh) mod 2^32; 0 for sh >= 32 as well
_COMP_NEG = np.uint32(0x55550000)
_SM = np.array([0, 1, 1, 2, -2, -1, -1, 0], dtype=np.int64)  # Booth code -> signed multiple of dm
_INV = np.array([0, 0, 0, 0, 1, 1, 1, 0], dtype=np.int64)  # Booth code -> partial product inverted
_PP_SLOT = (0, 1, 2, 3, 5, 6, 7, 8)  # carry-save input holding partial product i (csa_pp[] of the C model)


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


def _carry_save(a: list[np.ndarray], k: list[np.ndarray], dk: list[np.ndarray] | None, dmf: np.ndarray,
                sdf: np.ndarray, bufs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The ten partial products of every product through ``cal_fp16_booth``'s carry-save tree
    (inputs 0-4 and 5-9 each by three adders, then two more, in the C model's order): returns
    the final sum and carry words (uint32). ``dmf``: the data significands (signed, mod 2^32)
    at the full chunk shape, ``a``/``k`` broadcast against it; ``dk``/``sdf``: for data of
    both signs, ``K`` of a negative datum minus ``K`` of a positive one, and 1 where the datum
    is negative (full shape; not read without ``dk``). ``bufs``: ten work arrays of the chunk shape."""
    x0, x1, x2, s, t, c, s2, t2, c2, tmp = bufs

    def pp(j: int, out: np.ndarray) -> np.ndarray:
        if j in (4, 9):  # inversion bits only
            if dk is None:
                return k[j]  # a constant per weight: used broadcast
            np.multiply(sdf, dk[j], out=out)
        else:
            np.multiply(dmf, a[j - (j > 4)], out=out)
            if dk is not None:
                out += np.multiply(sdf, dk[j], out=tmp)
        out += k[j]
        return out

    for base, (s_, t_, c_) in ((0, (s, t, c)), (5, (s2, t2, c2))):
        p0, p1, p2 = pp(base, x0), pp(base + 1, x1), pp(base + 2, x2)
        np.add(p0, p1, out=t_)
        t_ += p2
        np.bitwise_xor(p0, p1, out=s_)
        s_ ^= p2
        np.subtract(t_, s_, out=c_)
        for j in (base + 3, base + 4):
            p = pp(j, x0)
            s_ ^= c_
            s_ ^= p
            t_ += p
            np.subtract(t_, s_, out=c_)
    for p in (s2, c2):  # (sum, carry) of 0-4 with the sum, then the carry of 5-9
        s ^= c
        s ^= p
        t += p
        np.subtract(t, s, out=c)
    return s, c


def booth_product(neg: np.ndarray, wm: np.ndarray, dm: np.ndarray, sft: np.ndarray) -> np.ndarray:
    """``(+-wm * dm) >> sft`` as the C model's Booth/carry-save multiplier computes it (int64).

    ``wm``/``dm``: pre-shifted significands (< 2^14), ``neg``: product sign, ``sft``: alignment
    shift (a multiple of 4; >= 32 gives 0). cmod/cmac/NV_NVDLA_cmac.h ``cal_fp16_booth``."""
    neg, wm, dm, sft = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in (neg, wm, dm, sft)))
    shape = neg.shape
    a, k, _ = booth_tables(wm.ravel(), neg.ravel())
    bufs = [np.empty(neg.size, dtype=U32) for _ in range(10)]
    dmf = dm.ravel().astype(U32)
    s, c = _carry_save(a, k, None, dmf, dmf, bufs)
    sft = sft.ravel()
    sh = np.where((sft >= 0) & (sft < 32), sft, 32).astype(U32)  # numpy's shift by >= the width gives 0
    s >>= sh
    c >>= sh
    s += c
    s -= np.where((sft & 3) == 0, _COMP_NEG >> sh, 0).astype(U32)  # no constant for a shift not in the table
    return s.view(np.int32).astype(np.int64).reshape(shape)


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
    n = d.shape[2]
    wc, wm, ws, wnan = _operands(w)
    dc, dm, ds, dnan = _operands(d)
    # a channel whose weight is +-0 for every kernel, or whose datum is for every pixel, adds
    # only masked products (0) and leaves the maximum coarse sum alone: it is left out
    keep = (wc != _OFF4).any(axis=1) & (dc != _OFF4).any(axis=2)  # (S, Cs)
    cm = int(keep.sum(axis=1).max(initial=0))
    if cm < cs:
        order = np.argsort(~keep, axis=1, kind="stable")[:, :cm]  # kept channels first
        wc, wm, ws = (np.take_along_axis(x, order[:, None, :], axis=2) for x in (wc, wm, ws))
        dc, dm, ds = (np.take_along_axis(x, order[:, :, None], axis=1) for x in (dc, dm, ds))
    exp = np.zeros((ns, k, n), dtype=np.int64)
    mant = np.zeros((ns, k, n), dtype=np.int64)
    if cm:
        _mac_core(wc, wm, ws, dc, dm, ds, exp, mant)
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
    wc, wm, ws, _ = _operands(w)
    dc, dm, ds, _ = _operands(d)
    exp = np.zeros((ns, k, d.shape[2]), dtype=np.int64)
    mant = np.zeros((*exp.shape, cs // group), dtype=np.int64)
    _mac_core(wc, wm, ws, dc, dm, ds, exp, mant, group)
    return exp, mant


def _orient(wc: np.ndarray, wm: np.ndarray, ws: np.ndarray, dc: np.ndarray, dm: np.ndarray, ds: np.ndarray,
            kin: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:  # fmt: skip
    """Channels outermost (the channel max and sum then add whole contiguous blocks), the longer
    of kernels and pixels innermost: weight operands (S, K, Cs) -> (Cs, S, K, 1) or (Cs, S, 1, K),
    data (S, Cs, N) -> (Cs, S, 1, N) or (Cs, S, N, 1)."""
    wt = [np.ascontiguousarray(x.transpose(2, 0, 1)) for x in (wc, wm, ws)]
    dt = [np.ascontiguousarray(x.transpose(1, 0, 2)) for x in (dc, dm, ds)]
    if kin:
        return [x[:, :, None, :] for x in wt], [x[..., None] for x in dt]
    return [x[..., None] for x in wt], [x[:, :, None, :] for x in dt]


def _mac_core(wc: np.ndarray, wm: np.ndarray, ws: np.ndarray, dc: np.ndarray, dm: np.ndarray, ds: np.ndarray,
              exp: np.ndarray, mant: np.ndarray, group: int = 0) -> None:  # fmt: skip
    """Exponent alignment, Booth products and channel sums of :func:`fp16_mac_steps` (in place),
    in chunks of about ``_CHUNK`` products (layout: :func:`_orient`), the weights' Booth
    recoding looked up per chunk into reused work arrays; ``group``: sums of consecutive
    channel groups into ``mant``'s last axis (:func:`fp16_mac_groups`)."""
    cs, ns, nk = wc.shape[2], wc.shape[0], wc.shape[1]
    nn = dc.shape[2]
    kin = nk > nn  # kernels innermost
    (wc, wm, ws), (dc, dm, ds) = _orient(wc, wm, ws, dc, dm, ds, kin)
    on_d = dc != _OFF4
    pos, negd = bool((on_d & (ds == 0)).any()), bool((on_d & (ds == 1)).any())
    mixed = pos and negd  # else the recoding for the one data sign throughout
    if mixed:  # a negative datum: A negated (the sign goes into dm), K of the mirrored codes (+ dK)
        dm = np.where(ds == 1, -dm, dm)
    elif negd:  # every datum negative: the recoding of the opposite product sign throughout
        ws = ws ^ 1
    dmu = dm.astype(U32)  # mod 2^32
    w_ops = [wc, wm, ws]
    d_ops = [dc, dmu, ds.astype(U32)]
    rows, cols = (d_ops, w_ops) if kin else (w_ops, d_ops)
    na, nb = (nn, nk) if kin else (nk, nn)
    exp_v, mant_v = (exp.swapaxes(1, 2), mant.swapaxes(1, 2)) if kin else (exp, mant)
    per_row = cs * nb
    nrow = max(1, _CHUNK // per_row)
    step_s, step_a = (max(1, nrow // na), na) if nrow >= na else (1, nrow)
    size = step_s * step_a * per_row
    bufs = [np.empty(size, dtype=U32) for _ in range(13)]
    tab_buf = np.empty(28 * (step_s * cs * (nk if kin else step_a)), dtype=U32)
    tabs_at = work_shape = None
    work: list[np.ndarray] = []
    for s0 in range(0, ns, step_s):
        for a0 in range(0, na, step_a):
            r = [x[:, s0 : s0 + step_s, a0 : a0 + step_a] for x in rows]
            c = [x[:, s0 : s0 + step_s] for x in cols]
            (wc_, wm_, ws_), (dc_, dm_, sd_) = (c, r) if kin else (r, c)
            if tabs_at != (s0, a0 if not kin else 0):  # the weights of this chunk (kernels innermost: of the steps)
                tabs, tabs_at = booth_tables(wm_, ws_, diff=mixed, out=tab_buf), (s0, a0 if not kin else 0)
            shape = np.broadcast_shapes(wc_.shape, dc_.shape)
            if work_shape != shape:
                work, work_shape = [b[: math.prod(shape)].reshape(shape) for b in bufs], shape
            c4 = np.add(wc_, dc_, out=work[10].view(np.int32))  # 4 x coarse sum, -400 .. 56
            mx4 = c4.max(axis=0, initial=0)
            sh = np.subtract(mx4, c4, out=c4).view(U32)  # alignment shift, 0 .. 456
            np.copyto(work[11], dm_)
            if mixed:
                np.copyto(work[12], sd_)
            a_tab, k_tab, dk_tab = tabs
            s, cy = _carry_save(a_tab, k_tab, dk_tab, work[11], work[12], work[:10])
            s >>= sh  # a shift by >= 32 gives 0 (numpy), so does the constant
            cy >>= sh
            s += cy
            s -= np.right_shift(_COMP_NEG, sh, out=cy)
            tgt = (slice(s0, s0 + step_s), slice(a0, a0 + step_a))
            prod = s.view(np.int32)
            if group:  # (Cs // group, chunk): the groups' sums on the last axis
                part = prod.reshape(cs // group, group, *prod.shape[1:]).sum(axis=1, dtype=np.int64)
                mant_v[tgt] = np.moveaxis(part, 0, -1)
            else:
                mant_v[tgt] = prod.sum(axis=0, dtype=np.int64)
            exp_v[tgt] = mx4
