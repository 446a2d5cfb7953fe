"""RTL code coverage of a regression on the Verilator target: line, branch and toggle points of
NVDLA's RTL, per test and merged, per NVDLA unit, ranked.

Where the numbers come from: an instrumented simulator (``nvdla-hil sim build --coverage
line,toggle``: Verilator's ``--coverage-line`` (blocks and if/else branches) and
``--coverage-toggle``) counts every point; between two tests the testbench writes the counts
since the previous test in Verilator's own ``coverage.dat`` format and zeroes them
(``sims/hdl/nvdla_hil_cov.cpp``), so each file holds one test's hits. The format is
``verilated_cov.cpp``'s: a ``# SystemC::Coverage-3`` line, then one ``C '<key>' <count>`` line
per point, the key a list of ``\\x01<field>\\x02<value>`` pairs (``t`` type, ``page``, ``f``
file, ``l`` line, ``n`` column, ``S`` lines covered, ``o`` comment, ``h`` hierarchy), every
point in every write, in one fixed order per build (an nv_small line+toggle build: 600k
points, 135 MB). So each file is compacted as soon as it is written (:func:`compact`): the
build's catalogue of points is kept once (``<build>/points.dat.gz``, the first file) and each
test keeps only its hit points and their counts (``<build>/<test>.npz``, a few hundred kB),
checked against the catalogue by a fingerprint of the keys. :func:`merge_folder` adds counts
point by point (the same sum whatever the order, so a 2-worker run merges to exactly what a
1-worker run gives) and :func:`write_outputs` writes, per configuration:

* ``merged.dat.gz``: Verilator's format again, so ``verilator_coverage`` (``--annotate``,
  ``--write-info``, ``--rank``) reads it once unzipped;
* ``coverage.info``: lcov's tracefile (``DA`` per line, ``BRDA`` per branch), which lcov's
  ``genhtml`` turns into the annotated-source HTML view (Debian package ``lcov``; the view is
  skipped, and the summary says so, when ``genhtml`` is not installed);
* ``summary.json``: per unit and kind, points hit / total; per test, points hit and points no
  other test hits; the greedy smallest set of tests that keeps every point the run hit.

A point identifies by its key without the hierarchy (Verilator collapses a module's instances
into one point unless per-instance coverage is forced): the same RTL line of a module is one
point however many instances it has. A unit is the folder of ``vmod/nvdla/<unit>/`` the
point's file is in (``cdma``, ``csc``, ``cmac``, ``cacc``, ``sdp``, ``pdp``, ``cdp``, ...);
NVDLA's shared RAM models, FIFOs and cell libraries are ``rams``, ``fifos`` and ``vlibs``; the
project's own testbench (``sims/hdl``) is ``testbench`` and is never counted in the totals.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...drivers.files import InputError, gunzip_bounded, read_regular
from ...sims.coverage import CATALOGUE, DAT_LIMIT, CoverageFile, compact, parse_counts, read_dat, write_dat

__all__ = [
    "FORMAT",
    "KINDS",
    "CoverageFile",
    "Points",
    "RunCoverage",
    "read_dat",
    "write_dat",
    "unit_of",
    "merge_folder",
    "merge_build",
    "holes",
    "compact",
    "parse_counts",
    "rank",
    "format_unit_table",
    "write_lcov",
    "genhtml",
    "load_summary",
    "write_outputs",
    "total_line",
    "unit_rows",
]

FORMAT = "nvdla-hil-rtl-coverage/1"
#: the kinds of point a table counts, in its column order (Verilator's ``t`` field)
KINDS: tuple[str, ...] = ("line", "branch", "toggle")
#: units that are not NVDLA's design (never in the totals)
NOT_DESIGN = frozenset({"testbench"})


def unit_of(filename: str) -> str:
    """The NVDLA unit a source file belongs to: ``.../vmod/nvdla/<unit>/...`` gives ``<unit>``;
    ``vmod/rams``, ``vmod/fifos``, ``vmod/vlibs`` their folder; the project's ``sims/hdl`` files
    (and anything else) ``testbench``."""
    parts = filename.replace("\\", "/").split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1] == "vmod":
            if parts[i] == "nvdla" and i + 2 < len(parts):
                return parts[i + 1].lower()
            if parts[i] in ("rams", "fifos", "vlibs", "include"):
                return parts[i]
    return "testbench"


def _fields(ident: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in ident.split("\x01"):
        if part:
            k, _, v = part.partition("\x02")
            out[k] = v
    return out


@dataclass
class Points:
    """The catalogue of a build's coverage points: identity, kind, unit, file, first line and
    the lines each covers (``S``), in one fixed order every test's counts follow."""

    idents: list[str]
    hiers: list[str]
    kind: np.ndarray  # index into KINDS, or -1 for a kind the tables do not count
    unit: np.ndarray  # index into units
    units: list[str]
    files: list[str]
    file: np.ndarray  # index into files
    line: np.ndarray  # int64
    lines: list[str]  # the S field ("12,13-15"), or ""
    comments: list[str]

    @classmethod
    def from_file(cls, cf: CoverageFile) -> Points:
        units: dict[str, int] = {}
        files: dict[str, int] = {}
        kind = np.full(len(cf.idents), -1, dtype=np.int8)
        unit = np.zeros(len(cf.idents), dtype=np.int32)
        file = np.zeros(len(cf.idents), dtype=np.int32)
        line = np.zeros(len(cf.idents), dtype=np.int64)
        lines: list[str] = []
        comments: list[str] = []
        kinds = {k: i for i, k in enumerate(KINDS)}
        for i, ident in enumerate(cf.idents):
            fl = _fields(ident)
            kind[i] = kinds.get(fl.get("t", ""), -1)
            fname = fl.get("f", "")
            file[i] = files.setdefault(fname, len(files))
            unit[i] = units.setdefault(unit_of(fname), len(units))
            try:
                line[i] = int(fl.get("l", "0"))
            except ValueError:
                line[i] = 0
            lines.append(fl.get("S", ""))
            comments.append(fl.get("o", ""))
        return cls(list(cf.idents), list(cf.hiers), kind, unit, list(units), list(files), file, line,
                   lines, comments)

    def __len__(self) -> int:
        return len(self.idents)

    def design_mask(self) -> np.ndarray:
        """Points of NVDLA's design of a counted kind (not the testbench)."""
        ours = np.array([u in NOT_DESIGN for u in self.units], dtype=bool)
        return (self.kind >= 0) & ~ours[self.unit]


