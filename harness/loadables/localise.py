"""Layer-by-layer localisation: which operation of a network went wrong first.

Each DLA operation's output surface is read from the target right after the firmware reports it
complete (``dla_op_completion``'s "Completed <unit> operation index <i>"). The same loadable with
the same input runs on a reference: the model target without injected bugs, same profile and
semantics, driven by the same firmware build. Operations are compared in completion order; the
first whose surface differs is named with its index, type, precision, the first and the worst
differing element (c, h, w) and the expected and actual raw values. An operation whose input
already differed would differ too; only the first is a finding. Operations that write no memory
(a convolution fused into its SDP) are compared through the operation that writes.

A surface is a feature cube in NVDLA's layout: element (c, h, w) at
``(c // k) * surf_stride + h * line_stride + w * atom + (c % k) * bpe`` with ``k = atom / bpe``
(the profile's atom size; ``bpe`` 1 for INT8, 2 for INT16/FP16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .runtime import OpSnapshot

__all__ = ["LayerDiff", "first_difference", "surface_elements"]


@dataclass(frozen=True)
class LayerDiff:
    task: int
    index: int
    op: str
    precision: str
    differ: int
    total: int
    first: tuple[tuple[int, int, int], int, int]  # ((c, h, w), expected, actual)
    worst: tuple[tuple[int, int, int], int, int]

    def summary(self) -> str:
        (fc, fe, fa), (wc, we, wa) = self.first, self.worst
        return (f"first wrong layer: task {self.task} operation {self.index} ({self.op} {self.precision}): "
                f"{self.differ} of {self.total} elements differ; first at (c,h,w)={fc} expected {fe:#x} actual {fa:#x}; "
                f"worst at {wc} expected {we:#x} actual {wa:#x}")


def surface_elements(snap: OpSnapshot, atom: int) -> np.ndarray | None:
    """The (C, H, W) raw elements of an operation's output surface (None: not in memory)."""
    c = snap.op.dst
    if c is None or not snap.data or c.width == 0:
        return None
    out_prec = snap.op.precision.split("->")[-1]
    bpe = 1 if out_prec == "INT8" else 2
    k = max(1, atom // bpe)
    ch = np.arange(c.channel, dtype=np.int64)[:, None, None]
    h = np.arange(c.height, dtype=np.int64)[None, :, None]
    w = np.arange(c.width, dtype=np.int64)[None, None, :]
    off = ((ch // k) * c.surf_stride + h * c.line_stride + w * atom + (ch % k) * bpe)
    buf = np.frombuffer(snap.data, np.uint8)
    if int(off.max()) + bpe > buf.size:
        return None
    idx = off[..., None] + np.arange(bpe)
    raw = buf[idx]
    return raw.view("<u2")[..., 0] if bpe == 2 else raw[..., 0]


def first_difference(actual: list[OpSnapshot], expected: list[OpSnapshot], atom: int) -> LayerDiff | None:
    """The first operation (in the reference's completion order) whose output differs."""
    got = {(s.task, s.op.index): s for s in actual}
    for ref in expected:
        mine = got.get((ref.task, ref.op.index))
        e = surface_elements(ref, atom)
        if e is None:
            continue
        a = surface_elements(mine, atom) if mine is not None else None
        if a is None:
            a = np.zeros_like(e)  # never completed on the target: nothing written
        diff = np.argwhere(a != e)
        if not len(diff):
            continue
        dist = np.abs(a.astype(np.int64) - e.astype(np.int64))
        w = tuple(int(v) for v in np.unravel_index(int(np.argmax(dist)), dist.shape))
        f = tuple(int(v) for v in diff[0])
        return LayerDiff(ref.task, ref.op.index, ref.op.name, ref.op.precision, int(len(diff)), int(e.size),
                         (f, int(e[f]), int(a[f])), (w, int(e[w]), int(a[w])))  # type: ignore[arg-type]
    return None
