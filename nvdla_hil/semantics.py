"""Which of NVDLA's two references the model follows where they differ (every [DIFF] of
docs/nvdla-precision-semantics.md): ``"rtl"``, the RTL of the selected configuration, or
``"cmod"``, nv_full's C model (nvdla/hw nvdlav1 ``cmod``)."""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

__all__ = ["SEMANTICS", "Semantics", "check_semantics"]

Semantics: TypeAlias = Literal["rtl", "cmod"]
#: every value :data:`Semantics` may take
SEMANTICS: tuple[Semantics, ...] = get_args(Semantics)


def check_semantics(value: object) -> Semantics:
    """``value`` as a :data:`Semantics`; ValueError naming the choices otherwise (``"RTL"`` too:
    a near miss must not quietly take the other branch)."""
    for s in SEMANTICS:
        if value == s:
            return s
    raise ValueError(f"semantics must be 'rtl' or 'cmod', not {value!r}")