@dataclass
class RunCoverage:
    """A run's RTL coverage: the points, each test's hits (packed bits, one row per test) and
    the merged counts; :meth:`summary` is what ``summary.json`` holds."""

    points: Points
    tests: list[str]
    hits: np.ndarray  # uint8 [tests, ceil(points/8)], np.packbits of count > 0
    counts: np.ndarray  # uint64 [points], summed over every file
    seconds: dict[str, float] = field(default_factory=dict)
    files: int = 0
    config: str = ""
    build: str = ""

    def hit_mask(self) -> np.ndarray:
        return self.counts > 0

    def unit_table(self) -> dict[str, dict[str, list[int]]]:
        """unit -> kind -> [hit, total] over NVDLA's design (every unit, ``total`` as a row)."""
        p = self.points
        design = p.design_mask()
        hit = self.hit_mask()
        out: dict[str, dict[str, list[int]]] = {}
        for ui, uname in enumerate(p.units):
            if uname in NOT_DESIGN:
                continue
            in_unit = design & (p.unit == ui)
            row = {k: [int(np.count_nonzero(in_unit & hit & (p.kind == ki))), int(np.count_nonzero(in_unit & (p.kind == ki)))]
                   for ki, k in enumerate(KINDS)}
            if any(t for _, t in row.values()):
                out[uname] = row
        out = dict(sorted(out.items()))
        out["total"] = {k: [sum(r[k][0] for r in out.values()), sum(r[k][1] for r in out.values())] for k in KINDS}
        return out

    def per_test(self) -> dict[str, dict[str, int]]:
        """test -> points of the design it hit, and points only it hit."""
        design = np.packbits(self.points.design_mask())
        if not self.tests:
            return {}
        per_point = np.zeros(len(self.points), dtype=np.int32)
        for row in self.hits:
            per_point += np.unpackbits(row, count=len(self.points)).astype(np.int32)
        only = np.packbits(per_point == 1)
        return {t: {"hit": int(np.bitwise_count(row & design).sum()),
                    "unique": int(np.bitwise_count(row & design & only).sum())}
                for t, row in zip(self.tests, self.hits, strict=True)}

    def summary(self) -> dict[str, Any]:
        real = [t for t in self.tests if not is_baseline(t)]
        design = self.points.design_mask()
        code = design & np.isin(self.points.kind, [KINDS.index("line"), KINDS.index("branch")])

        def ranked(mask: np.ndarray) -> dict[str, Any]:
            keep, gained = rank(self.tests, self.hits, np.packbits(mask))
            secs = [self.seconds.get(t) for t in keep]
            return {"tests": keep, "gained": gained,
                    "seconds": round(sum(s for s in secs if s is not None), 2) if keep else 0.0,
                    "seconds_all": round(sum(self.seconds.get(t, 0.0) for t in real), 2),
                    "timed": sum(s is not None for s in secs)}

        return {
            "config": self.config,
            "build": self.build,
            "points": len(self.points),
            "tests": len(real),
            "files": self.files,
            "units": self.unit_table(),
            "per_test": self.per_test(),
            "rank": ranked(design),  # every point: lines, branches and toggles
            "rank_code": ranked(code),  # lines and branches only (toggles make nearly every test unique)
        }


