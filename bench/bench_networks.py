"""Whole networks of the zoo through NVDLA's own compiler, timed: per network, configuration,
precision and input format the compile time, the model target's wall and CPU time and peak
memory, its agreement with the float forward pass, and its oracle's wall and CPU time on the
same loadable and input, the ratio of the two, and whether the two output dumps are
byte-identical: ``--cmod`` NVDLA's C model for nv_full, ``--rtl`` NVDLA's RTL under Verilator for
nv_small and nv_large (clock gating off, as ``--rtl-clock-gating auto`` runs networks: nvdla/hw#183).
The float pass is a sanity check, never the oracle.

Every step is the CLI a user runs, in a child process timed by ``os.wait4`` (its CPU time is
user + system of the child and the children it waited for: the firmware child, the compiler,
the C model; peak memory is the largest resident set among them):

    nvdla-hil net gen NAME --out DIR/NAME            (once per network and seed)
    nvdla-hil net compile DIR/NAME --config C --precision P [--informat I]
    nvdla-hil net run DIR/NAME/C-P.nvdla --target model --dump ...model.dimg
    nvdla-hil loadable run DIR/NAME/C-P.nvdla --input ....input.raw --target cmod \\
        --nvdla-hw $NVDLA_HW_V1 --profile nv_full --model-semantics cmod --dump ...cmod.dimg
    nvdla-hil loadable run DIR/NAME/C-P.nvdla --input ....input.raw --target verilator \
        --nvdla-hw $NVDLA_HW --profile C --dump ...rtl.dimg            (--rtl; C nv_small or nv_large)

    NVDLA_SW=~/nvdla-sw NVDLA_HW_V1=~/nvdla-hw-v1 NVDLA_HW=~/nvdla-hw \\
        .venv/bin/python bench/bench_networks.py resnet18 --configs nv_full --precisions int8,fp16 [--cmod]
    NVDLA_SW=~/nvdla-sw NVDLA_HW=~/nvdla-hw .venv/bin/python bench/bench_networks.py lenet,resnet18 \
        --configs nv_small --precisions int8 --rtl

``NAME`` may be several (comma-separated), each a zoo name or ``features`` (every feature-table network of the
zoo) or ``all``. ``--profile N`` runs each model run once more under ``cProfile`` with a CPU-time
clock and prints the CPU of the model process and of the firmware child (``RUSAGE_CHILDREN``)
and the model process's top N functions by own CPU time. Results go to stdout as a table and, one JSON object per run, to ``--json``.
A compilation the compiler refuses is a row saying so (the compiler's last line), not an error.
Exit status: 0 when every run that compiled passed (and agreed with the C model where it ran),
1 otherwise, 2 bad arguments or a missing checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py beside this script
import benchenv  # noqa: E402

FEATURES = ("conv_dilation", "deconv", "deconv_s3", "fully_connected", "group_conv", "pooling", "avgpool_ceil", "bn_scale",
            "sigmoid_tanh", "eltwise", "eltwise_max", "lrn", "softmax")
ALL = ("lenet", "lenet_softmax", "resnet_block", *FEATURES, "resnet18", "resnet50")


@dataclass
class Timed:
    rc: int
    wall: float
    cpu: float
    maxrss_mb: float
    out: str


def timed(cmd: list[str], env: dict[str, str], log: Path, timeout: float) -> Timed:
    """Run ``cmd``, its output to ``log``; wall, CPU (user + system, children included), peak RSS."""
    t0 = time.monotonic()
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                f.write(f"\n(killed after {timeout:.0f} s)\n")
                break
            time.sleep(0.2)
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    return Timed(p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, log.read_text(errors="replace"))


@dataclass
class Row:
    network: str
    config: str
    precision: str
    informat: str
    compiled: bool = False
    compile_s: float = 0.0
    compile_note: str = ""
    loadable_bytes: int = 0
    model: dict[str, float] = field(default_factory=dict)
    model_status: str = ""
    agreement: str = ""
    oracle_kind: str = ""  # cmod or rtl: which oracle ran (the fields below)
    cmod: dict[str, float] = field(default_factory=dict)
    cmod_status: str = ""
    identical: bool | None = None
    profile: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return not self.compiled or (self.model_status == "PASS" and self.identical is not False
                                     and self.cmod_status in ("", "ran"))


def _last(text: str, prefix: str = "") -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip().startswith(prefix)]
    return lines[-1] if lines else ""


def run_one(args: argparse.Namespace, env: dict[str, str], name: str, config: str, precision: str,
            informat: str) -> Row:  # long: the four steps of one run, each timed and logged
    cli = benchenv.cli()
    folder = args.dir / name
    row = Row(name, config, precision, informat)
    if not (folder / "net.json").is_file():
        g = timed([*cli, "net", "gen", name, "--out", str(folder), "--seed", str(args.seed), "--force"], env,
                  args.dir / f"{name}.gen.log", 1800)
        if g.rc:
            row.compile_note = "gen failed: " + _last(g.out)
            return row
    tag = f"{config}-{precision}{'' if informat == 'ncxhwx' else '-' + informat}"
    loadable = folder / f"{tag}.nvdla"
    c = timed([*cli, "net", "compile", str(folder), "--config", config, "--precision", precision,
               "--informat", informat, "-o", str(loadable)], env, folder / f"{tag}.compile.log", 1800)
    row.compile_s = round(c.wall, 2)
    if c.rc:
        errors = [ln.strip() for ln in c.out.splitlines() if "Error" in ln or "error" in ln]
        row.compile_note = errors[0] if errors else _last(c.out)
        return row
    row.compiled = True
    row.loadable_bytes = loadable.stat().st_size
    m = timed([*cli, "net", "run", str(loadable), "--target", "model", "--dump", str(folder / f"{tag}.model.dimg"), "--force"],
              env, folder / f"{tag}.model.log", args.timeout)
    row.model = {"wall": round(m.wall, 2), "cpu": round(m.cpu, 2), "maxrss_mb": round(m.maxrss_mb)}
    row.model_status = _last(m.out, "PASS") or _last(m.out, "FAIL")[:4] or f"exit {m.rc}"
    row.model_status = row.model_status[:4] if row.model_status.startswith(("PASS", "FAIL")) else row.model_status
    row.agreement = _last(m.out, "correlation") or _last(m.out)
    if args.profile:
        row.profile = profile(args, env, loadable)
    oracle = _oracle(args, config)
    if oracle and (folder / f"{tag}.nvdla.input.raw").is_file():
        kind, target = oracle
        cdump = folder / f"{tag}.{kind}.dimg"
        k = timed([*cli, "loadable", "run", str(loadable), "--input", str(folder / f"{tag}.nvdla.input.raw"),
                   *target, "--dump", str(cdump), "--force"], env, folder / f"{tag}.{kind}.log", args.cmod_timeout)
        row.oracle_kind = kind
        row.cmod = {"wall": round(k.wall, 2), "cpu": round(k.cpu, 2), "maxrss_mb": round(k.maxrss_mb)}
        row.cmod_status = "ran" if cdump.is_file() and k.rc in (0, 1) else f"exit {k.rc}: {_last(k.out)[:120]}"
        mdump = folder / f"{tag}.model.dimg"
        if cdump.is_file() and mdump.is_file():
            row.identical = cdump.read_bytes() == mdump.read_bytes()
    return row


def _oracle(args: argparse.Namespace, config: str) -> tuple[str, list[str]] | None:
    """The oracle ``config``'s networks run on, when asked for: (kind, the target options)."""
    if args.cmod and config == "nv_full":
        return "cmod", ["--target", "cmod", "--nvdla-hw", args.nvdla_hw_v1, "--profile", "nv_full",
                        "--model-semantics", "cmod"]
    if args.rtl and config in ("nv_small", "nv_large"):
        return "rtl", ["--target", "verilator", "--nvdla-hw", args.nvdla_hw, "--profile", config]
    return None


