"""Output comparison rules of seed 001 ("FP16 error threshold").

| rule          | pass condition per element (a = reference, b = NVDLA output)                 |
|---------------|------------------------------------------------------------------------------|
| ``bitexact``  | SDP (and every INT8/INT16 output): bit-by-bit identical                       |
| ``cc_dc``     | ``fabs(a-b) <= 2^(max_exp-20) * R*S*C * 2 * scale + 2^(exp(a)-10)``           |
| ``cc_winograd``| ``fabs(a-b) <= 2^(max_exp-20) * 18*C * 2 * scale + 2^(exp(a)-10)``           |
| ``cdp``/``pdp``| ``fabs(a-b) <= 0.0001 && fabs(a-b)/max_value <= 0.001``                      |

``exp(a) = ((a >> 10) & 0x1f) - 15`` on the FP16 bit pattern of the reference ``a``;
``max_exp`` = max over the kernel window of ``(exp(data) & ~3) + (exp(wt) & ~3)`` (``cc_max_exp``);
``max_value`` = the maximum inside the element's square-sum window (CDP, ``cdp_max_value``) or
pooling window (PDP, ``pdp_max_value``). Choices where the seed is silent: the magnitude
``|max_value|`` is used (a negative window maximum would otherwise pass everything); two NaNs
compare equal under the threshold rules (the NaN payload is undefined, seed 000), and under
``bitexact`` only with ``nan_equal=True``.

Every comparison returns a ``CompareResult`` whose ``format()`` gives a one-line failure message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..refmodel import fp16 as _fp16

__all__ = [
    "Mismatch", "CompareResult", "RULES",
    "compare", "compare_bitexact", "compare_cc_direct", "compare_cc_winograd", "compare_cdp",
    "compare_pdp", "fp16_exp", "cc_max_exp", "cdp_max_value", "pdp_max_value",
    "InformationContent", "information_content",
]

CDP_PDP_ABS_LIMIT = 0.0001
CDP_PDP_REL_LIMIT = 0.001


@dataclass(frozen=True)
class Mismatch:
    """One element: its index (in ``shape`` coordinates), reference, output, error and limit."""

    index: tuple[int, ...]
    expected: Any
    actual: Any
    error: float
    limit: float | None = None

    def describe(self, fmt: Callable[[Any], str]) -> str:
        idx = "(" + ",".join(str(i) for i in self.index) + ")"
        s = f"{idx} expected {fmt(self.expected)} got {fmt(self.actual)}"
        if self.limit is not None:
            s += f" (error {self.error:.6g} > limit {self.limit:.6g})" if self.error > self.limit \
                else f" (error {self.error:.6g}, limit {self.limit:.6g})"
        elif self.error:
            s += f" (error {self.error:.6g})"
        return s


@dataclass
class CompareResult:
    """Outcome of one comparison. ``worst`` is the element with the largest error relative to
    its limit (largest absolute error for ``bitexact``); ``first`` are the first failing
    elements in memory order (row-major over ``shape``)."""

    passed: bool
    rule: str
    n_elements: int
    n_failed: int
    worst: Mismatch | None = None
    first: list[Mismatch] = field(default_factory=list)
    shape: tuple[int, ...] = ()
    fp16: bool = False

    def __bool__(self) -> bool:
        return self.passed

    def _fmt(self, v: Any) -> str:
        if self.fp16 and isinstance(v, (int, np.integer)):
            return f"{float(np.array(v, dtype=np.uint16).view(np.float16)):.6g} (0x{int(v):04x})"
        if isinstance(v, (float, np.floating)):
            return f"{float(v):.6g}"
        return str(v)

    def format(self) -> str:
        """E.g. ``bit-exact: 3 of 2048 elements differ; first (0,5,1,2) expected 17 got 16;
        worst (0,7,0,0) expected 100 got 90 (error 10)``."""
        name = "bit-exact" if self.rule == "bitexact" else self.rule
        verb = "differ" if self.rule == "bitexact" else "exceed the threshold"
        if self.passed:
            s = f"{name}: all {self.n_elements} elements match"
            if self.worst is not None and self.rule != "bitexact":
                s += f"; worst {self.worst.describe(self._fmt)}"
            return s
        parts = [f"{name}: {self.n_failed} of {self.n_elements} elements {verb}"]
        if self.first:
            parts.append("first " + ", ".join(m.describe(self._fmt) for m in self.first))
        if self.worst is not None:
            parts.append("worst " + self.worst.describe(self._fmt))
        return "; ".join(parts)

    def __str__(self) -> str:
        return self.format()


# ----------------------------------------------------------------------------------------------
# helpers


def _shaped(expected: Any, actual: Any, shape: tuple[int, ...] | None) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    e = np.asarray(expected)
    a = np.asarray(actual)
    if e.size != a.size:
        raise ValueError(f"expected has {e.size} elements, actual has {a.size}")
    if shape is not None:
        shape = tuple(int(s) for s in shape)
        if int(np.prod(shape)) != e.size:
            raise ValueError(f"shape {shape} does not hold {e.size} elements")
    else:
        shape = e.shape if e.shape == a.shape else (e.size,)
    return e.reshape(shape), a.reshape(shape), shape


def _is_fp16(x: np.ndarray) -> bool:
    return x.dtype in (np.uint16, np.float16)


def _values(x: np.ndarray) -> np.ndarray:
    """float64 values of an array: FP16 bit patterns (uint16/float16) are decoded."""
    if _is_fp16(x):
        return _fp16.to_float(x, np.float64)
    return x.astype(np.float64)


def _scalar(x: np.ndarray, i: int) -> Any:
    v = x.reshape(-1)[i]
    return v.item() if hasattr(v, "item") else v


def _build(rule: str, fail: np.ndarray, err: np.ndarray, limit: np.ndarray | None,
           e: np.ndarray, a: np.ndarray, shape: tuple[int, ...], max_report: int, fp16: bool) -> CompareResult:
    fail_f = fail.reshape(-1)
    err_f = np.broadcast_to(err, shape).reshape(-1).astype(np.float64)
    lim_f = None if limit is None else np.broadcast_to(limit, shape).reshape(-1).astype(np.float64)
    e_rep = e.view(np.uint16) if e.dtype == np.float16 else e
    a_rep = a.view(np.uint16) if a.dtype == np.float16 else a

    def mk(i: int) -> Mismatch:
        return Mismatch(
            index=tuple(int(k) for k in np.unravel_index(i, shape)) if shape else (),
            expected=_scalar(e_rep, i), actual=_scalar(a_rep, i), error=float(err_f[i]),
            limit=None if lim_f is None else float(lim_f[i]),
        )

    n = int(fail_f.size)
    n_failed = int(np.count_nonzero(fail_f))
    first = [mk(int(i)) for i in np.flatnonzero(fail_f)[:max_report]]
    worst = None
    if n:
        if lim_f is None:
            key = err_f
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                key = np.where(lim_f > 0, err_f / lim_f, np.where(err_f > 0, np.inf, 0.0))
        key = np.where(np.isnan(key), np.inf, key)
        if n_failed:
            key = np.where(fail_f, key, -np.inf)
        worst = mk(int(np.argmax(key)))
        if not n_failed and worst.error == 0:
            worst = None
    return CompareResult(passed=n_failed == 0, rule=rule, n_elements=n, n_failed=n_failed,
                         worst=worst, first=first, shape=shape, fp16=fp16)


def _nan_aware(ev: np.ndarray, av: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|a-b| with NaN==NaN -> 0 and NaN vs number -> inf. Returns (err, both_nan)."""
    en, an = np.isnan(ev), np.isnan(av)
    with np.errstate(invalid="ignore"):
        err = np.abs(ev - av)
    err = np.where(en & an, 0.0, np.where(en | an, np.inf, err))
    return err, en & an


