"""The shape of the code: the import graph has no circle and no upward edge, no module is past one
head, no private name crosses a module boundary (issue 24).

The graph is read from the source with :mod:`ast` (every ``import`` statement, at module level or
inside a function, since a lazy import only hides a circle), so it needs nothing installed and
cannot be fooled by an import that happens to succeed in one order. An edge to ``a.b.c`` also
imports its packages ``a.b`` and ``a``: Python runs a package's ``__init__`` first, so a package
that re-exports from a module which imports back into the package is a circle too.

Layers, lowest first (an import may go to its own layer or a lower one, never up):

====  ==========================================  =============================================
rank  folders                                      what they are
====  ==========================================  =============================================
0     ``drivers``                                  register map, driver, transports (no harness)
1     ``harness.refmodel``, ``harness.layouts``    the bit-exact model and the memory layouts
2     ``harness.targets``, ``sims``,               what runs a layer (model, Verilator, C model,
      ``harness.boards``                           board), how the simulators are built, the lab
                                                   (boards.health, which runs vectors, is rank 3)
3     ``harness.traces``, ``harness.vectors``,     the inputs: NVDLA's traces, packed vectors,
      ``harness.loadables``, ``harness.fuzz``      loadables, random layers; ``analysis``
      ``harness.analysis``, ``harness.results``,   (compare, triage, report), results history;
      ``harness.networks``, ``testvectors``        Caffe networks through NVDLA's compiler
4     ``harness.plugin``, ``harness.suites``       the pytest plugin and its suites
5     ``harness.cli``                              the command line, on top of everything
====  ==========================================  =============================================
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"drivers": "nvdla_hil.drivers", "harness": "nvdla_hil.harness", "sims": "nvdla_hil.sims",
           "testvectors": "nvdla_hil.testvectors", "nvdla_hil": "nvdla_hil"}
MAX_LINES = 700
RANKS = [  # (module prefix, rank); the longest matching prefix wins
    ("nvdla_hil", 0), ("nvdla_hil.drivers", 0),
    ("nvdla_hil.harness", 3), ("nvdla_hil.harness.networks", 3),
    ("nvdla_hil.harness.refmodel", 1), ("nvdla_hil.harness.layouts", 1),
    ("nvdla_hil.harness.targets", 2), ("nvdla_hil.sims", 2),
    ("nvdla_hil.harness.boards", 2), ("nvdla_hil.harness.boards.health", 3),
    ("nvdla_hil.harness.plugin", 4), ("nvdla_hil.harness.suites", 4),
    ("nvdla_hil.harness.cli", 5),
]
# subcommand modules of lower folders (``layouts/cli.py``, ``sims/cli.py``, ...) are command-line
# code: they sit with the CLI's rank, whatever folder holds them
CLI_LEAVES = ("cli",)


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for folder, pkg in FOLDERS.items():
        for f in (ROOT / folder).rglob("*.py"):
            parts = list(f.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = f
    return mods


MODULES = _modules()


def rank(module: str) -> int:
    if module.rsplit(".", 1)[-1] in CLI_LEAVES:
        return 5
    best = max((p for p, _ in RANKS if module == p or module.startswith(p + ".")), key=len)
    return dict(RANKS)[best]


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]


def imports_of(module: str) -> list[tuple[str, int, list[str]]]:
    """(imported module, line, names) for every import statement of ``module`` into the project."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    out: list[tuple[str, int, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, []) for a in node.names if a.name.split(".")[0] == "nvdla_hil"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module).split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "nvdla_hil":
                continue
            names = [a.name for a in node.names]
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            out += [(s, node.lineno, []) for s in subs]
            rest = [n for n in names if f"{target}.{n}" not in MODULES]
            if rest or not subs:
                out.append((target, node.lineno, rest))
    return out