def is_baseline(test: str) -> bool:
    """A pseudo-test every run has (a simulator's start-up and reset: ``<...>``), not a test
    one can choose to run."""
    return test.startswith("<")


def holes(run: RunCoverage, *, per_unit: int = 5) -> dict[str, list[tuple[str, dict[str, int]]]]:
    """Where each unit's unhit points are: per unit, the ``per_unit`` source files with the most
    unhit line and branch points (toggles beside), most first: the places to look at when
    deciding whether a hole is unreachable in this configuration, out of the generators' reach,
    or missed."""
    p = run.points
    design = p.design_mask()
    miss = design & ~run.hit_mask()
    out: dict[str, list[tuple[str, dict[str, int]]]] = {}
    for ui, uname in enumerate(p.units):
        if uname in NOT_DESIGN:
            continue
        rows = []
        in_unit = miss & (p.unit == ui)
        for fi in np.unique(p.file[in_unit]).tolist():
            sel = in_unit & (p.file == fi)
            counts = {k: int(np.count_nonzero(sel & (p.kind == ki))) for ki, k in enumerate(KINDS)}
            rows.append((Path(p.files[fi]).name, counts))
        rows.sort(key=lambda r: (-(r[1]["line"] + r[1]["branch"]), -r[1]["toggle"], r[0]))
        if rows:
            out[uname] = rows[:per_unit]
    return dict(sorted(out.items()))


def rank(tests: Sequence[str], hits: np.ndarray, mask: np.ndarray) -> tuple[list[str], list[int]]:
    """The smallest set of tests (greedy set cover, as ``verilator_coverage --rank`` does) whose
    hits, with the start-up's (:func:`is_baseline`, always there), equal every test's; in the
    order picked, with the points each adds."""
    if not len(tests):
        return [], []
    rows = hits & mask
    covered = np.zeros(rows.shape[1], dtype=np.uint8)
    for i, t in enumerate(tests):
        if is_baseline(t):
            covered |= rows[i]
    left = [i for i, t in enumerate(tests) if not is_baseline(t)]
    keep: list[str] = []
    gained: list[int] = []
    while left:
        new = np.bitwise_count(rows[left] & ~covered).sum(axis=1)
        best = int(np.argmax(new))
        if new[best] == 0:
            break
        i = left.pop(best)
        covered |= rows[i]
        keep.append(tests[i])
        gained.append(int(new[best]))
    return keep, gained