# ----------------------------------------------------------------------------------------------
# rules


def compare_bitexact(expected: Any, actual: Any, *, shape: tuple[int, ...] | None = None,
                     nan_equal: bool = False, max_report: int = 3) -> CompareResult:
    """SDP rule: bit-by-bit identical. Integer outputs compare as integers; FP16 outputs
    (uint16 bit patterns or float16 arrays) compare as bit patterns, and with ``nan_equal``
    any NaN pattern matches any NaN pattern (payload propagation is undefined, seed 000)."""
    e, a, shape = _shaped(expected, actual, shape)
    if _is_fp16(e) or _is_fp16(a):
        eb, ab = _fp16.as_bits(e), _fp16.as_bits(a)
        fail = eb != ab
        if nan_equal:
            fail &= ~(_fp16.is_nan(eb) & _fp16.is_nan(ab))
        err, _ = _nan_aware(_values(eb), _values(ab))
        err = np.where(fail, err, 0.0)
        return _build("bitexact", fail, err, None, eb, ab, shape, max_report, True)
    if e.dtype.kind == "f" or a.dtype.kind == "f":
        ev, av = e.astype(np.float64), a.astype(np.float64)
        err, both_nan = _nan_aware(ev, av)
        fail = ~((ev == av) | (both_nan & nan_equal))
        return _build("bitexact", fail, np.where(fail, err, 0.0), None, e, a, shape, max_report, False)
    ei, ai = e.astype(np.int64), a.astype(np.int64)
    fail = ei != ai
    err = np.abs(ei - ai).astype(np.float64)
    return _build("bitexact", fail, err, None, e, a, shape, max_report, False)


