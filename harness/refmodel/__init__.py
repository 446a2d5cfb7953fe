"""Bit-exact numpy reference model of NVDLA's datapaths (SDP, CDP, ...)."""

from .base import LayerResult, MemoryPort, ModelOptions, RegisterView, UnitNotModelled

__all__ = ["LayerResult", "MemoryPort", "ModelOptions", "RegisterView", "UnitNotModelled"]
