"""NVDLA weight formats (seed 000 "Weight Format"): direct convolution (kernel groups of
1x1xC' cubes scanned C' -> K -> W -> H -> C), image input (channel pre-extension, 2/4-line
post-extension), Winograd (phase 1 G W G^T, phase 2 4x4x4 cubes) and deconvolution (set
split into stride-phase sub-kernels). Sparse compression of these surfaces: ``compressed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base import (
    LayoutError,
    LayoutSpec,
    Param,
    Piece,
    Plan,
    align_up,
    ceil_div,
    execute_pack,
    execute_unpack,
    from_storage,
    storage_dtype,
    to_storage,
)
from .common import SEED, atom_size, element_dtype, hardware_profile, profile_params

WEIGHT_DATA_ALIGN = 128  # "Append 0s at end of all mapped weight for 128-byte alignment"
WEIGHT_START_ALIGN = 256  # alignment table: uncompressed/compressed weight, WMB, WGS start address


def weight_group_size(params: dict[str, Any], dt: np.dtype) -> int:
    """Kernels per group: 32 for int8, 16 for int16/fp16 on nv_full (seed 000)."""
    g = params.get("kernels_per_group")
    if g is None:
        k = hardware_profile(params["profile"]).mac_atomic_k
        g = k if dt.itemsize == 1 else max(k // 2, 1)
    if g <= 0:
        raise LayoutError(f"kernels_per_group={g} must be positive")
    return int(g)


def weight_cube_elements(params: dict[str, Any]) -> int:
    """Elements per 1x1xC' small cube: 64 on nv_full (seed 000), MAC atomic C otherwise."""
    e = params.get("cube_elements")
    if e is None:
        e = hardware_profile(params["profile"]).mac_atomic_c
    if e <= 0:
        raise LayoutError(f"cube_elements={e} must be positive")
    return int(e)


