"""YAML that cannot explode (issue 26): alias bombs, merge-key chains, recursive aliases, deep
nesting, 5,000-digit integers and NUL characters are refused by ``drivers/yamlstrict`` before
anything is constructed, with ``file: line N`` - in vector manifests, lab files, fuzz
constraints and labgrid environments alike - within bounded memory.

Each refused document is a hand-built example of the attack the issue measured (a 470-byte
alias bomb hung for 120 s at 567 MB; a 20,000-long merge chain of 779 KB hung vector and lab
loading). Memory is measured with tracemalloc (deterministic, no timed asserts)."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import pytest

from nvdla_hil.drivers import yamlstrict
from nvdla_hil.drivers.errors import InputError
from nvdla_hil.drivers.yamlstrict import YamlError

#: the issue's bomb: ten levels of ten aliases each, 10^10 nodes once expanded
BOMB = "a: &b0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 10) + "]\n" for i in range(1, 10))
#: the issue's merge-key chain, 20,000 long (~780 KB, under the 4 MiB manifest cap)
CHAIN = "m0: &m0 {k0: 1}\n" + "".join(f"m{i}: &m{i} {{<<: *m{i - 1}, k{i}: 1}}\n" for i in range(1, 20000))

ATTACKS = {
    "alias bomb": (BOMB, 7, "more than 2000000 nodes once aliases are expanded"),
    "merge chain": (CHAIN, 2, "merge keys (<<) are not allowed"),
    "merge key alone": ("base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n", 3, "merge keys"),
    "recursive alias": ("a: &a [1, *a]\n", 1, "refers to a node that contains it"),
    "5000-digit integer": ("n: " + "9" * 5000 + "\n", 1, "a number 5000 characters long"),
    "tagged huge integer": ("n: !!int " + "1" * 400 + "\n", 1, "a number 400 characters long"),
    "NUL in a name": ('blob: "src\\0.bin"\n', 1, "a NUL character"),
    "nested 100 deep": ("x: " + "[" * 100 + "]" * 100 + "\n", 1, "nested more than 64 deep"),
    "duplicate key": ("a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a' (first at line 1)"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_refused_naming_file_and_line_in_bounded_memory(name):
    text, line, needle = ATTACKS[name]
    tracemalloc.start()
    try:
        with pytest.raises(YamlError) as ei:
            yamlstrict.load(text, "evil.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(ei.value)
    assert msg.startswith(f"evil.yaml: line {line}: "), msg
    assert needle in msg, msg
    assert peak < 16 << 20, f"{name}: {peak} bytes traced"  # the issue measured 308-567 MB
    assert isinstance(ei.value, InputError) and isinstance(ei.value, ValueError)


def test_ordinary_documents_and_small_aliases_still_load():
    # PyYAML's own dumper writes a shared mapping as an anchor and aliases (the bundled vector
    # manifests have `params: *id001`): small aliases stay allowed and count in full
    assert yamlstrict.load("a: &x {b: 1}\nc: *x\n") == {"a": {"b": 1}, "c": {"b": 1}}
    assert yamlstrict.load("n: 0xffffffffffffffff\nw: deadbeef\ns: '" + "9" * 300 + "'\n") == {
        "n": (1 << 64) - 1, "w": "deadbeef", "s": "9" * 300}
    # the limit counts expanded nodes: 2 levels of 1000 = 10^6 + a few is still fine
    wide = "a: &a [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 1000) + "]\n"
    assert len(yamlstrict.load(wide)["b"]) == 1000
    with pytest.raises(YamlError, match="more than 1000 nodes"):
        yamlstrict.load(wide, max_nodes=1000)


def test_every_shipped_yaml_loads_strictly():
    """The shipped register maps, profiles, constraints and vector manifests are within bounds."""
    root = Path(__file__).resolve().parents[1]
    files = [p for d in ("drivers/data", "harness/fuzz/constraints", "testvectors") for p in (root / d).rglob("*.yaml")]
    assert len(files) > 100
    for p in files:
        yamlstrict.load(p.read_text(encoding="utf-8"), str(p))


def _case(tmp_path: Path, extra: str) -> Path:
    from nvdla_hil.harness.vectors import bundled_root, find_cases

    src = next(p for p in find_cases(bundled_root()) if p.name.startswith("sdp_cvt"))
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    (dst / "case.yaml").write_text((dst / "case.yaml").read_text(encoding="utf-8") + extra, encoding="utf-8")
    return dst


@pytest.mark.parametrize("name", ["alias bomb", "merge chain", "5000-digit integer", "NUL in a name"])
def test_vector_manifest_attack_is_a_vector_error(tmp_path, name):
    from nvdla_hil.harness.vectors import VectorError, load_case

    text, _, needle = ATTACKS[name]
    case = _case(tmp_path, "\n".join("x_" + ln for ln in text.splitlines()) + "\n")
    with pytest.raises(VectorError, match=r"case\.yaml.*line \d+") as ei:
        load_case(case)
    assert needle.split(" (")[0] in str(ei.value)


@pytest.mark.parametrize("name", ["alias bomb", "merge chain"])
def test_lab_file_attack_is_a_lab_error(tmp_path, name):
    from nvdla_hil.harness.boards.lab import LabError, load_lab

    text, _, needle = ATTACKS[name]
    lab = tmp_path / "lab.yaml"
    lab.write_text(text + "boards:\n  a:\n    url: socket://127.0.0.1:9\n", encoding="utf-8")
    with pytest.raises(LabError) as ei:
        load_lab(lab)
    assert str(lab) in str(ei.value) and needle.split(" (")[0] in str(ei.value)


def test_labgrid_environment_and_fuzz_constraints_are_strict(tmp_path):
    from nvdla_hil.harness.fuzz import ConstraintError, load_constraints
    from nvdla_hil.harness.boards.lab import LabError
    from nvdla_hil.harness.boards.labgrid_place import place_from_env

    env = tmp_path / "env.yaml"
    env.write_text(BOMB, encoding="utf-8")
    with pytest.raises(LabError, match=r"env\.yaml: line 7: more than"):
        place_from_env(env)
    cons = tmp_path / "c.yaml"
    cons.write_text(CHAIN, encoding="utf-8")
    with pytest.raises(ConstraintError, match=r"c\.yaml.*merge keys"):
        load_constraints("sdp-cvt", files=[str(cons)])


def test_vectors_run_names_the_file_of_a_nul_or_a_bomb(tmp_path, capsys):
    """`vectors run` used to say only "nvdla-hil vectors: embedded null byte"."""
    from nvdla_hil.harness.cli import main

    for name in ("NUL in a name", "alias bomb"):
        text, _, needle = ATTACKS[name]
        case = _case(tmp_path / name.replace(" ", "_"), "\n".join("x_" + ln for ln in text.splitlines()) + "\n")
        assert main(["vectors", "run", str(case)]) == 2
        out = capsys.readouterr()
        err = out.out + out.err
        assert f"{case / 'case.yaml'}" in err and "line " in err and needle.split(" (")[0] in err, err
        assert "Traceback" not in err