def _sidecar(path: Path) -> dict[str, Any]:
    """A per-test file's ``.json`` (the test, configuration and build it came from)."""
    try:
        data = json.loads(read_regular(path.with_suffix(".json"), 1 << 16))
        return data if isinstance(data, dict) else {}
    except (OSError, InputError, ValueError):
        return {}


def _npz_arrays(data: bytes, points: int) -> dict[str, np.ndarray]:
    """The four arrays of a per-test ``.npz`` (``index``, ``count``: at most ``points`` elements;
    ``fingerprint``, ``points``: scalars), each member's header checked before anything is
    allocated: numpy allocates the shape a header declares, and a member's declared size bounds
    its decompression."""
    limits = {"index": points, "count": points, "fingerprint": 1, "points": 1}
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for name, most in limits.items():
            info = zf.getinfo(f"{name}.npy")
            if info.file_size > 128 + 16 * max(most, 1):
                raise ValueError(f"member {name}.npy declares {info.file_size} bytes, more than {most} elements need")
            with zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0) else
                                   np.lib.format.read_array_header_2_0(f))  # fmt: skip
                if dtype.hasobject or len(shape) > 1 or math.prod(shape) > most:
                    raise ValueError(f"member {name}.npy holds {dtype} of shape {shape}, not at most {most} numbers")
            with zf.open(info) as f:
                out[name] = np.lib.format.read_array(f, allow_pickle=False)
    return out


def _load_npz(path: Path, points: int, fingerprint: int) -> tuple[np.ndarray, np.ndarray]:
    """One test's hit indices and counts, checked (no pickle; indices within the catalogue)."""
    try:
        arrays = _npz_arrays(read_regular(path, DAT_LIMIT), points)
        index, count = arrays["index"].astype(np.int64), arrays["count"].astype(np.uint64)
        fp, n = int(arrays["fingerprint"]), int(arrays["points"])
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as e:
        raise InputError(f"{path}: not a per-test RTL coverage file: {e}") from None
    if fp != fingerprint or n != points:
        raise InputError(f"{path}: its {n} coverage points are not those of the build's catalogue ({points}): "
                         f"the files come from different simulator builds")
    if index.shape != count.shape or (len(index) and (index.min() < 0 or index.max() >= points)):
        raise InputError(f"{path}: point indices outside the catalogue's {points} points")
    return index, count


def merge_build(where: str | Path, *, seconds: Mapping[str, float] | None = None) -> RunCoverage:
    """Merge the per-test files of one build's folder (``<folder>/<build>/``: its catalogue
    and ``*.npz``, read in name order so the result does not depend on which worker wrote
    what first). Files of one test (a test that opened its target twice) are one row."""
    return merge_builds([(Path(where), "")], seconds=seconds)


