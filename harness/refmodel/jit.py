"""Compiled kernels' common parts: numba's ``njit`` with the project's options, and 32-bit
wrapping integer operations.

Why numba: the FP16 multiplier (:mod:`.conv.cmac_fp16`) and CACC's FP48 adder (:mod:`.conv.cacc`)
are bit-level rules applied to every product of a convolution (a ResNet-18 is 1.8 G of them).
As numpy array expressions each rule is tens of passes over memory; compiled as one loop over the
pixels, LLVM keeps every intermediate in vector registers (measured in ``bench/bench_networks.py``).

Why the operations here: numba types arithmetic on ``uint32`` operands as 64-bit (numpy's scalar
rules), which halves the lanes of every vector instruction and would need a mask after each
step to keep the hardware's 32-bit wrap. These emit the 32-bit LLVM instruction itself:
``add32(a, b)`` is ``(a + b) mod 2^32``; ``shr32(a, n)`` is a logical shift, defined for
``n < 32`` only (LLVM gives poison for more: callers clamp). ``sext64`` reads a ``uint32`` as
a signed 32-bit value and widens it to int64; ``f32_from_bits`` reads a ``uint32`` as the
float32 it encodes, ``f32_bits`` the other way; ``bit_length`` is LLVM's count of leading zeros
(one vector instruction where the CPU has it), not a loop.

Kernels are compiled on first use and cached on disk (numba's ``cache=True``: beside the module,
or in the user's cache folder when that is read-only), so a process pays the compile once per
machine, not per run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["add32", "and32", "bit_length", "f32_bits", "f32_from_bits", "kernel", "mul32", "or32", "sext64", "shl32", "shr32", "sub32",
           "xor32"]


def kernel(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A loop kernel: compiled without the GIL and bounds checks, cached on disk."""
    return njit(cache=True, nogil=True, boundscheck=False)(fn)


def _u32_op(instruction: str) -> Any:
    @intrinsic
    def op(typingctx: Any, a: Any, b: Any) -> Any:
        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Any) -> Any:
            return getattr(builder, instruction)(args[0], args[1])

        return types.uint32(types.uint32, types.uint32), codegen

    return op


add32: Any = _u32_op("add")
sub32: Any = _u32_op("sub")
mul32: Any = _u32_op("mul")
xor32: Any = _u32_op("xor")
and32: Any = _u32_op("and_")
or32: Any = _u32_op("or_")
shl32: Any = _u32_op("shl")
shr32: Any = _u32_op("lshr")


def _sext64(typingctx: Any, a: Any) -> Any:
    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Any) -> Any:
        return builder.sext(args[0], ir.IntType(64))

    return types.int64(types.uint32), codegen


sext64: Any = intrinsic(_sext64)


def _f32_from_bits(typingctx: Any, a: Any) -> Any:
    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


#: the float32 whose bit pattern is the ``uint32`` given (a reinterpretation, no conversion)
f32_from_bits: Any = intrinsic(_f32_from_bits)


def _f32_bits(typingctx: Any, a: Any) -> Any:
    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


#: the bit pattern of a float32, as ``uint32`` (the inverse of :data:`f32_from_bits`)
f32_bits: Any = intrinsic(_f32_bits)


def _ctlz64(typingctx: Any, a: Any) -> Any:
    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Any) -> Any:
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))  # defined for 0: 64

    return types.int64(types.int64), codegen


_clz64: Any = intrinsic(_ctlz64)


@njit(inline="always")
def bit_length(x: int) -> int:
    """The bit length of ``x >= 0`` (int64), as Python's ``int.bit_length``."""
    return 64 - _clz64(x)