def fp16_exp(bits: Any) -> np.ndarray:
    """``exp(a) = ((a >> 10) & 0x1f) - 15`` on FP16 bit patterns (int64; zero/denormal -> -15)."""
    b = _fp16.as_bits(bits).astype(np.int64)
    return ((b >> 10) & 0x1F) - 15


def _cc_limit(expected_bits: np.ndarray, max_exp: Any, taps: Any, scale: float) -> np.ndarray:
    me = np.asarray(max_exp, dtype=np.float64)
    return np.exp2(me - 20) * np.asarray(taps, dtype=np.float64) * 2.0 * scale \
        + np.exp2(fp16_exp(expected_bits).astype(np.float64) - 10)


def _threshold(rule: str, e: np.ndarray, a: np.ndarray, shape: tuple[int, ...], limit: np.ndarray,
               max_report: int) -> CompareResult:
    ev, av = _values(e), _values(a)
    err, _ = _nan_aware(ev, av)
    limit = np.broadcast_to(np.asarray(limit, dtype=np.float64), shape)
    fail = ~(err <= limit)
    return _build(rule, fail, err, limit, e, a, shape, max_report, _is_fp16(e))


def _require_fp16(e: np.ndarray, rule: str) -> np.ndarray:
    if not _is_fp16(e):
        raise TypeError(f"{rule}: expected must be FP16 bit patterns (uint16) or float16, not {e.dtype}")
    return _fp16.as_bits(e)


def compare_cc_direct(expected: Any, actual: Any, *, max_exp: Any, r: int, s: int, c: int,
                      scale: float = 1.0, shape: tuple[int, ...] | None = None,
                      max_report: int = 3) -> CompareResult:
    """CC direct convolution: ``fabs(a-b) <= 2^(max_exp-20)*R*S*C*2*scale + 2^(exp(a)-10)``.
    ``expected``/``actual`` are FP16 (uint16 bit patterns or float16); ``max_exp`` is a scalar
    or an array broadcastable to ``shape`` (see ``cc_max_exp``)."""
    e, a, shape = _shaped(expected, actual, shape)
    eb = _require_fp16(e, "cc_dc")
    limit = _cc_limit(eb, np.broadcast_to(max_exp, shape), r * s * c, scale)
    return _threshold("cc_dc", e, a, shape, limit, max_report)


def compare_cc_winograd(expected: Any, actual: Any, *, max_exp: Any, c: int, scale: float = 1.0,
                        shape: tuple[int, ...] | None = None, max_report: int = 3) -> CompareResult:
    """CC Winograd: ``fabs(a-b) <= 2^(max_exp-20)*18*C*2*scale + 2^(exp(a)-10)``."""
    e, a, shape = _shaped(expected, actual, shape)
    eb = _require_fp16(e, "cc_winograd")
    limit = _cc_limit(eb, np.broadcast_to(max_exp, shape), 18 * c, scale)
    return _threshold("cc_winograd", e, a, shape, limit, max_report)


def _cdp_pdp(rule: str, expected: Any, actual: Any, max_value: Any, shape: tuple[int, ...] | None,
             max_report: int) -> CompareResult:
    e, a, shape = _shaped(expected, actual, shape)
    ev, av = _values(e), _values(a)
    err, _ = _nan_aware(ev, av)
    mv = np.abs(np.broadcast_to(np.asarray(max_value, dtype=np.float64), shape))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(err == 0, 0.0, err / mv)
    fail = ~(err <= CDP_PDP_ABS_LIMIT) | ~(rel <= CDP_PDP_REL_LIMIT)
    # the reported limit is the tighter of the two conditions for that element
    limit = np.minimum(CDP_PDP_ABS_LIMIT, CDP_PDP_REL_LIMIT * mv)
    return _build(rule, fail, err, limit, e, a, shape, max_report, _is_fp16(e))