def _k_groups(K: int, G: int) -> list[tuple[int, int, int]]:
    """(first kernel, number of groups, kernels per group) for the full groups and the tail."""
    out = []
    if K // G:
        out.append((0, K // G, G))
    if K % G:
        out.append(((K // G) * G, 1, K % G))
    return out


def dc_pieces(K: int, C: int, H: int, W: int, G: int, E: int, base: int = 0) -> list[Piece]:
    """Direct-convolution mapping of a (K, C, H, W) tensor: C' -> K -> W -> H -> C per group.

    Seed 000: groups of G kernels (last may be smaller); 1x1xC' cubes with C' <= E elements,
    the last channel block not padded; groups mapped compactly.
    """
    pieces = []
    chw = C * H * W
    cn, cr = C // E, C % E
    for k0, ng, kg in _k_groups(K, G):
        off = base + k0 * chw
        gstride = kg * chw
        ks = slice(k0, k0 + ng * kg)
        if cn:
            pieces.append(Piece((ks, slice(0, cn * E)), (ng, kg, cn, E, H, W), (0, 2, 4, 5, 1, 3), off,
                                (ng, cn, H, W, kg, E), (gstride, E * H * W * kg, W * kg * E, kg * E, E, 1)))
        if cr:
            pieces.append(Piece((ks, slice(cn * E, C)), (ng, kg, cr, H, W), (0, 3, 4, 1, 2), off + cn * E * H * W * kg,
                                (ng, H, W, kg, cr), (gstride, W * kg * cr, kg * cr, cr, 1)))
    return pieces


WEIGHT_PARAMS = profile_params() + (
    Param("kernels_per_group", int, None, "kernels per group (default 32 int8 / 16 int16,fp16 on nv_full)"),
    Param("cube_elements", int, None, "elements per 1x1xC' small cube (default 64 on nv_full)"),
)


def _weight_shape(shape: tuple[int, ...], what: str) -> tuple[int, int, int, int]:
    if len(shape) != 4:
        raise LayoutError(f"{what}: weights are (K, C, H, W) kernels, got shape {shape}")
    return tuple(int(s) for s in shape)  # type: ignore[return-value]  # len checked above


def dc_plan(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> Plan:
    K, C, H, W = _weight_shape(shape, "direct-convolution weight")
    G, E = weight_group_size(p, dt), weight_cube_elements(p)
    n = K * C * H * W * dt.itemsize
    return Plan(align_up(n, WEIGHT_DATA_ALIGN), storage_dtype(dt), tuple(dc_pieces(K, C, H, W, G, E)))


def dc_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(arr.dtype, "weight")
    return execute_pack(to_storage(arr), dc_plan(arr.shape, dt, p))


def dc_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(dt, "weight")
    return from_storage(execute_unpack(buf, dc_plan(shape, dt, p), shape, "nvdla.weight.dc"), dt)


def weight_group_bytes(shape: tuple[int, ...], dt: np.dtype, params: dict[str, Any]) -> list[int]:
    """Uncompressed bytes of each kernel group (the groups WGS counts) for DC-like mappings."""
    K, C, H, W = shape
    G = weight_group_size(params, dt)
    return [min(G, K - k) * C * H * W * np.dtype(dt).itemsize for k in range(0, K, G)]


# image input: channel pre-extension and optional post-extension ----------------------------


def image_pre_extend(weight: np.ndarray) -> np.ndarray:
    """Channel pre-extension: all weights of one kernel line become one channel.

    (K, C, R, S) -> (K, S*C, R, 1) with new channel s*C + c, the order in which a line of S
    pixels of C components lies in memory (seed 000 'Basic Weight for image input').
    """
    K, C, R, S = weight.shape
    return weight.transpose(0, 3, 1, 2).reshape(K, S * C, R, 1)


def image_pre_extend_inverse(ext: np.ndarray, channels: int) -> np.ndarray:
    K, SC, R, _ = ext.shape
    S = SC // channels
    return ext.reshape(K, S, channels, R).transpose(0, 2, 3, 1)


def _image_pieces(K: int, Ce: int, R: int, G: int, E: int, post: int) -> list[Piece]:
    """Post-extension by ``post`` lines on a pre-extended (K, Ce, R) tensor.

    Lines r = g*post + j of a kernel are combined into one row with channel j*Ce + c; the last
    row keeps only the remaining lines ("do NOT append 0s"). Each combined row fits one C' cube.
    """
    rf, rr = R // post, R % post
    pieces = []
    for k0, ng, kg in _k_groups(K, G):
        off = k0 * Ce * R
        gs = kg * Ce * R
        ks = slice(k0, k0 + ng * kg)
        if rf:
            pieces.append(Piece((ks, slice(None), slice(0, rf * post)), (ng, kg, Ce, rf, post), (0, 3, 1, 4, 2), off,
                                (ng, rf, kg, post, Ce), (gs, kg * post * Ce, post * Ce, Ce, 1)))
        if rr:
            pieces.append(Piece((ks, slice(None), slice(rf * post, R)), (ng, kg, Ce, rr), (0, 1, 3, 2),
                                off + rf * kg * post * Ce, (ng, kg, rr, Ce), (gs, rr * Ce, Ce, 1)))
    return pieces


def image_plan(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> tuple[Plan, tuple[int, ...]]:
    K, C, R, S = _weight_shape(shape, "image-input weight")
    G, E = weight_group_size(p, dt), weight_cube_elements(p)
    post = p["post_extension"]
    Ce = S * C
    if post == 1:
        pieces = dc_pieces(K, Ce, R, 1, G, E)
    else:
        limit = E // post  # each line of a MAC step has atomic C / post lanes (profile)
        if Ce > limit:
            raise LayoutError(
                f"image weight post-extension {post}-line needs pre-extended channels <= {E} / {post} = {limit} "
                f"(got S*C = {Ce}); seed 000 for 64-channel atoms: two-line (C<=32) or four-line (C<=16)"
            )
        pieces = _image_pieces(K, Ce, R, G, E, post)
    n = K * C * R * S * dt.itemsize
    return Plan(align_up(n, WEIGHT_DATA_ALIGN), storage_dtype(dt), tuple(pieces)), (K, Ce, R, 1)


def image_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(arr.dtype, "weight")
    plan, _ = image_plan(arr.shape, dt, p)
    ext = image_pre_extend(to_storage(arr))
    return execute_pack(ext if p["post_extension"] == 1 else ext[..., 0], plan)


def image_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(dt, "weight")
    plan, eshape = image_plan(shape, dt, p)
    ushape = eshape if p["post_extension"] == 1 else eshape[:3]
    ext = execute_unpack(buf, plan, ushape, "nvdla.weight.image").reshape(eshape)
    return from_storage(np.ascontiguousarray(image_pre_extend_inverse(ext, shape[1])), dt)


# Winograd -----------------------------------------------------------------------------------

#: Seed 000 'Matrix for weight transfer for Winograd'
WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def winograd_channel_extend(weight: np.ndarray, stride: int) -> np.ndarray:
    """Channel extension for stride != 1: (K, C, 3s, 3s) -> (K, s*s*C, 3, 3).

    Kernels smaller than 3s are zero-padded to 3s. New channel (dy*s + dx)*C + c holds
    w[k, c, y*s + dy, x*s + dx]. The seed only states that the extended kernel is 3x3; the
    channel order here follows the stride phase (dy, dx) then the original channel.
    """
    K, C, R, S = weight.shape
    s = int(stride)
    if s < 1 or R > 3 * s or S > 3 * s:
        raise LayoutError(f"Winograd channel extension: kernel {R}x{S} with stride {s} cannot become 3x3")
    full = np.zeros((K, C, 3 * s, 3 * s), dtype=weight.dtype)
    full[:, :, :R, :S] = weight
    # (K, C, 3, s(dy), 3, s(dx)) -> (K, dy, dx, C, 3, 3)
    return full.reshape(K, C, 3, s, 3, s).transpose(0, 3, 5, 1, 2, 4).reshape(K, s * s * C, 3, 3)


def winograd_phase1(weight: np.ndarray, *, stride: int = 1, atom_bytes: int = 32, scale: float = 1.0,
                    dtype: Any = None) -> np.ndarray:
    """Phase 1: pad C to a 32-byte atom, extend channels for stride != 1, compute G W G^T.

    Returns (K, C', 4, 4) in ``dtype`` (default: the input dtype). Integer results are
    ``round(scale * GWG^T)`` (half away from zero) saturated to the type; the scaling factor is
    the "scaling factor may involve" of seed 000.
    """
    w = np.asarray(weight)
    dt = np.dtype(dtype or w.dtype)
    K, C, R, S = w.shape
    lanes = atom_bytes // dt.itemsize
    cp = align_up(C, lanes)
    if cp != C:
        w = np.concatenate([w, np.zeros((K, cp - C, R, S), w.dtype)], axis=1)
    if stride != 1:
        w = winograd_channel_extend(w, stride)
    elif (R, S) != (3, 3):
        raise LayoutError(f"Winograd weights are 3x3 kernels (got {R}x{S}) for stride 1")
    t = np.einsum("ij,kcjl,ml->kcim", WINOGRAD_G, w.astype(np.float64), WINOGRAD_G) * scale
    if dt.kind == "f":
        return t.astype(dt)
    info = np.iinfo(dt)
    r = np.sign(t) * np.floor(np.abs(t) + 0.5)
    return np.clip(r, info.min, info.max).astype(dt)


def winograd_pieces(K: int, C: int, G: int) -> list[Piece]:
    """Phase 2: 4x4x4-element cubes scanned K -> C inside each group of G kernels.

    Inside a cube the elements go channel (4) fastest, then x, then y -- the feature-data
    order; the seed names the cube size but not its internal order.
    """
    c4 = C // 4
    pieces = []
    for k0, ng, kg in _k_groups(K, G):
        gs = kg * C * 16
        pieces.append(Piece((slice(k0, k0 + ng * kg),), (ng, kg, c4, 4, 4, 4), (0, 2, 1, 4, 5, 3), k0 * C * 16,
                            (ng, c4, kg, 4, 4, 4), (gs, kg * 64, 64, 16, 4, 1)))
    return pieces


def winograd_plan(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> Plan:
    K, C, H, W = _weight_shape(shape, "Winograd weight")
    if (H, W) != (4, 4):
        raise LayoutError(f"Winograd phase-2 weights are 4x4 after G W G^T, got {H}x{W}")
    if C % 4:
        raise LayoutError(f"Winograd: the channel size should always divisible by 4 (got C={C}; seed 000)")
    G = weight_group_size(p, dt)
    return Plan(align_up(K * C * 16 * dt.itemsize, WEIGHT_DATA_ALIGN), storage_dtype(dt), tuple(winograd_pieces(K, C, G)))


def winograd_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(arr.dtype, "weight")
    if p["convert"]:
        arr = winograd_phase1(arr, stride=p["stride"], atom_bytes=atom_size(p), scale=p["scale"])
    return execute_pack(to_storage(arr), winograd_plan(arr.shape, dt, p))


def winograd_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(dt, "weight")
    return from_storage(execute_unpack(buf, winograd_plan(shape, dt, p), shape, "nvdla.weight.winograd"), dt)


# Deconvolution ------------------------------------------------------------------------------


def deconv_split(weight: np.ndarray, stride_x: int, stride_y: int) -> list[np.ndarray]:
    """Set split for deconvolution: one sub-kernel per stride phase (dy, dx), y-phase major.

    Sub-kernel (dy, dx) = w[:, :, dy::sy, dx::sx], zero-padded to ceil(R/sy) x ceil(S/sx).
    """
    K, C, R, S = weight.shape
    rh, sw = ceil_div(R, stride_y), ceil_div(S, stride_x)
    full = np.zeros((K, C, rh * stride_y, sw * stride_x), dtype=weight.dtype)
    full[:, :, :R, :S] = weight
    parts = full.reshape(K, C, rh, stride_y, sw, stride_x)
    return [np.ascontiguousarray(parts[:, :, :, dy, :, dx]) for dy in range(stride_y) for dx in range(stride_x)]


def _deconv_layout(shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> tuple[list[int], tuple[int, ...], int]:
    K, C, R, S = _weight_shape(shape, "deconvolution weight")
    sx, sy = p["stride_x"], p["stride_y"]
    if sx < 1 or sy < 1:
        raise LayoutError("deconvolution strides must be >= 1")
    sub = (K, C, ceil_div(R, sy), ceil_div(S, sx))
    size = dc_plan(sub, dt, p).nbytes
    step = align_up(size, WEIGHT_START_ALIGN)
    return [i * step for i in range(sx * sy)], sub, size


def deconv_pack(arr: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(arr.dtype, "weight")
    offs, sub, size = _deconv_layout(arr.shape, dt, p)
    buf = np.zeros(offs[-1] + size, np.uint8)
    for off, part in zip(offs, deconv_split(to_storage(arr), p["stride_x"], p["stride_y"])):
        buf[off:off + size] = execute_pack(part, dc_plan(sub, dt, p))
    return buf


def deconv_unpack(buf: np.ndarray, shape: tuple[int, ...], dt: np.dtype, p: dict[str, Any]) -> np.ndarray:
    dt = element_dtype(dt, "weight")
    offs, sub, size = _deconv_layout(shape, dt, p)
    K, C, R, S = shape
    sx, sy = p["stride_x"], p["stride_y"]
    full = np.zeros((K, C, sub[2], sy, sub[3], sx), dtype=storage_dtype(dt))
    for i, off in enumerate(offs):
        full[:, :, :, i // sx, :, i % sx] = execute_unpack(buf[off:], dc_plan(sub, dt, p), sub, "nvdla.weight.deconv")
    out = full.reshape(K, C, sub[2] * sy, sub[3] * sx)[:, :, :R, :S]
    return from_storage(np.ascontiguousarray(out), dt)


def weight_layouts() -> list[LayoutSpec]:
    return [
        LayoutSpec(
            "nvdla.weight.dc", "nvdla",
            "direct-convolution weights (K, C, H, W): kernel groups, 1x1xC' cubes scanned "
            "C' -> K -> W -> H -> C, groups compact, 128-byte tail alignment",
            WEIGHT_PARAMS, dc_pack, dc_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.image", "nvdla",
            "image-input weights (K, C, H, W): channel pre-extension (line -> channel), optional "
            "2/4-line post-extension, then the direct-convolution mapping",
            WEIGHT_PARAMS + (Param("post_extension", int, 1, "lines combined by channel post-extension", (1, 2, 4)),),
            image_pack, image_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.winograd", "nvdla",
            "Winograd weights (K, C, 4, 4) after G W G^T: 4x4x4-element cubes scanned K -> C per "
            "group; convert=true runs phase 1 (pad C, channel extension, G W G^T) on raw kernels",
            WEIGHT_PARAMS[:3] + (
                Param("convert", bool, False, "input is raw 3x3 (3s x 3s) kernels: run phase 1 first"),
                Param("stride", int, 1, "convolution stride for phase-1 channel extension"),
                Param("scale", float, 1.0, "phase-1 scaling factor applied to G W G^T"),
            ),
            winograd_pack, winograd_unpack, "int8", SEED),
        LayoutSpec(
            "nvdla.weight.deconv", "nvdla",
            "deconvolution weights (K, C, H, W): set split into stride_x*stride_y sub-kernels, each "
            "in the direct-convolution mapping, each starting 256-byte aligned",
            WEIGHT_PARAMS + (
                Param("stride_x", int, 1, "deconvolution stride in x"),
                Param("stride_y", int, 1, "deconvolution stride in y"),
            ),
            deconv_pack, deconv_unpack, "int8", SEED),
    ]
