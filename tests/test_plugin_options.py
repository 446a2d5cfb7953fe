"""Plugin options carry one prefix (``--nvdla-*``); the old unprefixed names are deprecated
aliases, registered only where they clash with no other plugin, in either load order.

pytest-embedded registers ``--target`` (dest ``target``): installed beside nvdla-hil both load
and a run works. When pytest-embedded is not installed (``pip install pytest-embedded``), a
tiny local plugin registering ``--target`` the same way stands in; both are run when present.
labgrid's plugin is kept out of these runs (``-p no:labgrid``): with pytest-embedded's
``--target`` set it skips every test for want of ``--lg-env``, which is between those two."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

PY = sys.executable
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")

CLASHING_PLUGIN = '''
def pytest_addoption(parser):
    group = parser.getgroup("embedded-like")
    group.addoption("--target", dest="target", default="auto", help="chip type, as pytest-embedded")


def pytest_report_header(config):
    return f"clashing plugin target={config.getoption('target')}"
'''

TEST_FILE = '''
def test_on_target(nvdla_target, nvdla_spec, pytestconfig):
    print("NVDLA", nvdla_spec.kind, "SEMANTICS", nvdla_spec.semantics)
    try:
        print("OTHER", pytestconfig.getoption("target"))
    except ValueError:
        print("OTHER none")
'''


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def _embedded_path() -> str | None:
    """Where pytest-embedded is importable from: this environment, or NVDLA_HIL_EMBEDDED_PATH
    (a ``pip install --target DIR pytest-embedded`` folder), else None."""
    if importlib.util.find_spec("pytest_embedded") is not None:
        return ""
    extra = os.environ.get("NVDLA_HIL_EMBEDDED_PATH")
    if extra and Path(extra, "pytest_embedded").is_dir():
        return str(Path(extra).resolve())  # the child processes run in their own folders
    return None


def _run(tmp_path: Path, other: str, *argv: str) -> subprocess.CompletedProcess:
    env, pre = _setup(tmp_path, other)
    return subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:labgrid", "-s", "-rA", *pre, "test_opts.py", *argv],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


def _setup(tmp_path: Path, other: str) -> tuple[dict[str, str], list[str]]:
    (tmp_path / "test_opts.py").write_text(TEST_FILE)
    env = _env()
    pre: list[str] = []
    if other == "local":
        (tmp_path / "clashing_plugin.py").write_text(CLASHING_PLUGIN)
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
        pre = ["-p", "clashing_plugin"]
    else:
        path = _embedded_path()
        if path is None:
            pytest.skip("pytest-embedded is not installed (pip install pytest-embedded, or set "
                        "NVDLA_HIL_EMBEDDED_PATH to a pip --target folder holding it)")
        if path:
            env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")])
    return env, pre


@pytest.mark.parametrize("other", ["local", "pytest-embedded"])
@pytest.mark.parametrize("order", ["theirs-first", "ours-first"])
def test_loads_beside_a_plugin_that_owns_target(tmp_path, other, order):
    """Both plugins load whichever registers first, their --target is theirs, ours is
    --nvdla-target, and a run works."""
    first = ["-p", "nvdla_hil"] if order == "ours-first" else []
    r = _run(tmp_path, other, *first, "--nvdla-target", "model", "--nvdla-model-semantics", "cmod",
             "--target", "esp32")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NVDLA model SEMANTICS cmod" in r.stdout
    assert "OTHER esp32" in r.stdout  # their option got the value
    assert "1 passed" in r.stdout
    assert "--target is deprecated" not in r.stdout + r.stderr
    env, pre = _setup(tmp_path, other)
    h = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:labgrid", *pre, *first, "--help"], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env=env)
    assert h.returncode == 0, h.stderr
    assert "--nvdla-target" in h.stdout and "deprecated alias of --nvdla-target" not in h.stdout
    assert "deprecated alias of --nvdla-lab" in h.stdout  # the aliases nobody else has are still there


def test_deprecated_alias_works_and_warns(tmp_path):
    (tmp_path / "test_opts.py").write_text(TEST_FILE)
    r = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:labgrid", "-s", "test_opts.py", "--target", "model",
                        "--model-semantics", "cmod"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NVDLA model SEMANTICS cmod" in r.stdout
    assert "--target is deprecated, use --nvdla-target" in r.stdout
    assert "--model-semantics is deprecated, use --nvdla-model-semantics" in r.stdout


def test_alias_and_new_name_that_disagree_are_a_usage_error(tmp_path):
    (tmp_path / "test_opts.py").write_text(TEST_FILE)
    r = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:labgrid", "test_opts.py", "--target", "model",
                        "--nvdla-target", "serial"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=_env())
    assert r.returncode == 4, r.stdout + r.stderr
    assert "--target model and --nvdla-target serial disagree" in r.stderr


def test_regress_passes_the_prefixed_names(tmp_path, capsys):
    """`nvdla-hil regress` keeps its own --target/--poison/... and hands pytest the prefixed ones."""
    import json

    from nvdla_hil.harness.cli import main

    code = main(["regress", "--target", "model", "--suite", "vectors", "-k", "sdp_cvt-s1-000", "--poison",
                 "--model-semantics", "rtl", "--results-dir", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr()
    run = json.loads((tmp_path / "r" / "latest" / "run.json").read_text())
    argv = run["pytest_argv"]
    assert "--nvdla-target" in argv and "--nvdla-poison" in argv and "--nvdla-model-semantics" in argv
    assert not {"--target", "--poison", "--model-semantics", "--lab", "--board", "--waves"} & set(argv)
