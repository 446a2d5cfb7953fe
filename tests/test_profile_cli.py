"""``nvdla-hil profile show``: every shipped profile and a ``.spec`` path, through the CLI.

The output is a ``drivers/data/profiles.yaml`` entry (``{name: {field: value}}``): parsed back,
every field equals the loaded profile's. The ``.spec`` files are written here from a shipped
profile's values (``drivers/specdefs.py`` says which define gives which field); with ``NVDLA_HW``
the checkout's own ``spec/defs/*.spec`` are shown too."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvdla_hil.drivers.profiles import HardwareProfile, list_profiles, load_profile
from nvdla_hil.harness.cli import main

CLI = [sys.executable, "-c", "import sys; from nvdla_hil.harness.cli import main; sys.exit(main())"]

_SWITCHES = {"weight_compression": "WEIGHT_COMPRESSION", "winograd": "WINOGRAD", "sec_mem": "SECONDARY_MEMIF",
             "sdp_lut": "SDP_LUT", "sdp_bs": "SDP_BS", "sdp_bn": "SDP_BN", "sdp_ew": "SDP_EW", "bdma": "BDMA",
             "rubik": "RUBIK", "pdp": "PDP", "cdp": "CDP"}
_SIZES = {"atom_bytes": "MEMORY_ATOMIC_SIZE", "mac_atomic_c": "MAC_ATOMIC_C_SIZE", "mac_atomic_k": "MAC_ATOMIC_K_SIZE",
          "cbuf_banks": "CBUF_BANK_NUMBER", "cbuf_bank_width": "CBUF_BANK_WIDTH", "cbuf_bank_depth": "CBUF_BANK_DEPTH",
          "primary_memif_width": "PRIMARY_MEMIF_WIDTH"}
_THROUGHPUTS = {"sdp_bs": "SDP_BS_THROUGHPUT", "sdp_bn": "SDP_BN_THROUGHPUT", "sdp_ew": "SDP_EW_THROUGHPUT",
                "pdp": "PDP_THROUGHPUT", "cdp": "CDP_THROUGHPUT"}


def _show(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["profile", "show", name]) == 0
    out = capsys.readouterr()
    assert out.err == ""
    doc = yaml.safe_load(out.out)
    assert isinstance(doc, dict) and len(doc) == 1
    return doc


def _expected(p: HardwareProfile) -> dict[str, Any]:
    """The profile's fields as YAML gives them back (mappings as dicts, ``units`` a list)."""
    want: dict[str, Any] = {}
    for f in dataclasses.fields(p):
        if f.name != "name":
            v = getattr(p, f.name)
            want[f.name] = dict(v) if f.name in ("features", "throughput") else list(v) if f.name == "units" else v
    return want


@pytest.mark.parametrize("name", list_profiles())
def test_show_every_shipped_profile(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    p = load_profile(name)
    doc = _show(name, capsys)
    assert list(doc) == [name]
    assert doc[name] == _expected(p)
    assert list(doc[name]) == [f.name for f in dataclasses.fields(p) if f.name != "name"]  # the profiles.yaml order


def _spec_text(p: HardwareProfile) -> str:
    """A configuration spec with ``p``'s values (the defines ``drivers/specdefs.py`` reads)."""
    lines = [f"#define {stem}_{getattr(p, key)}" for key, stem in _SIZES.items()]
    for feat, stem in _SWITCHES.items():
        lines.append(f"#define {stem}_{'ENABLE' if p.features[feat] else 'DISABLE'}")
    if p.features["sec_mem"]:
        lines.append(f"#define SECONDARY_MEMIF_WIDTH_{p.secondary_memif_width}")
    lines.append("#define BATCH_ENABLE" if p.max_batch > 1 else "#define BATCH_DISABLE")
    if p.max_batch > 1:
        lines.append(f"#define MAX_BATCH_SIZE_{p.max_batch}")
    for key, stem in _THROUGHPUTS.items():
        lines.append(f"#define {stem}_{p.throughput[key] or 'x'}")
    if p.generation == "v2":
        lines.append(f"#define MEM_ADDRESS_WIDTH_{p.mem_address_width}")
        lines += [f"#define FEATURE_DATA_TYPE_{t.upper()}" for t in ("int8", "int16", "fp16") if p.features[t]]
        lines += [f"#define WEIGHT_DATA_TYPE_{t.upper()}" for t in ("int8", "int16", "fp16") if p.features[t]]
    return "\n".join(lines) + '\n#include "projects.spec"\n'


@pytest.mark.parametrize("name", list_profiles())
def test_show_a_spec_path(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``.spec`` path is a profile: ``show`` derives it; with the shipped profile's values it
    shows the shipped profile's fields, under the spec's name."""
    p = load_profile(name)
    spec = tmp_path / "my_cfg.spec"
    spec.write_text(_spec_text(p))
    doc = _show(str(spec), capsys)
    assert list(doc) == ["my_cfg"]
    assert doc["my_cfg"] == {**_expected(p), "source": "spec/defs/my_cfg.spec"}


def test_show_as_a_user_runs_it() -> None:
    """The README's command, in a process of its own: exit 0, YAML on stdout."""
    proc = subprocess.run([*CLI, "profile", "show", "nv_small"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert yaml.safe_load(proc.stdout)["nv_small"]["features"]["int8"] is True


def test_show_unknown_profile_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["profile", "show", "nv_smal"]) == 2
    assert "did you mean nv_small" in capsys.readouterr().err
    assert main(["profile", "show", str(tmp_path / "missing.spec")]) == 2
    assert "missing.spec" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("NVDLA_HW"), reason="NVDLA_HW (an nvdla/hw master checkout) not set")
def test_show_the_checkouts_specs(capsys: pytest.CaptureFixture[str]) -> None:
    defs = Path(os.environ["NVDLA_HW"]) / "spec" / "defs"
    specs = sorted(q for q in defs.glob("*.spec") if q.stem != "projects")
    assert specs
    for spec in specs:
        doc = _show(str(spec), capsys)
        assert doc[spec.stem] == {**_expected(load_profile(spec.stem)), "source": f"spec/defs/{spec.name}"}