def compare_cdp(expected: Any, actual: Any, *, max_value: Any, shape: tuple[int, ...] | None = None,
                max_report: int = 3) -> CompareResult:
    """CDP: ``fabs(a-b) <= 0.0001 && fabs(a-b)/max_value <= 0.001``; ``max_value`` per element
    (maximum inside its square-sum window, ``cdp_max_value``) or a scalar."""
    return _cdp_pdp("cdp", expected, actual, max_value, shape, max_report)


def compare_pdp(expected: Any, actual: Any, *, max_value: Any, shape: tuple[int, ...] | None = None,
                max_report: int = 3) -> CompareResult:
    """PDP: same condition as CDP; ``max_value`` = maximum inside the pooling window."""
    return _cdp_pdp("pdp", expected, actual, max_value, shape, max_report)


RULES: dict[str, Callable[..., CompareResult]] = {
    "bitexact": compare_bitexact,
    "sdp": compare_bitexact,
    "cc_dc": compare_cc_direct,
    "cc_winograd": compare_cc_winograd,
    "cdp": compare_cdp,
    "pdp": compare_pdp,
}


def compare(rule: str, expected: Any, actual: Any, **kwargs: Any) -> CompareResult:
    """Dispatch by rule name (keys of ``RULES``)."""
    try:
        fn = RULES[rule]
    except KeyError:
        raise ValueError(f"unknown comparison rule {rule!r}; expected one of {sorted(RULES)}") from None
    return fn(expected, actual, **kwargs)


# ----------------------------------------------------------------------------------------------
# per-element parameters of the thresholds


def cc_max_exp(data: Any, weight: Any, *, stride: tuple[int, int] = (1, 1),
               padding: tuple[int, int, int, int] = (0, 0, 0, 0), dilation: tuple[int, int] = (1, 1)) -> np.ndarray:
    """``max_exp`` of seed 001 for every output element of a direct convolution.

    ``data``: FP16 bits (N, C, H, W); ``weight``: FP16 bits (K, C, R, S); ``padding`` =
    (left, right, top, bottom) with padding value 0 (FP16 has no offset, seed 001), whose
    exponent is -15 like any zero. Returns int64 (N, K, Ho, Wo):
    ``max_{r,s,c} (exp(data) & ~3) + (exp(wt) & ~3)``.
    """
    d = fp16_exp(data) & ~3
    w = fp16_exp(weight) & ~3
    if d.ndim != 4 or w.ndim != 4 or d.shape[1] != w.shape[1]:
        raise ValueError(f"need data (N,C,H,W) and weight (K,C,R,S) with equal C, got {d.shape} and {w.shape}")
    pl, pr, pt, pb = padding
    zero_exp = (-15) & ~3
    d = np.pad(d, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=zero_exp)
    k, c, r, s = w.shape
    dy, dx = dilation
    win = sliding_window_view(d, ((r - 1) * dy + 1, (s - 1) * dx + 1), axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1], ::dy, ::dx]  # (N, C, Ho, Wo, R, S)
    out = np.empty((d.shape[0], k) + win.shape[2:4], dtype=np.int64)
    for kk in range(k):  # per kernel: vectorised over N, C, Ho, Wo, R, S
        out[:, kk] = (win + w[kk][None, :, None, None, :, :]).max(axis=(1, 4, 5))
    return out


def cdp_max_value(values: Any, normalz_len: int) -> np.ndarray:
    """Per element of an (N, C, H, W) cube: the maximum magnitude inside its LRN square-sum
    window, channels ``c-(L+1) .. c+(L+1)`` with ``L = NORMALZ_LEN`` (0..3, i.e. 3..9 taps);
    channels outside the cube are absent. FP16 bit patterns are decoded."""
    v = np.abs(_values(np.asarray(values)))
    if v.ndim != 4:
        raise ValueError(f"need an (N, C, H, W) cube, got shape {v.shape}")
    h = normalz_len + 1
    p = np.pad(v, ((0, 0), (h, h), (0, 0), (0, 0)), constant_values=-np.inf)
    return sliding_window_view(p, 2 * h + 1, axis=1).max(axis=-1)


