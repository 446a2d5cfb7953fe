"""Mutation campaign over every untrusted input class (issue 10): trace .cfg, .dat, vector
case.yaml and vector blobs. Real files (NVDLA's public traces, the bundled vectors) are mutated
(byte flips, truncations, duplicated / deleted lines, huge numbers, swapped tokens, inserted
bytes) and each mutant is parsed, loaded and (traces) run on the model target in a child
process with RLIMIT_AS (default 2 GiB) and a per-input timeout.

    .venv/bin/python bench/bench_mutations.py [--per-class 1000] [--workers 2] [--timeout 20]

Per class it prints: inputs, clean errors (TraceError / VectorError naming the file),
accepted-valid, tracebacks (any other exception, or an error not naming the file), timeouts,
over-memory (MemoryError or a child killed), and the largest child max RSS.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: forked children inherit no BLAS threads
import random
import resource
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

TRACES = Path(os.environ.get("NVDLA_TRACE_SETS", Path(__file__).resolve().parents[1] / "../shared/nvdla/trace_tests"))
#: small nv_small traces that run quickly on the model (the .cfg/.dat sources)
SOURCES = ["sdp_8x8x32_bypass_int8_0", "cdp_8x8x32_lrn3_int8_0", "pdp_8x8x32_1x1_int8_0",
           "sdp_pdp_32x16x32_pass_through_int8_0", "sdp_1x8192x1_pass_through_int8_0"]
CLASSES = ("cfg", "dat", "yaml", "blob")


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        lines = bytes(b).split(b"\n")
        op = rng.randrange(8)
        p = rng.randrange(len(b)) if b else 0
        if op == 0 and b:  # byte flip
            b[p] ^= 1 << rng.randrange(8)
        elif op == 1:  # truncation
            b = b[:p]
        elif op == 2:  # duplicated line
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            b = bytearray(b"\n".join(lines))
        elif op == 3:  # huge number
            num = rng.choice([b"0x" + b"f" * rng.randint(9, 40), b"9" * rng.randint(10, 60), b"0x10000000000000000",
                              b"0xffffffff", b"0x3fffffff", b"0x7fffffffffffffff", b"-1", b"4294967296", b"1e308",
                              b"99999999999999999999999999"])
            # replace a number-looking token
            toks = bytes(b).split(b" ")
            idx = [k for k, t in enumerate(toks) if any(ch in b"0123456789" for ch in t)]
            if idx:
                k = rng.choice(idx)
                tail = b"".join(bytes([c]) for c in toks[k] if c in b",;)}]\n")
                toks[k] = num + tail
                b = bytearray(b" ".join(toks))
            else:
                b[p:p] = num
        elif op == 4:  # deleted line
            i = rng.randrange(len(lines))
            del lines[i]
            b = bytearray(b"\n".join(lines))
        elif op == 5:  # swapped tokens
            toks = bytes(b).split(b",")
            if len(toks) > 2:
                i = rng.randrange(len(toks) - 1)
                toks[i], toks[i + 1] = toks[i + 1], toks[i]
            b = bytearray(b",".join(toks))
        elif op == 6:  # inserted byte (incl. non-ASCII)
            b[p:p] = bytes([rng.choice([0, 0xFF, 0xC3, 0x7B, 0x7D, 0x22, 0x2C, 0x0A, rng.randrange(256)])])
        else:  # duplicated chunk
            q = min(len(b), p + rng.randint(1, 64))
            b[p:p] = b[p:q]
    return bytes(b)


def _limit(mem_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))


def run_one(job: tuple[str, str, str]) -> tuple[str, str, int]:
    """In a child: (outcome, detail, max RSS KiB). outcome: error / valid / traceback / memory."""
    kind, folder, target = job
    sys.setrecursionlimit(5000)
    try:
        if kind in ("cfg", "dat"):
            from nvdla_hil.harness.targets.model import ModelTarget
            from nvdla_hil.harness.traces import TraceError, parse_trace, run_trace

            try:
                tr = parse_trace(folder)
                with ModelTarget("nv_small") as t:
                    res = run_trace(tr, t, timeout=2.0)
                out = ("valid", res.status)
            except TraceError as e:
                named = Path(target).name in str(e) or Path(folder).name in str(e)
                out = ("error", str(e)[:200]) if named else ("traceback", f"unnamed: {e}"[:300])
        else:
            from nvdla_hil.harness.vectors import VectorError, load_case

            try:
                load_case(folder)
                out = ("valid", "loaded")
            except VectorError as e:
                out = ("error", str(e)[:200]) if "case.yaml" in str(e) else ("traceback", f"unnamed: {e}"[:300])
    except MemoryError:
        out = ("memory", "MemoryError")
    except BaseException as e:  # noqa: BLE001 - the campaign counts everything else
        out = ("traceback", "".join(traceback.format_exception(e))[-600:])
    return out[0], out[1], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(job, mem, conn):  # noqa: ANN001
    _limit(mem)
    try:
        conn.send(run_one(job))
    except BaseException as e:  # noqa: BLE001
        conn.send(("memory" if isinstance(e, MemoryError) else "traceback", repr(e)[:300], 0))
    conn.close()


def run_all(jobs: list[tuple[str, str, str]], workers: int, mem: int, timeout: float) -> list[tuple[str, str, int]]:
    """Run each job in its own forked child (the parent is single-threaded, so forking is safe),
    at most ``workers`` at a time; a child past ``timeout`` is killed and counted."""
    from multiprocessing.connection import wait

    ctx = mp.get_context("fork")
    results: list[tuple[str, str, int] | None] = [None] * len(jobs)
    running: dict[int, tuple[mp.Process, object, float]] = {}
    nxt = 0
    while nxt < len(jobs) or running:
        while nxt < len(jobs) and len(running) < workers:
            r, w = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(jobs[nxt], mem, w))
            p.start()
            w.close()
            running[nxt] = (p, r, time.monotonic())
            nxt += 1
        wait([r for _, r, _ in running.values()] + [p.sentinel for p, _, _ in running.values()], timeout=0.05)
        now = time.monotonic()
        for i, (p, r, t0) in list(running.items()):
            if r.poll():
                try:
                    results[i] = r.recv()
                except EOFError:
                    results[i] = ("memory", f"child died (exit {p.exitcode})", 0)
            elif not p.is_alive():
                results[i] = ("memory", f"child died (exit {p.exitcode})", 0)
            elif now - t0 > timeout:
                p.kill()
                results[i] = ("timeout", f"> {timeout} s", 0)
            else:
                continue
            p.join()
            r.close()
            del running[i]
    return [r for r in results if r is not None]


def make_inputs(kind: str, n: int, rng: random.Random, work: Path) -> list[tuple[str, str, str]]:
    from nvdla_hil.harness.vectors import bundled_root, find_cases

    jobs = []
    if kind in ("cfg", "dat"):
        srcs = [TRACES / "nv_small" / s for s in SOURCES if (TRACES / "nv_small" / s).is_dir()]
    else:
        srcs = find_cases(bundled_root())
    for i in range(n):
        src = rng.choice(srcs)
        d = work / kind / f"{i:05d}" / src.name
        shutil.copytree(src, d)
        if kind == "cfg":
            f = next(d.glob("*.cfg"))
        elif kind == "dat":
            f = rng.choice(sorted(d.glob("*.dat")))
        elif kind == "yaml":
            f = d / "case.yaml"
        else:
            f = rng.choice(sorted(p for p in d.iterdir() if p.name != "case.yaml"))
        f.write_bytes(mutate(f.read_bytes(), rng))
        jobs.append((kind, str(d), str(f)))
    return jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-class", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--mem-gib", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--show", type=int, default=3, help="examples of tracebacks/timeouts to print per class")
    ap.add_argument("--keep", help="copy every mutant that is not a clean error or valid result here")
    args = ap.parse_args(argv)
    # the children import nothing new: load the heavy modules once in the parent
    import nvdla_hil.harness.targets.model  # noqa: F401
    import nvdla_hil.harness.traces  # noqa: F401
    import nvdla_hil.harness.vectors  # noqa: F401

    mem = int(args.mem_gib * (1 << 30))
    rng = random.Random(args.seed)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="nvdla-mut-") as tmp:
        print(f"{'class':6} {'inputs':>6} {'errors':>6} {'valid':>6} {'tracebk':>7} {'timeout':>7} {'overmem':>7} "
              f"{'maxRSS MiB':>10} {'s':>6}")
        for kind in args.classes.split(","):
            jobs = make_inputs(kind, args.per_class, rng, Path(tmp))
            t0 = time.monotonic()
            results = run_all(jobs, args.workers, mem, args.timeout)
            c = Counter(r[0] for r in results)
            rss = max(r[2] for r in results) / 1024
            print(f"{kind:6} {len(jobs):6} {c['error']:6} {c['valid']:6} {c['traceback']:7} {c['timeout']:7} "
                  f"{c['memory']:7} {rss:10.0f} {time.monotonic() - t0:6.0f}", flush=True)
            statuses = Counter(r[1] for r in results if r[0] == "valid")
            print(f"       accepted-valid by status: {dict(statuses)}")
            shown = 0
            for job, r in zip(jobs, results, strict=True):
                if r[0] in ("traceback", "timeout", "memory"):
                    if args.keep:
                        dst = Path(args.keep) / kind / Path(job[1]).parent.name
                        shutil.copytree(job[1], dst / Path(job[1]).name, dirs_exist_ok=True)
                    if shown < args.show:
                        shown += 1
                        print(f"   {r[0]}: {job[2]}\n      {r[1]}".replace("\n", "\n      "))
            bad += c["traceback"] + c["timeout"] + c["memory"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
