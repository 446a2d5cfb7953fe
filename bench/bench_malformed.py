"""Malformed-input campaign over the command line (issue 26): at least 2,000 inputs a new user
or a hostile file could hand ``nvdla-hil`` - YAML bombs and merge chains, 5,000-digit integers,
NUL characters, duplicate keys, wrong types, malformed and out-of-profile traces and .dat
images, bad lab files, constraints, labgrid environments, coverage files and register
arguments, and malformed inputs *inside* ``regress`` - each run through ``cli.main`` in a
forked child (one per input, RLIMIT_AS 3 GiB, killed after ``--timeout`` seconds).

    .venv/bin/python bench/bench_malformed.py [--workers 2] [--timeout 10] [--only KIND] [--keep DIR]

Every input is built to be malformed, so the expected exit code is 2 (bad input); a few
mutations may leave an input valid, and those (marked "maybe") may also exit 0 or 1. Printed
per kind and in total: inputs, tracebacks (exit 3, "Traceback" or pytest-format "E " lines),
hangs (over the timeout), wrong exit codes, and the largest child peak RSS; the campaign
passes with 0 / 0 / 0 and every child under 1 GiB.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: forked children inherit no BLAS threads
import json
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SECTION = 64  # a few lines of context per failure in the report

# ---- YAML attacks (shared by every YAML input) ------------------------------------------------------


def _bomb(levels: int, width: int) -> str:
    out = f"b0: &b0 [{', '.join(['lol'] * width)}]\n"
    return out + "".join(f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * width) + "]\n" for i in range(1, levels))


def _chain(n: int) -> str:
    return "m0: &m0 {k0: 1}\n" + "".join(f"m{i}: &m{i} {{<<: *m{i - 1}, k{i}: 1}}\n" for i in range(1, n))


def yaml_attacks(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(label, YAML text fragment at top level) - each one refused by yamlstrict."""
    out: list[tuple[str, str]] = []
    for i in range(n):
        k = i % 8
        if k == 0:
            lv, w = rng.randint(7, 12), rng.randint(10, 40)
            out.append((f"alias-bomb-{lv}x{w}", _bomb(lv, w)))
        elif k == 1:
            out.append((f"merge-chain-{i}", _chain(rng.choice([2, 50, 4000, 20000]))))
        elif k == 2:
            out.append((f"recursive-{i}", f"r{i}: &r [1, [2, *r]]\n"))
        elif k == 3:
            d = rng.randint(65, 3000)
            out.append((f"deep-{d}", "x: " + "[" * d + "]" * d + "\n"))
        elif k == 4:
            n_dig = rng.randint(101, 6000)
            out.append((f"bigint-{n_dig}", f"big: {rng.choice(['', '-', '0x'])}{'9' * n_dig}\n"))
        elif k == 5:
            out.append((f"nul-{i}", f'n{i}: "a\\0b{i}"\n'))
        elif k == 6:
            out.append((f"tagged-bigint-{i}", f"big: !!int {'7' * rng.randint(101, 2000)}\n"))
        else:
            out.append((f"merge-inline-{i}", f"base: &base {{a: {i}}}\nm:\n  <<: *base\n  b: 1\n"))
    return out


# ---- input builders: each returns (kind, label, argv, expect) ----------------------------------------


def _case_src() -> Path:
    return HERE / "testvectors" / "sdp_cvt" / "sdp_cvt-s1-000"