def pdp_max_value(values: Any, kernel: tuple[int, int], *, stride: tuple[int, int] = (1, 1),
                  padding: tuple[int, int, int, int] = (0, 0, 0, 0)) -> np.ndarray:
    """Per output element of a pooling layer: the maximum magnitude inside its window.
    ``values`` (N, C, H, W), ``kernel`` = (height, width), ``padding`` = (left, right, top,
    bottom); padded positions are ignored."""
    v = np.abs(_values(np.asarray(values)))
    if v.ndim != 4:
        raise ValueError(f"need an (N, C, H, W) cube, got shape {v.shape}")
    pl, pr, pt, pb = padding
    p = np.pad(v, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-np.inf)
    win = sliding_window_view(p, kernel, axis=(2, 3))[:, :, ::stride[0], ::stride[1]]
    return win.max(axis=(-2, -1))


# ----------------------------------------------------------------------------------------------
# information content of a golden: can a comparison with it tell a right layer from a wrong one?

#: FP16 largest finite magnitude (0x7bff)
FP16_MAX = 65504.0


@dataclass(frozen=True)
class InformationContent:
    """What an output's golden can tell apart: its element count, its distinct values (bit
    patterns), how many elements sit at an extreme of the element type (int8 -128 / 127, the
    int16 / int32 limits, FP16 / FP32 +-inf and +-max finite), the one value when there is only
    one, and whether every byte of its memory image is the poison byte (the layer wrote nothing)."""

    elements: int
    distinct: int
    saturated: int
    dtype: str
    value: str | None = None  # the single value (distinct == 1), formatted
    all_poison: bool = False

    @property
    def single_value(self) -> bool:
        return self.distinct <= 1

    @property
    def saturated_share(self) -> float:
        return self.saturated / self.elements if self.elements else 0.0

    @property
    def fully_saturated(self) -> bool:
        return self.elements > 0 and self.saturated == self.elements

    def describe(self) -> str:
        """E.g. ``golden is one value (0) in all 4096 elements`` or ``37 distinct values in 760
        elements, 2.1% at the int8 extremes``."""
        if self.all_poison:
            return f"output all poison: the layer wrote nothing ({self.elements} elements)"
        if self.single_value:
            where = f"all {self.elements} elements" if self.elements != 1 else "its only element"
            return f"golden is one value ({self.value}) in {where}"
        s = f"{self.distinct} distinct values in {self.elements} elements"
        if self.saturated:
            s += f", {100 * self.saturated_share:.3g}% at the {self.dtype} extremes"
        return s


def _extreme(values: np.ndarray) -> np.ndarray:
    """Elements at an extreme of their type: integer min / max, float +-inf or +-max finite
    (FP16 bit patterns in uint16 are not told apart from integers: pass float16)."""
    if values.dtype.kind in "iu":
        info = np.iinfo(values.dtype)
        return (values == info.min) | (values == info.max)
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.isinf(values) | (np.abs(values) == np.finfo(values.dtype).max)
    return np.zeros(values.shape, dtype=bool)


def _format_value(v: np.ndarray) -> str:
    x = v.reshape(-1)[0]
    if v.dtype.kind == "f":
        bits = np.array(x).view(f"u{v.dtype.itemsize}")
        return f"{float(x):g} (0x{int(bits):0{2 * v.dtype.itemsize}x})"
    return str(int(x))


def information_content(values: Any, image: Any = None, *, poison: int | None = None) -> InformationContent:
    """:class:`InformationContent` of a golden: ``values`` its elements (unpacked, without
    padding), ``image`` its memory image (bytes) and ``poison`` the byte outputs hold before the
    layer runs (an image of nothing but it was never written)."""
    v = np.asarray(values)
    flat = np.ascontiguousarray(v).reshape(-1)
    n = int(flat.size)
    if n and flat.dtype.kind in "fc":  # bit patterns: +0 / -0 and NaN payloads count apart, as bit-exact does
        keys = flat.view(f"u{flat.dtype.itemsize}")
    else:
        keys = flat
    distinct = int(np.unique(keys).size) if n else 0
    saturated = int(np.count_nonzero(_extreme(flat))) if n else 0
    all_poison = False
    if image is not None and poison is not None:
        img = np.frombuffer(bytes(image), dtype=np.uint8) if isinstance(image, (bytes, bytearray)) \
            else np.asarray(image, dtype=np.uint8).reshape(-1)
        all_poison = bool(img.size) and bool(np.all(img == (poison & 0xFF)))
    return InformationContent(n, distinct, saturated, str(flat.dtype), _format_value(flat) if distinct == 1 else None,
                              all_poison)