def _with_packages(target: str) -> list[str]:
    parts = target.split(".")
    return [m for m in (".".join(parts[:i]) for i in range(len(parts), 0, -1)) if m in MODULES]


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _, _ in imports_of(m):
            for i, t in enumerate(_with_packages(target)):
                # the packages a module sits in are already running when it runs: an implied edge to
                # one of them is no circle; an explicit import of one is (``from .. import x``)
                if t != m and (i == 0 or not m.startswith(t + ".")):
                    graph[m].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_circle():
    found = cycles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_import_goes_up_a_layer():
    bad = []
    for m in MODULES:
        for target, line, _ in imports_of(m):
            t = _with_packages(target)[0] if _with_packages(target) else target
            if rank(t) > rank(m):
                bad.append(f"{MODULES[m].relative_to(ROOT)}:{line}: {m} (rank {rank(m)}) imports {t} (rank {rank(t)})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_private_name_crosses_a_module():
    bad = []
    for m in MODULES:
        for target, line, names in imports_of(m):
            own = target == m or target.startswith(m + ".")
            for n in names:
                if n.startswith("_") and not n.startswith("__") and not own:
                    bad.append(f"{MODULES[m].relative_to(ROOT)}:{line}: imports {target}.{n}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_no_module_is_past_one_head():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not big, f"modules over {MAX_LINES} lines:\n" + "\n".join(big)


def test_long_functions_state_why():
    """A function over 80 lines says why in a comment starting ``# long:`` (a flat register
    sequence reads best in one piece, say); every other one is split."""
    bad = []
    for p in MODULES.values():
        src = p.read_text()
        lines = src.splitlines()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
                n = node.end_lineno - node.lineno + 1
                body = lines[node.lineno - 1: node.end_lineno]
                if n > 80 and not any(ln.strip().startswith("# long:") for ln in body):
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}: {node.name} ({n} lines)")
    assert not bad, "functions over 80 lines without a '# long:' reason:\n" + "\n".join(bad)


def test_the_graph_reader_sees_a_planted_circle(tmp_path, monkeypatch):
    """The checks above can fail: a planted two-module circle and an upward import are found."""
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text("from .b import x\n")
    b.write_text("from .a import y\n")
    planted = {"nvdla_hil.drivers.a": a, "nvdla_hil.drivers.b": b, "nvdla_hil.drivers": ROOT / "drivers/__init__.py"}
    monkeypatch.setitem(globals(), "MODULES", planted)
    assert cycles(import_graph()) == [["nvdla_hil.drivers.a", "nvdla_hil.drivers.b"]]
    assert rank("nvdla_hil.drivers.a") < rank("nvdla_hil.harness.cli.vectors")


@pytest.mark.parametrize("module", ["nvdla_hil.harness.plugin", "nvdla_hil.harness.cli", "nvdla_hil.harness.suites"])
def test_entry_points_are_where_the_docs_say(module):
    assert module in MODULES


def test_the_reference_model_stands_alone():
    """The bit-exact model knows registers by field, not the driver: nothing under
    ``harness/refmodel`` imports ``nvdla_hil.drivers`` (the driver, its transports or its LUT
    programming), so the model can be read, reused and checked on its own."""
    bad = [f"{MODULES[m].relative_to(ROOT)}:{line}: imports {t}"
           for m in MODULES if m.startswith("nvdla_hil.harness.refmodel")
           for t, line, _ in imports_of(m) if t.startswith("nvdla_hil.drivers")]
    assert not bad, "the reference model imports the driver package:\n" + "\n".join(bad)


def test_every_package_ships_in_the_wheel():
    """pyproject lists the packages the wheel carries (the folders are mapped into ``nvdla_hil``):
    a new package folder missing there imports from a checkout and fails only when installed."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    assert folders - listed == set(), "package folders missing from pyproject's packages list"
    # a folder of data files below a package (an importable name, no __init__.py) is listed too:
    # setuptools ships it either way, but warns, and a first install must print no warnings
    mapped = {"drivers": "nvdla_hil.drivers", "harness": "nvdla_hil.harness", "sims": "nvdla_hil.sims",
              "testvectors": "nvdla_hil.testvectors"}
    data = set()
    for top, pkg in mapped.items():
        for d in (ROOT / top).rglob("*"):
            rel = d.relative_to(ROOT / top)
            if d.is_dir() and all(part.isidentifier() for part in rel.parts) and "__pycache__" not in rel.parts \
                    and not (d / "__init__.py").exists():
                data.add(".".join((pkg, *rel.parts)))
    assert data - listed == set(), "data folders missing from pyproject's packages list (setuptools warns)"
    assert listed - folders - data == set(), "pyproject lists packages that do not exist"