def merge_builds(wheres: Sequence[tuple[Path, str]], *, seconds: Mapping[str, float] | None = None) -> RunCoverage:
    """:func:`merge_build` of several folders of one simulator build (several runs: nights), each
    with a label that prefixes its tests (``label::test``; "" for none). Every folder's catalogue
    must be the first one's: points of two builds are not the same points."""
    first = wheres[0][0]
    cat_data = gunzip_bounded(read_regular(first / CATALOGUE, DAT_LIMIT), DAT_LIMIT, first / CATALOGUE)
    fingerprint, _ = parse_counts(cat_data, first / CATALOGUE)
    points = Points.from_file(read_dat(first / CATALOGUE, data=cat_data))
    nbytes = (len(points) + 7) // 8
    tests: list[str] = []
    rows: dict[str, np.ndarray] = {}
    counts = np.zeros(len(points), dtype=np.uint64)
    config = build = ""
    nfiles = 0
    for where, label in wheres:
        if where != first:
            cat = where / CATALOGUE
            other, _ = parse_counts(gunzip_bounded(read_regular(cat, DAT_LIMIT), DAT_LIMIT, cat), cat)
            if other != fingerprint:
                raise InputError(f"{where / CATALOGUE}: another simulator build's points than {first / CATALOGUE}: "
                                 "coverage of different builds cannot be merged (merge each build's runs apart)")
        files = sorted(where.glob("*.npz"))
        nfiles += len(files)
        for path in files:
            index, count = _load_npz(path, len(points), fingerprint)
            counts[index] += count  # indices are unique within a file
            side = _sidecar(path)
            test = str(side.get("test") or path.stem)
            test = f"{label}::{test}" if label else test
            config, build = str(side.get("config") or config), str(side.get("build") or build)
            if test not in rows:
                tests.append(test)
                rows[test] = np.zeros(len(points), dtype=bool)
            rows[test][index[count > 0]] = True
    hits = np.stack([np.packbits(rows[t]) for t in tests]) if tests else np.zeros((0, nbytes), dtype=np.uint8)
    secs = {t: float(seconds[t]) for t in tests if seconds and t in seconds}
    return RunCoverage(points, tests, hits, counts, secs, nfiles, config=config or first.name,
                       build=build or first.name)


def _builds_in(folder: Path) -> list[Path]:
    return sorted(d for d in folder.glob("*") if d.is_dir() and (d / CATALOGUE).is_file()) if folder.is_dir() else []


def merge_folder(folder: str | Path, *, seconds: Mapping[str, float] | None = None) -> dict[str, RunCoverage]:
    """Every build's merged coverage in ``folder`` (the run's ``rtl-coverage/tests/``), by
    configuration; an :class:`InputError` when there is none."""
    folder = Path(folder)
    builds = _builds_in(folder)
    if not builds:
        raise InputError(f"{folder}: no per-test RTL coverage: did the run use an instrumented simulator "
                         f"(regress --rtl-coverage line,toggle)?")
    out: dict[str, RunCoverage] = {}
    for where in builds:
        run = merge_build(where, seconds=seconds)
        out[run.config if run.config not in out else f"{run.config}:{run.build}"] = run
    return out


def merge_runs(folders: Sequence[tuple[Path, str]]) -> dict[str, RunCoverage]:
    """The union of several runs' coverage (nights: ``(tests folder, run label)``), one per
    simulator build (the build folder's name): a run's tests are ``label::test``, so the ranking
    says which night's tests keep the union. A run without coverage is an :class:`InputError`."""
    by_build: dict[str, list[tuple[Path, str]]] = {}
    for folder, label in folders:
        builds = _builds_in(folder)
        if not builds:
            raise InputError(f"{folder}: no per-test RTL coverage (regress --rtl-coverage line,toggle)")
        for where in builds:
            by_build.setdefault(where.name, []).append((where, label))
    out: dict[str, RunCoverage] = {}
    for wheres in by_build.values():
        run = merge_builds(wheres)
        out[run.config if run.config not in out else f"{run.config}:{run.build}"] = run
    return out


def per_label(run: RunCoverage) -> dict[str, dict[str, int]]:
    """label (a run, in :func:`merge_runs`) -> design points its tests hit, and those no other
    run's tests hit."""
    design = run.points.design_mask()
    labels = sorted({t.split("::", 1)[0] for t in run.tests if "::" in t})
    masks = {}
    for lab in labels:
        rows = [r for t, r in zip(run.tests, run.hits, strict=True) if t.startswith(lab + "::")]
        hit = np.zeros(len(run.points), dtype=bool)
        for r in rows:
            hit |= np.unpackbits(r, count=len(run.points)).astype(bool)
        masks[lab] = hit & design
    out = {}
    for lab, m in masks.items():
        others = np.zeros(len(run.points), dtype=bool)
        for other, om in masks.items():
            if other != lab:
                others |= om
        out[lab] = {"hit": int(np.count_nonzero(m)), "only": int(np.count_nonzero(m & ~others))}
    return out


