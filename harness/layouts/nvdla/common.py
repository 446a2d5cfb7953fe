"""What every NVDLA layout shares (seed 000, "In-memory data formats"): the hardware profile
that sizes it, the element precisions, the memory atom and the rule that strides are whole atoms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....drivers.profiles import HardwareProfile, ProfileError, list_profiles, load_profile
from .._base import LayoutError, Param, align_up

SEED = "seed 000 (NVDLA in-memory data formats)"


def hardware_profile(name: str) -> HardwareProfile:
    """The hardware profile whose sizes parametrise the layouts (``drivers/data/profiles.yaml``):
    memory atom, MAC atomic C (elements per 1x1xC' weight cube) and K (kernels per group).
    nv_full: 32-byte atom, 64 / 32 (seed 000); nv_small: 8-byte atom, 8 / 8 (nv_small.spec)."""
    try:
        return load_profile(name)
    except ProfileError as e:
        raise LayoutError(str(e)) from None


#: precision name -> numpy dtype of one element (seed 000 "Precision Type")
PRECISIONS: dict[str, np.dtype] = {
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "fp16": np.dtype(np.float16),
}

_ELEMENT_DTYPES = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.float16)}


def element_dtype(dtype: Any, what: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.newbyteorder("<") not in {d.newbyteorder("<") for d in _ELEMENT_DTYPES}:
        raise LayoutError(
            f"{what}: dtype {dt} is not an NVDLA element type (int8/uint8 for int8 precision, "
            f"int16/uint16/float16 for int16/fp16; seed 000 'Precision Type')"
        )
    return dt


def atom_size(params: dict[str, Any]) -> int:
    atom = params.get("atom_bytes")
    if atom is None:
        atom = hardware_profile(params["profile"]).atom_bytes
    if atom <= 0 or atom & (atom - 1):
        raise LayoutError(f"atom_bytes={atom} must be a power of two (8 on nv_small, 32 on nv_full)")
    return int(atom)


def atom_origin(params: dict[str, Any]) -> str:
    """Where the atom size came from, for error messages: the profile name or the override."""
    if params.get("atom_bytes") is not None:
        return f"atom_bytes={params['atom_bytes']}"
    return f"profile {params['profile']}"


#: Why strides are multiples of the memory atom (see layouts README, "Settled against the RTL
#: and C model"): nvdla/hw master (v2) passes only stride[31:log2(atom)] to CDMA and SDP and
#: zeroes the low log2(atom) address bits on the MCIF read path; nvdlav1 registers hold [31:5].
STRIDE_RULE = ("strides are whole memory atoms: NVDLA ignores stride bits below the atom "
               "(v2 CDMA/SDP take stride[31:log2(atom)], v1 registers hold [31:5])")


def profile_params() -> tuple[Param, ...]:
    return (
        Param("profile", str, "nv_full", "hardware profile giving the atom size", tuple(list_profiles())),
        Param("atom_bytes", int, None, "memory atom in bytes; overrides the profile (8 nv_small, 32 nv_full)"),
    )


def pad_to(buf: np.ndarray, align: int) -> np.ndarray:
    """``buf`` zero-padded to a multiple of ``align`` bytes (weight surfaces: 128, EW data: 32)."""
    out = np.zeros(align_up(buf.size, align), np.uint8)
    out[: buf.size] = buf
    return out
