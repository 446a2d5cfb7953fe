"""A checkout is importable as it is (issue 24): ``python -c "import nvdla_hil.harness.cli"`` from
the repository root works without an install, and the installed layout (the four folders inside
``nvdla_hil/``, as in the wheel) is left alone.

Each import runs in a fresh interpreter started with ``-S``: no ``site`` processing, so the
editable install's ``.pth`` finder (which maps ``nvdla_hil.drivers`` to ``drivers/`` by itself)
is never installed; the virtual environment's site-packages is put on ``PYTHONPATH`` only so
numpy and PyYAML import. Without ``nvdla_hil/__init__.py`` extending its ``__path__``, the
checkout import fails with ``No module named 'nvdla_hil.harness'``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import nvdla_hil

ROOT = Path(__file__).resolve().parents[1]
SUBS = ("drivers", "harness", "sims", "testvectors")

PROBE = """
import json, sys
import nvdla_hil, nvdla_hil.harness.cli, nvdla_hil.drivers.uartbone, nvdla_hil.errors
finders = [getattr(f, "__name__", type(f).__name__) for f in sys.meta_path]
print(json.dumps({"path": list(nvdla_hil.__path__), "cli": nvdla_hil.harness.cli.__file__,
                  "uartbone": nvdla_hil.drivers.uartbone.__file__, "finders": finders}))
"""


def _run_isolated(cwd: Path, pythonpath: list[str]) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
           "PYTHONPATH": os.pathsep.join(pythonpath)}
    r = subprocess.run([sys.executable, "-S", "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_checkout_imports_without_an_install():
    got = _run_isolated(ROOT, [sysconfig.get_paths()["purelib"]])
    assert not any("Editable" in f for f in got["finders"]), got["finders"]  # the editable finder is not there
    assert got["path"] == [str(ROOT / "nvdla_hil"), str(ROOT)], got["path"]
    assert got["cli"] == str(ROOT / "harness" / "cli" / "__init__.py")
    assert got["uartbone"] == str(ROOT / "drivers" / "uartbone.py")


def test_the_installed_layout_is_left_alone(tmp_path):
    """The wheel's layout (the folders inside ``nvdla_hil/``, here as symlinks, as ``.ci/typecheck``
    builds it): ``__path__`` stays the package folder alone."""
    pkg = tmp_path / "site" / "nvdla_hil"
    pkg.mkdir(parents=True)
    for f in (ROOT / "nvdla_hil").glob("*.py"):
        (pkg / f.name).write_text(f.read_text())
    for s in SUBS:
        (pkg / s).symlink_to(ROOT / s, target_is_directory=True)
    got = _run_isolated(tmp_path, [str(tmp_path / "site"), sysconfig.get_paths()["purelib"]])
    assert got["path"] == [str(pkg)], got["path"]
    assert got["cli"] == str(pkg / "harness" / "cli" / "__init__.py")


def test_the_root_is_added_only_beside_all_four_packages(tmp_path):
    here = tmp_path / "nvdla_hil"
    here.mkdir()
    for s in SUBS[:-1]:
        (tmp_path / s).mkdir()
        (tmp_path / s / "__init__.py").write_text("")
    assert nvdla_hil._checkout_root(str(here)) == []  # testvectors/ missing: not a checkout
    (tmp_path / "testvectors").mkdir()
    (tmp_path / "testvectors" / "__init__.py").write_text("")
    assert nvdla_hil._checkout_root(str(here)) == [str(tmp_path)]
    (here / "drivers").mkdir()  # a folder inside the package: the installed layout wins
    assert nvdla_hil._checkout_root(str(here)) == []