def union_over_runs(runs: Sequence[tuple[str, str | Path]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The union of the RTL coverage of runs ``(run id, run folder)`` from the per-test files their
    folders still hold (``rtl-coverage/tests/``): per configuration (as :func:`merge_runs` names
    them) ``{"runs": run ids merged, "units": unit -> kind -> [hit, total], "share": run id ->
    {"hit", "only"}}``, and a note per run left out (its folder or files gone or unreadable)."""
    folders: list[tuple[Path, str]] = []
    notes: list[str] = []
    for rid, d in runs:
        tests = Path(d) / "rtl-coverage" / "tests"
        if not tests.is_dir() or not _builds_in(tests):
            notes.append(f"{rid}: its folder no longer holds per-test RTL coverage ({tests})")
            continue
        folders.append((tests, rid))
    out: dict[str, dict[str, Any]] = {}
    if not folders:
        return out, notes
    try:
        merged = merge_runs(folders)
    except (InputError, ValueError, OSError) as e:
        return out, [*notes, f"no union: {e}"]
    for name, run in merged.items():
        share = per_label(run)
        out[name] = {"runs": [rid for rid in dict.fromkeys(t.split("::", 1)[0] for t in run.tests if "::" in t)],
                     "units": run.unit_table(), "share": share}
    return out, notes


def format_unit_table(units: Mapping[str, Mapping[str, Sequence[int]]]) -> str:
    """The per-unit table: one row per NVDLA unit, hit/total and percent of each kind."""
    def cell(h: int, t: int) -> str:
        return f"{h}/{t} {100.0 * h / t:5.1f}%" if t else "-"

    rows = [["unit", *KINDS]]
    for unit, kinds in units.items():
        rows.append([unit.upper() if unit != "total" else "total",
                     *(cell(*kinds.get(k, (0, 0))) for k in KINDS)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _lines_of(spec: str, first: int) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        m = _RANGE.match(part.strip())
        if m:
            a = int(m.group(1))
            b = int(m.group(2) or a)
            out.extend(range(a, min(b, a + 10_000) + 1))
    return out or ([first] if first > 0 else [])


def write_lcov(path: str | Path, run: RunCoverage) -> int:
    """Write lcov's tracefile of the design's line and branch points: ``DA`` per line with the
    largest count of the blocks that cover it, ``BRDA`` per branch point (lcov has no toggle
    record: toggles are in ``summary.json`` and ``merged.dat``). Returns the number of files."""
    p = run.points
    design = p.design_mask()
    per_file: dict[int, dict[int, int]] = {}
    branches: dict[int, list[tuple[int, int, int]]] = {}
    counts = run.counts.tolist()
    for i in np.flatnonzero(design & (p.kind == KINDS.index("line"))).tolist():
        lines = per_file.setdefault(int(p.file[i]), {})
        for ln in _lines_of(p.lines[i], int(p.line[i])):
            lines[ln] = max(lines.get(ln, 0), counts[i])
    for i in np.flatnonzero(design & (p.kind == KINDS.index("branch"))).tolist():
        branches.setdefault(int(p.file[i]), []).append((int(p.line[i]), i, counts[i]))
    tmp = Path(path).with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("TN:nvdla-hil\n")
        for fi in sorted(set(per_file) | set(branches)):
            f.write(f"SF:{p.files[fi]}\n")
            lines = per_file.get(fi, {})
            for ln in sorted(lines):
                f.write(f"DA:{ln},{lines[ln]}\n")
            brs = sorted(branches.get(fi, []))
            for n, (ln, _i, c) in enumerate(brs):
                f.write(f"BRDA:{ln},0,{n},{c if c else '-'}\n")
            f.write(f"LF:{len(lines)}\nLH:{sum(1 for c in lines.values() if c)}\n")
            if brs:
                f.write(f"BRF:{len(brs)}\nBRH:{sum(1 for b in brs if b[2])}\n")
            f.write("end_of_record\n")
    os.replace(tmp, path)
    return len(set(per_file) | set(branches))


def genhtml(info: str | Path, html_dir: str | Path, *, title: str = "nvdla-hil RTL coverage") -> str | None:
    """lcov's ``genhtml`` on ``info`` into ``html_dir``; returns None when done, else why not
    (genhtml missing, or its error's last line)."""
    exe = shutil.which("genhtml")
    if exe is None:
        return "genhtml not found (Debian/Ubuntu: apt-get install lcov); the lcov tracefile is there for any viewer"
    cmd = [exe, "--quiet", "--branch-coverage", "--title", title, "--output-directory", str(html_dir),
           "--ignore-errors", "source", str(info)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        cmd.remove("--branch-coverage")  # older lcov spells it --rc lcov_branch_coverage=1
        r = subprocess.run([*cmd[:2], "--rc", "lcov_branch_coverage=1", *cmd[2:]], capture_output=True, text=True,
                           check=False)
    if r.returncode != 0:
        last = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return f"genhtml failed: {last[0]}"
    return None


def load_summary(path: str | Path) -> dict[str, Any]:
    """A ``summary.json`` written by :func:`write_outputs` (bounded; checked format)."""
    try:
        data = json.loads(read_regular(path, 64 << 20))
    except ValueError as e:
        raise InputError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("configs"), dict):
        raise InputError(f"{path}: not an nvdla-hil RTL coverage summary (format {FORMAT})")
    return data


def write_outputs(folder: str | Path, runs: Mapping[str, RunCoverage], *, html: bool = True) -> dict[str, Any]:
    """Write, per configuration, ``<config>/merged.dat.gz``, ``<config>/coverage.info`` and
    ``<config>/html/`` (genhtml), and one ``summary.json`` for all, into ``folder`` (the run
    folder's ``rtl-coverage/``); returns the summary."""
    folder = Path(folder)
    configs: dict[str, Any] = {}
    for name, run in runs.items():
        where = folder / re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        where.mkdir(parents=True, exist_ok=True)
        write_dat(where / "merged.dat.gz", run.points.idents, run.points.hiers, run.counts)
        write_lcov(where / "coverage.info", run)
        one = run.summary()
        why = genhtml(where / "coverage.info", where / "html", title=f"nvdla-hil RTL coverage: {name}") if html \
            else "not asked for"
        one["folder"] = where.name
        one["html"] = f"{where.name}/html/index.html" if why is None else None
        one["html_note"] = why
        configs[name] = one
    summary = {"format": FORMAT, "kinds": list(KINDS), "configs": configs}
    tmp = folder / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, folder / "summary.json")
    return summary


def total_line(one: Mapping[str, Any]) -> str:
    """One line: a configuration's totals per kind (``one``: ``summary["configs"][name]``)."""
    tot = one.get("units", {}).get("total", {})
    parts = []
    for k in KINDS:
        h, t = tot.get(k, (0, 0))
        if t:
            parts.append(f"{k} {h}/{t} ({100.0 * h / t:.1f}%)")
    return ", ".join(parts) or "no point of NVDLA's design"


def unit_rows(one: Mapping[str, Any]) -> Iterable[tuple[str, dict[str, tuple[int, int]]]]:
    """(unit, {kind: (hit, total)}) rows of a configuration's summary, the total last."""
    for unit, kinds in one.get("units", {}).items():
        yield unit, {k: tuple(kinds.get(k, (0, 0))) for k in KINDS}