PROFILER = """
import cProfile, io, pstats, resource, sys, time
from nvdla_hil.harness.cli import main
pr = cProfile.Profile(time.process_time)
pr.enable()
try:
    main(sys.argv[2:])
except SystemExit:
    pass
pr.disable()
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"PROFILE cpu: model process {me.ru_utime + me.ru_stime:.2f} s, firmware child {kids.ru_utime + kids.ru_stime:.2f} s")
out = io.StringIO()
pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(int(sys.argv[1]))
rows = [ln for ln in out.getvalue().splitlines() if ln.strip()[:1].isdigit()]
for ln in rows:
    print("PROFILE", ln)
"""


def profile(args: argparse.Namespace, env: dict[str, str], loadable: Path) -> list[str]:
    """The model run once more under cProfile (CPU time): the model process's and the firmware
    child's CPU, and the top ``--profile`` functions of the model process by own CPU time."""
    cmd = [sys.executable, "-c", PROFILER, str(args.profile), "net", "run", str(loadable), "--target", "model"]
    t = timed(cmd, env, loadable.with_suffix(".profile.log"), args.timeout)
    return [ln[len("PROFILE "):] for ln in t.out.splitlines() if ln.startswith("PROFILE ")]


def _fmt(r: Row) -> str:
    head = f"{r.network:16} {r.config:8} {r.precision:4} {r.informat:6}"
    if not r.compiled:
        return f"{head} not compiled ({r.compile_s:.1f} s): {r.compile_note[:150]}"
    m = r.model
    s = (f"{head} compile {r.compile_s:6.1f} s {r.loadable_bytes / 1e6:6.2f} MB | model {r.model_status} "
         f"wall {m.get('wall', 0):7.2f} s cpu {m.get('cpu', 0):7.2f} s {m.get('maxrss_mb', 0):5.0f} MB")
    if r.cmod:
        ratio = r.cmod["cpu"] / m["cpu"] if m.get("cpu") else 0.0
        s += (f" | {r.oracle_kind} {r.cmod_status} wall {r.cmod['wall']:8.1f} s cpu {r.cmod['cpu']:8.1f} s (x{ratio:.0f} the "
              f"model's CPU) {'byte-identical' if r.identical else 'DIFFERENT' if r.identical is False else '-'}")
    s += f"\n{'':40}{r.agreement}"
    return s + "".join(f"\n{'':40}{ln}" for ln in r.profile)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("networks", help="comma-separated zoo names, 'features' or 'all'")
    ap.add_argument("--configs", default="nv_full,nv_large,nv_small")
    ap.add_argument("--precisions", default="int8,fp16")
    ap.add_argument("--informats", default="ncxhwx", help="comma-separated: ncxhwx (feature), nhwc (image)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: the bench's private cache folder)")
    ap.add_argument("--cmod", action="store_true", help="also run nv_full loadables on NVDLA's C model")
    ap.add_argument("--rtl", action="store_true",
                    help="also run nv_small and nv_large loadables on NVDLA's RTL under Verilator ($NVDLA_HW)")
    ap.add_argument("--nvdla-hw", default=benchenv.default("NVDLA_HW"))
    ap.add_argument("--nvdla-sw", default=benchenv.default("NVDLA_SW"))
    ap.add_argument("--nvdla-hw-v1", default=benchenv.default("NVDLA_HW_V1"))
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per model run")
    ap.add_argument("--cmod-timeout", type=float, default=1800.0,
                    help="seconds per C model or RTL run (the issue's 30 min)")
    ap.add_argument("--json", type=Path, help="append one JSON object per run here")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="run each model run again under cProfile: CPU of the model process and the firmware "
                         "child, the top N functions")
    args = ap.parse_args(argv)
    sw = benchenv.need(args.nvdla_sw, "NVDLA_SW", "--nvdla-sw")
    if args.cmod:
        args.nvdla_hw_v1 = benchenv.need(args.nvdla_hw_v1, "NVDLA_HW_V1", "--nvdla-hw-v1")
    if args.rtl:
        args.nvdla_hw = benchenv.need(args.nvdla_hw, "NVDLA_HW", "--nvdla-hw")
    args.dir = args.dir or benchenv.private_folder("networks")
    args.dir.mkdir(parents=True, exist_ok=True)
    groups = {"features": list(FEATURES), "all": list(ALL)}
    names = [n for part in args.networks.split(",") for n in groups.get(part, [part])]  # a group inside a list too
    env = dict(os.environ, NVDLA_SW=sw)
    env.setdefault("NVDLA_HW", benchenv.default("NVDLA_HW") or "")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} load {os.getloadavg()[0]:.1f} (2-core machine); work folder "
          f"{args.dir}", flush=True)
    ok = True
    for name in names:
        for config in args.configs.split(","):
            for precision in args.precisions.split(","):
                for informat in args.informats.split(","):
                    if config == "nv_small" and precision == "fp16":
                        continue  # nv_small has no FP16 datapath (the compiler writes one; nothing runs it)
                    row = run_one(args, env, name, config, precision, informat)
                    ok &= row.ok()
                    print(_fmt(row), f"(load {os.getloadavg()[0]:.1f})", flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(asdict(row) | {"load": os.getloadavg()[0],
                                                              "date": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