def vectors(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    src = _case_src()
    base = (src / "case.yaml").read_text(encoding="utf-8")
    lines = base.splitlines(keepends=True)
    keys = [ln.split(":", 1)[0] for ln in lines if ln[:1].isalpha() and ":" in ln]
    out = []
    attacks = yaml_attacks(rng, n // 3)
    for i in range(n):
        d = work / "vec" / f"c{i:05d}"
        shutil.copytree(src, d)
        expect = "2"
        k = i % 9
        if i < len(attacks) and k < 3:
            label, text = attacks[i]
            body = base + text
        elif k == 3:  # a duplicate top-level key
            key = rng.choice(keys)
            line = next(ln for ln in lines if ln.startswith(key + ":"))
            label, body = f"dup-{key}", base + line
        elif k == 4:  # a blob name that escapes or is not a name
            bad = rng.choice(['"../x.bin"', '"/etc/passwd"', '"a\\0.bin"', '"missing.bin"', "[1, 2]", '""', "{a: 1}"])
            label, body = f"blob-{bad}", base.replace("data: src.bin", f"data: {bad}", 1)
        elif k == 5:  # a wrong type for a top-level key
            key = rng.choice(["format", "name", "kind", "unit", "profile", "registers", "convertors"])
            val = rng.choice(["[1, 2]", "{x: 1}", "null", "123", "-1", "1e999", '"\\u00e9\\u2603"', "9" * 120])
            label = f"type-{key}"
            body = "".join(f"{key}: {val}\n" if ln.startswith(key + ":") and not ln.startswith(key + ": |") else ln
                           for ln in lines)
            expect = "maybe" if key in ("name",) else "2"
        elif k == 6:  # a register field value that does not fit, or an unknown register/field
            what = rng.choice([f"WIDTH: {1 << rng.randint(13, 80)}", "NOPE: 1", f"WIDTH: -{rng.randint(1, 99)}",
                               "WIDTH: 0x" + "f" * rng.randint(10, 60), "WIDTH: [1]"])
            label, body = f"field-{what[:16]}", base.replace("fields: {WIDTH: 2}", f"fields: {{{what}}}", 1)
            if "NOPE" not in what and "[" not in what and "-" not in what and len(what) < 14:
                expect = "maybe"
        elif k == 7:  # truncated somewhere inside the registers list
            cut = rng.randint(8, len(lines) - 1)
            label, body = f"truncated-at-{cut}", "".join(lines[:cut]) + lines[cut][: rng.randint(1, max(1, len(lines[cut]) - 1))]
            expect = "maybe"
        else:  # bytes that are not UTF-8, or a NUL byte in the middle
            pos = rng.randint(0, len(base) - 1)
            label = f"bytes-at-{pos}"
            (d / "case.yaml").write_bytes(base[:pos].encode() + rng.choice([b"\xff\xfe", b"\x00", b"\xc3("]) + base[pos:].encode())
            out.append(("vector", label, ["vectors", "run", str(d)], expect))
            continue
        (d / "case.yaml").write_text(body, encoding="utf-8")
        out.append(("vector", label, ["vectors", "run", str(d)], expect))
    return out


GOOD_TRACE = """mem_init(pri_mem, 0x80000000, 0x10, ALL_ZERO);
mem_load(pri_mem, 0x80000000, "in.dat");
reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x3);
intr_notify(SDP_0, sync_id_0);
check_crc(sync_id_0, 1, 0x80000000, 0x4, 0xb63cfbcd);
"""
DAT = "{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04},\n"


def traces(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    lines = GOOD_TRACE.splitlines(keepends=True)
    out = []
    for i in range(n):
        d = work / "tr" / f"t{i:05d}"
        d.mkdir(parents=True)
        cfg, dat, expect = GOOD_TRACE, DAT, "2"
        k = i % 12
        if k == 0:
            addr = rng.choice([1 << 32, 1 << 40, 0xFFFFFFF0, (1 << 33) + rng.randint(0, 1 << 20)])
            label, cfg = f"mem_init-{addr:#x}", f"mem_init(pri_mem, {addr:#x}, 0x100, ALL_ZERO);\n" + GOOD_TRACE
        elif k == 1:
            addr = rng.choice([1 << 33, 0x200000000, 0xFFFFFFFF])
            label, cfg = f"check_crc-{addr:#x}", GOOD_TRACE.replace("0x80000000, 0x4, 0xb63cfbcd", f"{addr:#x}, 0x4, 0x0")
        elif k == 2:
            reg = rng.choice(["SDP.S_STATUS", "CDMA.S_CBUF_FLUSH_STATUS", "PDP.S_STATUS", "CACC.S_STATUS"])
            label = f"ro-write-{reg}"
            cfg = f"reg_write(NVDLA_{reg}_0, {rng.randint(4, 0xFFFF) << 8:#x});\n" + GOOD_TRACE
        elif k == 3:
            label = "unknown-register"
            cfg = f"reg_write(NVDLA_SDP.D_NOPE_{rng.randint(0, 999)}_0, 0x1);\n" + GOOD_TRACE
        elif k == 4:
            num = rng.choice(["0x" + "f" * rng.randint(17, 4000), "9" * rng.randint(21, 5000), "0777", "0x", "-1"])
            label, cfg = f"number-{num[:10]}", GOOD_TRACE.replace("0x10, ALL_ZERO", f"{num}, ALL_ZERO")
        elif k == 5:
            ln = rng.randrange(len(lines))
            label = f"cut-line-{ln}"
            cfg = "".join(lines[:ln]) + lines[ln][: rng.randint(1, len(lines[ln]) - 3)] + "\n" + "".join(lines[ln + 1:])
        elif k == 6:
            pos = rng.randrange(len(GOOD_TRACE))
            label = f"bytes-{pos}"
            (d / "t.cfg").write_bytes(GOOD_TRACE[:pos].encode() + rng.choice([b"\x00", b"\xff", b"\xe2\x98\x83"])
                                      + GOOD_TRACE[pos:].encode())
            (d / "in.dat").write_text(DAT)
            out.append(("trace", label, ["trace", str(d), "--profile", "nv_small", "--timeout", "2"], expect))
            continue
        elif k == 7:
            bad = rng.choice(['"../in.dat"', '"/etc/passwd"', '"in\\0.dat"', '"missing.dat"', '""'])
            label, cfg = f"mem_load-{bad}", GOOD_TRACE.replace('"in.dat"', bad)
        elif k == 8:
            dat = rng.choice([
                "{offset:0x0, size:4, payload:0x01 0x02 0x03}\n",
                "{offset:0x0, size:4, payload:0x01 0x02 0x03 0x0g}\n",
                "{offset:0x" + "f" * 40 + ", size:4, payload:0x01 0x02 0x03 0x04}\n",
                "{offset:0x0, size:" + "9" * 30 + ", payload:0x01}\n",
                "{offset:0x0 size:4 payload:0x01 0x02 0x03 0x04}\n",
                "garbage\n" * rng.randint(1, 50),
                "{offset:0x0, size:4, payload:" + " 0x01" * 4 + "},\n" + "{offset:0x0, size:4, payload:0x09 0x02 0x03 0x04},\n",
            ])
            label = f"dat-{i}"
        elif k == 9:
            label = f"unknown-command-{i}"
            cfg = GOOD_TRACE + rng.choice(["mem_wipe(pri_mem);\n", "reg_write(;\n", "check_crc()\n", "}}}\n",
                                           "intr_notify(SDP, x);\n", "poll_reg_equal(NVDLA_SDP.S_STATUS_0);\n"])
        elif k == 10:
            port = rng.choice(["ter_mem", "PRI_MEM", "mem", "sec_mem "])
            label, cfg = f"port-{port}", GOOD_TRACE.replace("mem_init(pri_mem", f"mem_init({port}", 1)
        else:
            label = f"size-{i}"
            cfg = GOOD_TRACE.replace("0x80000000, 0x4, 0xb63cfbcd", rng.choice(["0x80000000, 0x0, 0x0",
                                                                                 "0x80000000, 0x80000000, 0x0"]))
        (d / "t.cfg").write_text(cfg)
        (d / "in.dat").write_text(dat)
        out.append(("trace", label, ["trace", str(d), "--profile", "nv_small", "--timeout", "2"], expect))
    return out


LAB = "boards:\n  a:\n    url: socket://127.0.0.1:9\n    baud: 115200\n"


def labs(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    out = []
    attacks = yaml_attacks(rng, n)
    for i in range(n):
        p = work / "lab" / f"l{i:05d}.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        k = i % 4
        if k == 0:
            label, text = attacks[i]
            body = text + LAB
        elif k == 1:
            field = rng.choice(["baud", "url", "dram_base", "dram_nvdla_base", "response_timeout", "colour"])
            val = rng.choice(["fast", "[1]", "{a: 1}", "-5", "1e999", "9" * 200, "null", '"\\0"'])
            label, body = f"field-{field}", LAB + f"    {field}: {val}\n"
        elif k == 2:
            label, body = "dup", LAB + rng.choice(["    baud: 9600\n", "  a:\n    url: loop://\n", "boards: {}\n"])
        else:
            label, body = "shape", rng.choice(["[]\n", "boards: 5\n", "boards:\n  a: 7\n", "x: 1\n", ""])
        p.write_text(body, encoding="utf-8")
        out.append(("lab", label, ["regs", "read", "SDP.S_STATUS", "--target", "serial", "--lab", str(p),
                                   "--board", "a"], "2"))
    return out


def constraints(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    out = []
    attacks = yaml_attacks(rng, n)
    for i in range(n):
        p = work / "cons" / f"c{i:05d}.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        if i % 2 == 0:
            label, body = attacks[i]
        else:
            label = "fields"
            body = rng.choice(["fields:\n  nope: {range: [1, 2]}\n", "fields:\n  channels: {range: [5, 1]}\n",
                               "fields: 7\n", "fields:\n  channels: {range: [1, 2]}\n  channels: {range: [1, 3]}\n",
                               "fields:\n  channels: {range: [1, " + "9" * 300 + "]}\n", "weights: [1, 2]\n"])
        p.write_text(body, encoding="utf-8")
        out.append(("constraints", label, ["fuzz", "--unit", "sdp-cvt", "--target", "cmod", "--constraints", str(p),
                                           "--count", "1"], "2"))
    return out


def lgenvs(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    out = []
    for i, (label, text) in enumerate(yaml_attacks(rng, n)):
        p = work / "lg" / f"e{i:05d}.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "targets:\n  main:\n    resources:\n      RemotePlace: {name: x}\n", encoding="utf-8")
        out.append(("lg-env", label, ["regs", "read", "SDP.S_STATUS", "--target", "serial", "--lg-env", str(p)], "2"))
    return out


def coverage_files(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    out = []
    for i in range(n):
        p = work / "cov" / f"v{i:05d}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        body = rng.choice([
            "{", "[]", json.dumps({"format": "other"}), json.dumps({"format": "nvdla-hil-coverage/1", "bins": []}),
            json.dumps({"format": "nvdla-hil-coverage/1", "bins": {"nope": 1}}),
            json.dumps({"format": "nvdla-hil-coverage/1", "bins": {"sdp.out.sat_high": -1}}),
            '{"format": "nvdla-hil-coverage/1", "bins": {"sdp.out.sat_high": ' + "9" * rng.randint(5000, 9000) + "}}",
            '{"format": "nvdla-hil-coverage/1", "layers": "x", "bins": {}}', "\x00\x01", "[" * 100000,
        ])
        p.write_text(body, encoding="utf-8")
        out.append(("coverage", f"cov-{i % 10}", ["coverage", "show", str(p)], "2"))
    return out


def regs_args(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    out = []
    for i in range(n):
        k = i % 6
        if k == 0:
            argv = ["regs", "read", rng.choice(["NOPE.X", "SDP", "SDP.", ".X", "SDP.D_NOPE", "a" * 300, "SDP.D_CVT_SCALE.X"])]
        elif k == 1:
            argv = ["regs", "write", "SDP.D_CVT_SCALE", "CVT_SCALE=1", "CVT_SCALE=2"]
        elif k == 2:
            argv = ["regs", "write", "SDP.D_CVT_SCALE", rng.choice(["abc", "0x", "1" * 5000, "-1", "0x1ffffffff", "=", "A=",
                                                                      "CVT_SCALE=" + "9" * 5000, "CVT_SCALE=NOPE"])]
        elif k == 3:
            argv = ["regs", rng.choice(["read", "write"]), "SDP.S_LUT_ACCESS_CFG", *(["0"] if i % 2 else []),
                    "--profile", "nv_small"]
            if argv[1] == "write" and len(argv) == 5:
                argv.insert(3, "0")
        elif k == 4:
            argv = ["regs", "dump", rng.choice(["GEC", "RUBIK", "BDMA", "NOPE", "CDMA2"]), "--profile", "nv_small"]
        else:
            argv = ["regs", "read", "SDP.S_STATUS", "--profile", rng.choice(["nv_nope", "/nonexistent.spec", "", "nv_small,nope"])]
        out.append(("regs", " ".join(argv[1:4])[:40], argv, "2"))
    return out


def regress_inside(work: Path, rng: random.Random, n: int) -> list[tuple[str, str, list[str], str]]:
    """Malformed vectors inside a regression: the run is exit 2 (bad input), no tracebacks."""
    out = []
    cases = vectors(work / "rg", rng, n * 3)
    for i in range(n):
        root = work / "rg" / f"set{i:03d}"
        root.mkdir(parents=True)
        for _, _, argv, expect in cases[i * 3:(i + 1) * 3]:
            if expect == "2":
                shutil.move(argv[2], root / Path(argv[2]).name)
        if not any(root.iterdir()):
            shutil.rmtree(root)
            continue
        out.append(("regress", f"set{i}", ["regress", "--suite", "vectors", "--vectors", str(root), "--results-dir",
                                           str(work / "results"), "--results-db", str(root) + ".sqlite"], "2"))
    return out


# ---- the runner --------------------------------------------------------------------------------------


def _child(argv: list[str], out: Path) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the child exits with os._exit
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    code = 99
    try:
        from nvdla_hil.harness.cli import main

        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except BaseException:  # noqa: BLE001 - an escape from main() is a traceback of the campaign
        import traceback

        traceback.print_exc()
        code = 98
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(int(code))


def run(inputs: list[tuple[str, str, list[str], str]], workers: int, timeout: float, logs: Path) -> dict:
    import importlib

    import pytest  # noqa: F401 - loaded once, shared by every forked child

    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.drivers.regmap import load_regmap
    from nvdla_hil.harness.cli import build_parser

    build_parser()  # imports every subcommand's module
    for mod in ("nvdla_hil.harness.plugin", "nvdla_hil.harness.targets.model", "nvdla_hil.harness.fuzz",
                "nvdla_hil.harness.boards.lab", "nvdla_hil.harness.boards.labgrid_place", "nvdla_hil.harness.suites.test_vectors",
                "labgrid"):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass
    for gen in ("v1", "v2"):
        load_regmap(gen)
    for name in ("nv_small", "nv_full"):
        _ = load_profile(name).regmap

    per: dict[str, Counter] = {}
    fails: list[str] = []
    pending = list(enumerate(inputs))
    running: dict[int, tuple[int, float, Path]] = {}
    peak_kib = 0
    while pending or running:
        while pending and len(running) < workers:
            idx, (_kind, _label, argv, _e) = pending.pop(0)
            out = logs / f"{idx:05d}.txt"
            pid = os.fork()
            if pid == 0:
                _child(argv, out)
            running[pid] = (idx, time.monotonic(), out)
        pid, status, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (idx, t0, _) in list(running.items()):
                if now - t0 > timeout:
                    os.kill(p, signal.SIGKILL)
                    running[p] = (idx, -1e12, running[p][2])
            time.sleep(0.005)
            continue
        idx, t0, out = running.pop(pid)
        kind, label, argv, expect = inputs[idx]
        c = per.setdefault(kind, Counter())
        c["inputs"] += 1
        peak_kib = max(peak_kib, ru.ru_maxrss)
        c["peak_kib"] = max(c["peak_kib"], ru.ru_maxrss)
        text = out.read_text(errors="replace")
        hung = t0 < 0
        code = os.waitstatus_to_exitcode(status)
        tb = (not hung) and (code in (3, 98) or "Traceback (most recent call last)" in text or "INTERNALERROR" in text
                             or any(ln.startswith("E   ") for ln in text.splitlines()))
        wrong = (not hung) and not tb and not (code == 2 or (expect == "maybe" and code in (0, 1)))
        c["hangs"] += hung
        c["tracebacks"] += tb
        c["wrong_exit"] += wrong
        c[f"exit {code}"] += 1
        if hung or tb or wrong:
            why = "hang" if hung else "traceback" if tb else f"exit {code}"
            fails.append(f"[{kind} {label}] {why}: nvdla-hil {' '.join(argv)[:200]}\n    "
                         + "\n    ".join(text.strip().splitlines()[-SECTION // 8:]))
    return {"per": per, "fails": fails, "peak_kib": peak_kib}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before an input counts as a hang")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--only", help="one kind: vector, trace, lab, constraints, lg-env, coverage, regs, regress")
    ap.add_argument("--keep", help="keep the generated inputs and outputs here (default: a temporary folder)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nvdla-malformed-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    builders = {"vector": (vectors, 600), "trace": (traces, 720), "lab": (labs, 240), "constraints": (constraints, 160),
                "lg-env": (lgenvs, 96), "coverage": (coverage_files, 100), "regs": (regs_args, 180),
                "regress": (regress_inside, 16)}
    inputs = []
    for kind, (fn, n) in builders.items():
        if args.only and kind != args.only:
            continue
        inputs += fn(work, rng, n)
    logs = work / "out"
    (logs / "regress").mkdir(parents=True)
    t0 = time.monotonic()
    # a regression starts pytest (about 5 s of imports and reporting on an idle machine): those
    # run one at a time after the rest, so two of them never share the two cores of a small machine
    quick = [x for x in inputs if x[0] != "regress"]
    res = run(quick, args.workers, args.timeout, logs)
    slow = run([x for x in inputs if x[0] == "regress"], 1, args.timeout, logs / "regress")
    res["per"].update(slow["per"])
    res["fails"] += slow["fails"]
    res["peak_kib"] = max(res["peak_kib"], slow["peak_kib"])
    total: Counter = Counter()
    print(f"{'kind':<12}{'inputs':>8}{'tracebacks':>12}{'hangs>' + str(int(args.timeout)) + 's':>10}{'wrong exit':>12}"
          f"{'peak RSS':>12}  exit codes")
    for kind, c in res["per"].items():
        codes = ", ".join(f"{k.split()[1]}:{v}" for k, v in sorted(c.items()) if k.startswith("exit "))
        print(f"{kind:<12}{c['inputs']:>8}{c['tracebacks']:>12}{c['hangs']:>10}{c['wrong_exit']:>12}"
              f"{c['peak_kib'] / 1024:>9.0f} MB  {codes}")
        for k in ("inputs", "tracebacks", "hangs", "wrong_exit"):
            total[k] += c[k]
    peak_mb = res["peak_kib"] / 1024
    print(f"{'total':<12}{total['inputs']:>8}{total['tracebacks']:>12}{total['hangs']:>10}{total['wrong_exit']:>12}"
          f"{peak_mb:>9.0f} MB  in {time.monotonic() - t0:.0f} s")
    for f in res["fails"][:40]:
        print(f)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    ok = total["tracebacks"] == total["hangs"] == total["wrong_exit"] == 0 and peak_mb < 1024
    print("campaign: " + ("PASS" if ok else "FAIL") + f" ({total['inputs']} malformed inputs)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
