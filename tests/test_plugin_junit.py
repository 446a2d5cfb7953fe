"""JUnit XML of the shipped suites: a proper classname however the suite was collected (an
installed module through ``--pyargs`` used to give ``classname=""``: its nodeid is ``::test``,
the module being its own initial path outside the rootdir), and per-test properties."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

PY = sys.executable
ENV_KEYS = ("NVDLA_TRACES", "NVDLA_HIL_VECTORS", "NVDLA_HW", "NVDLA_HIL_TARGET", "NVDLA_HIL_LAB",
            "NVDLA_HIL_BOARD", "NVDLA_HIL_CONFIG", "NVDLA_HIL_SUMMARY", "NVDLA_TXN_TESTS")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_KEYS and not k.startswith("PYTEST_")}


def _junit(tmp_path, *argv: str):
    junit = tmp_path / "junit.xml"
    r = subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", *argv, "--junitxml", str(junit)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return ET.parse(junit).getroot()


def test_pyargs_module_from_another_folder_has_classnames_and_properties(tmp_path):
    root = _junit(tmp_path, "--pyargs", "nvdla_hil.harness.suites.test_vectors", "-k", "sdp_cvt", "-n", "2")
    cases = list(root.iter("testcase"))
    # -k sdp_cvt: the 12 bundled sdp_cvt cases, every one in the report
    assert sorted(c.get("name") for c in cases) == [f"test_vector[sdp_cvt/sdp_cvt-s1-{i:03d}]" for i in range(12)]
    for c in cases:
        assert c.get("classname") == "nvdla_hil.harness.suites.test_vectors", ET.tostring(c)
        props = {p.get("name"): p.get("value") for p in c.iter("property")}
        assert props["target"] == "model"
        assert props["profile"] == "nv_small"
        assert props["model_semantics"] == "rtl"
        assert props["seed"] == "1"  # sdp_cvt-s1-*: generated with seed 1


def test_whole_package_and_a_user_set_junit_family_are_respected(tmp_path):
    root = _junit(tmp_path, "--pyargs", "nvdla_hil.harness.suites", "-k", "sdp_cvt-s1-000 or no-trace-source",
                  "--nvdla-allow-empty")
    names = {c.get("name"): c.get("classname") for c in root.iter("testcase")}
    assert names == {"test_trace[no-trace-source]": "nvdla_hil.harness.suites.test_traces",
                     "test_vector[sdp_cvt/sdp_cvt-s1-000]": "nvdla_hil.harness.suites.test_vectors"}
    # xunit2 chosen by the user: kept (no per-test properties there, the classname still fixed)
    root = _junit(tmp_path, "--pyargs", "nvdla_hil.harness.suites.test_vectors", "-k", "sdp_cvt-s1-000",
                  "-o", "junit_family=xunit2")
    (case,) = root.iter("testcase")
    assert case.get("classname") == "nvdla_hil.harness.suites.test_vectors"
