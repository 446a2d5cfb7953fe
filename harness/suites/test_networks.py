"""The bundled networks (``testvectors/networks/``, its README says what each is): loadables
NVDLA's own compiler wrote from the zoo's seeded Caffe networks (``nvdla-hil net gen|compile``),
one pytest test each, run through NVDLA's firmware (``--nvdla-sw`` or ``NVDLA_SW``) on the
selected target with the input bound beside it (``<loadable>.input.raw``) and compared by MD5
with an oracle's dump in NVDLA's regression layout (``golden/<name>_<hash>/dla/o_000000.dimg``
and ``lead.md5``) by :func:`~nvdla_hil.harness.loadables.check.check_loadable`, which names the
first wrong DLA operation when the output differs.

Each golden has ``golden.yaml`` beside it: its ``golden_source`` (the oracle, NVDLA's C model or
RTL, with its build and the compiler's revision) and the SHA-256 of the loadable and the input it
was made from. A golden that names no oracle (or names the model), whose loadable or input has
changed since, or whose ``lead.md5`` disagrees with its dump is bad input naming the file, never
a pass. ``NVDLA_HIL_NETWORKS`` points the suite at another folder of the same layout; one that is
missing or holds no loadable is a collection error naming it. Without an nvdla/sw checkout each
network is a skip saying so; a network written for a profile the run may not use is a skip
counted as "lacks unit".
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from nvdla_hil.drivers.errors import InputError
from nvdla_hil.harness.plugin import GOLDEN_KEY
from nvdla_hil.harness.suites.loadable_runs import SKIP_NO_SW, firmware_checkout, run_on_its_profile  # noqa: F401

#: the ``nvdla_warm_pool`` fixture (also registered by the nvdla_hil plugin; loading it twice is a no-op)
pytest_plugins = ["nvdla_hil.harness.plugin.warm"]

SKIP_NO_NETWORKS = "no bundled networks"
#: the metadata file beside each golden dump
GOLDEN_META = "golden.yaml"
GOLDEN_FORMAT = "nvdla-hil-network-golden/1"
#: the oracles a bundled network's golden may come from (never the model under test)
ORACLES = ("cmod", "rtl")
#: the suffix of the input bound to a loadable (what ``nvdla-hil net run`` writes beside it)
INPUT_SUFFIX = ".input.raw"
MAX_META = 64 << 10


def networks_root() -> tuple[str | None, Path]:
    """(the environment variable that named it, or None for the bundled folder; the folder)."""
    env = os.environ.get("NVDLA_HIL_NETWORKS")
    if env:
        return "NVDLA_HIL_NETWORKS", Path(env)
    from nvdla_hil.harness.vectors import bundled_root

    return None, bundled_root() / "networks"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "network_case" not in metafunc.fixturenames:
        return
    from nvdla_hil.harness.loadables.check import find_loadables

    source, root = networks_root()
    cases = find_loadables(root) if root.is_dir() else []
    if source and not cases:
        what = "no such folder" if not root.exists() else \
            "no loadable below it (no FlatBuffers file shaped like a Loadable)"
        raise pytest.Collector.CollectError(f"{source} {root}: {what}")
    if cases:
        metafunc.parametrize("network_case", cases, ids=[c[0] for c in cases])
    else:
        metafunc.parametrize("network_case", [None], ids=["no-networks"])


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def golden_meta(name: str, loadable: Path, golden: Path | None) -> tuple[dict[str, Any], Path | None]:
    """The golden's ``golden_source`` and the input bound to the loadable, after checking that
    the golden names an oracle and was made from this loadable and input; :class:`InputError`
    naming the file otherwise."""
    from nvdla_hil.drivers import yamlstrict
    from nvdla_hil.harness.loadables.check import read_regular
    from nvdla_hil.harness.loadables.dimg import md5

    if golden is None:
        raise InputError(f"{loadable}: no golden/{name}_*/dla/o_000000.dimg (every bundled network has an oracle's golden)")
    meta_path = golden.with_name(GOLDEN_META)
    doc = yamlstrict.load(read_regular(meta_path, GOLDEN_META, MAX_META).decode("utf-8", "replace"), str(meta_path))
    if not isinstance(doc, dict) or doc.get("format") != GOLDEN_FORMAT:
        raise InputError(f"{meta_path}: expected a mapping with format: {GOLDEN_FORMAT}")
    gs = doc.get("golden_source")
    if not isinstance(gs, dict) or gs.get("kind") not in ORACLES or not gs.get("oracle"):
        raise InputError(f"{meta_path}: golden_source must name its oracle (kind: one of {', '.join(ORACLES)}; "
                         f"oracle: what made it); a golden of the model under test checks nothing")
    config = gs.get("config")
    if config is not None:  # the configuration it was made on (nv_large's loadables have nv_full's atoms)
        from nvdla_hil.drivers.profiles import list_profiles

        if not isinstance(config, str) or config not in list_profiles():
            raise InputError(f"{meta_path}: golden_source.config {str(config)[:60]!r} is no known configuration "
                             f"({', '.join(list_profiles())})")
    for what, path in (("loadable", loadable), ("input", loadable.with_name(loadable.name + INPUT_SUFFIX))):
        want = doc.get(what, {}).get("sha256") if isinstance(doc.get(what), dict) else None
        if want is None and what == "input":
            continue
        if not path.is_file():
            raise InputError(f"{meta_path}: the {what} it was made from, {path.name}, is not beside the loadable")
        if want != _sha256(path):
            raise InputError(f"{meta_path}: made from another {what} than {path} (SHA-256 differs): re-make the "
                             f"golden on its oracle (testvectors/networks/README.md)")
    lead = golden.with_name("lead.md5")
    dump_md5 = md5(read_regular(golden, "golden", 64 << 20))
    lead_md5 = read_regular(lead, "lead.md5", 4096).decode("ascii", "replace").split()[:1]
    if lead_md5 != [dump_md5]:
        raise InputError(f"{lead}: says {lead_md5[0] if lead_md5 else 'nothing'}, {golden.name} has MD5 {dump_md5}")
    inp = loadable.with_name(loadable.name + INPUT_SUFFIX) if isinstance(doc.get("input"), dict) else None
    return gs, inp


def test_network(network_case: tuple[str, Path, Path | None] | None, pytestconfig: pytest.Config,
                 request: pytest.FixtureRequest, record_property, nvdla_warm_pool) -> None:  # noqa: ANN001  # fmt: skip
    if network_case is None:
        pytest.skip(f"{SKIP_NO_NETWORKS} under {networks_root()[1]} (this install lacks testvectors/networks/)")
    name, path, golden = network_case
    sw = firmware_checkout(pytestconfig, name)
    gs, inp = golden_meta(name, path, golden)
    request.node.stash[GOLDEN_KEY] = str(gs["kind"])
    record_property("golden_source", str(gs["kind"]))
    # the configuration the golden was made on: nv_large's loadables have nv_full's atoms, so the
    # loadable alone does not tell them apart
    config = gs.get("config")  # checked by golden_meta
    v, spec, prof = run_on_its_profile(name, path, golden, pytestconfig, record_property, nvdla_warm_pool, sw,
                                       input_path=inp, profile=config)
    if v.status != "passed":
        pytest.fail(f"{name} on {spec.kind} ({prof.name}), golden from {gs['kind']}: {v.message}", pytrace=False)
