"""Whole networks as speed work: NVDLA's MNIST through NVDLA's firmware, NVDLA's longest public
convolution traces, and what a ResNet-50 would cost on each target, from figures measured in
this run.

1. **MNIST** (``flatbufs/kmd/NN/NN_L0_0_fbuf`` of NVDLA's software regression, nv_full) runs
   with :func:`~nvdla_hil.harness.loadables.runtime.run_loadable` and the firmware of the
   user's nvdla/sw checkout on the model target and on NVDLA's C model (``$NVDLA_HW_V1``).
   Per hardware operation the firmware launches: the wall time from the previous operation's
   completion (the task's ``dla_execute_task`` for the first) to this one's, as the firmware
   reports them (``Completed <op> operation index N``, timestamped by a :class:`Firmware`
   subclass that wraps its log callback: nothing in ``harness/loadables`` changes). Engines
   the firmware runs together (a convolution and its fused SDP) share that time: the one that
   completes second shows only the remainder. Both outputs are checked against NVDLA's MD5
   (``golden/NN_L0_0_*/dla/lead.md5``). The C model's process start is timed apart.
2. **Traces**: NVDLA's three longest nv_small convolution traces, and the smallest one as the
   probe of a layer's fixed cost (``dc_1x1x8_1x1x8x1``: 8 MACs), on the model target and the
   Verilator RTL (the cached nv_small build; nothing is built unless ``--build-rtl``). Per
   trace: wall time of :func:`~nvdla_hil.harness.traces.run_trace` (memory set-up,
   programming, the layer, the CRC checks; the simulator's start and reset excluded, printed
   apart), simulated cycles on the RTL, and the multiply-accumulates of each convolution,
   counted from the trace's CSC registers as ``W' x H' x K x R x S x C`` (``D_DATAOUT_SIZE_0/1``:
   output width, height, kernels; ``D_WEIGHT_SIZE_EXT_0/1``: kernel width, height, channels):
   every output element of every kernel costs ``R x S x C`` MACs, padded positions included
   (the hardware multiplies the pad value), the hardware's own channel/kernel atom padding not.
3. **ResNet-50** (the standard 224x224 network, :data:`RESNET50_STAGES`): per target, the
   estimate is the sum over its hardware layers of ``fixed + MACs / rate``, with ``fixed`` and
   ``rate`` measured above (printed with their sources). For the RTL the rate is nv_small's
   MAC array (``mac_atomic_c x mac_atomic_k`` of the profile) x the measured MAC/cycle
   efficiency of the largest trace x the measured cycles/s of the long traces.

    NVDLA_SW=~/nvdla-sw NVDLA_HW=~/nvdla-hw NVDLA_HW_V1=~/nvdla-hw-v1 \\
        NVDLA_TRACES=.../trace_tests/nv_small NVDLA_LOADABLES=.../nvdla_sw \\
        .venv/bin/python bench/bench_network.py [--skip-cmod] [--skip-rtl] [--repeat 3]

The model's runs are repeated ``--repeat`` times and the fastest counts (a loaded machine takes
a process off the CPU for tens of ms at random); the C model and the RTL run once.
Exit status: 0 when everything that ran passed (MD5s equal NVDLA's, traces' CRCs pass), 1
otherwise, 2 bad arguments or a missing checkout (the option that skips it is named).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchenv.py beside this script
import benchenv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
LONG_TRACES = ("dc_35x22x54_6x8x54x29_int8_0", "dc_32x26x76_6x3x76x16_int8_0", "dc_8192x1x1_2x3x1x41_int8_0")
PROBE_TRACE = "dc_1x1x8_1x1x8x1_int8_0"
MNIST = "NN_L0_0"
COMPLETED = re.compile(r"Completed (\w+) operation index (\d+) ROI (\d+)")

# ---- ResNet-50's layers ------------------------------------------------------------------------
# Source: He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition" (CVPR 2016), Table 1,
# 50-layer column, with the stride of each down-sampling bottleneck on its 3x3 convolution as
# torchvision's resnet50 has it ("ResNet v1.5", torchvision/models/resnet.py; torchvision lists
# 4.09 GFLOPS, counted as multiply-accumulates). 224x224x3 input; conv1 7x7/2 pad 3 (64), max pool
# 3x3/2, then per stage (blocks, bottleneck width, output channels, stride of its first block):
RESNET50_INPUT = (224, 224, 3)
RESNET50_STEM = (7, 2, 3, 64)  # kernel, stride, pad, kernels
RESNET50_STAGES = ((3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2))
RESNET50_CLASSES = 1000  # fc 2048 -> 1000 after a global 7x7 average pool


@dataclass(frozen=True)
class NetLayer:
    """One hardware layer: a convolution (bias, batch norm, ReLU and the residual add fused in
    its SDP, as NVDLA's compiler fuses them) or a pooling layer (PDP, no MACs)."""

    name: str
    in_whc: tuple[int, int, int]
    kernel: int = 1
    stride: int = 1
    pad: int = 0
    kernels: int = 0  # 0: pooling

    @property
    def out_wh(self) -> tuple[int, int]:
        w, h, _ = self.in_whc
        return ((w + 2 * self.pad - self.kernel) // self.stride + 1, (h + 2 * self.pad - self.kernel) // self.stride + 1)

    @property
    def macs(self) -> int:
        ow, oh = self.out_wh
        return ow * oh * self.kernels * self.kernel * self.kernel * self.in_whc[2]


def resnet50_layers() -> list[NetLayer]:
    """The hardware layers of ResNet-50 from :data:`RESNET50_STAGES`: 53 convolutions, the fc
    (a 1x1 convolution on the pooled 1x1x2048 cube), max and average pooling."""
    w, h, c = RESNET50_INPUT
    k, s, p, n = RESNET50_STEM
    conv1 = NetLayer("conv1", (w, h, c), k, s, p, n)
    layers = [conv1]
    w, h = conv1.out_wh
    pool = NetLayer("maxpool", (w, h, n), 3, 2, 1)
    layers.append(pool)
    (w, h), c = pool.out_wh, n
    for si, (blocks, width, out_c, stride) in enumerate(RESNET50_STAGES, start=2):
        for b in range(blocks):
            st = stride if b == 0 else 1
            tag = f"conv{si}_{b + 1}"
            a = NetLayer(f"{tag}a", (w, h, c), 1, 1, 0, width)
            mid = NetLayer(f"{tag}b", (w, h, width), 3, st, 1, width)
            ow, oh = mid.out_wh
            layers += [a, mid, NetLayer(f"{tag}c", (ow, oh, width), 1, 1, 0, out_c)]
            if b == 0:
                layers.append(NetLayer(f"{tag}proj", (w, h, c), 1, st, 0, out_c))
            w, h, c = ow, oh, out_c
    layers.append(NetLayer("avgpool", (w, h, c), w, 1, 0))
    layers.append(NetLayer("fc", (1, 1, c), 1, 1, 0, RESNET50_CLASSES))
    return layers


# ---- the machine ---------------------------------------------------------------------------------
def machine(when: str) -> str:
    up = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"# machine {when}: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; nproc "
            f"{len(os.sched_getaffinity(0))} (of {os.cpu_count()}); load average {load}; uptime: {up}")


# ---- 1. MNIST through NVDLA's firmware -----------------------------------------------------------
@dataclass
class OpTime:
    task: int
    index: int
    name: str
    detail: str
    macs: int
    seconds: float
    fused: bool = False  # its input comes on the fly from another engine (a conv's SDP)


@dataclass
class NetRun:
    target: str
    seconds: float = 0.0  # run_loadable, all tasks (memory load, EMU tasks, dump included)
    ops: list[OpTime] = field(default_factory=list)
    md5: str = ""
    expected: str = ""
    startup: float = 0.0
    runs: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.md5) and self.md5 == self.expected


def op_macs(op) -> int:  # noqa: ANN001 - a loadables OpDesc
    """MACs of a CONV operation from its descriptors: output W x H x K x the weight cube's
    R x S x C (0 for other operations)."""
    wt = dict(op.extra).get("weight")
    if op.name != "CONV" or wt is None or op.dst is None:
        return 0
    return op.dst.width * op.dst.height * op.dst.channel * wt.width * wt.height * wt.channel


def _timed_firmware(build, marks: list[tuple[float, str, int]]):  # noqa: ANN001, ANN202
    """NVDLA's firmware whose log callback also timestamps each task's start (``execute``) and
    each operation's completion (its ``Completed ... operation index N`` message)."""
    from nvdla_hil.harness.loadables.firmware import Firmware

    class TimedFirmware(Firmware):
        def bind(self, reg_read, reg_write, data_read, data_write, dma_address, log) -> None:  # noqa: ANN001
            def timed(level: int, msg: str) -> None:
                m = COMPLETED.search(msg)
                if m:
                    marks.append((time.perf_counter(), "done", int(m.group(2))))
                log(level, msg)

            super().bind(reg_read, reg_write, data_read, data_write, dma_address, timed)

        def execute(self, *a: object) -> int:
            marks.append((time.perf_counter(), "start", -1))
            return super().execute(*a)

    return TimedFirmware(build)


def _op_times(marks: list[tuple[float, str, int]], dla_tasks: list[int], ops: dict) -> list[OpTime]:
    out: list[OpTime] = []
    prev, k = 0.0, -1
    for t, kind, index in marks:
        if kind == "start":
            prev, k = t, k + 1
            continue
        tid = dla_tasks[k] if 0 <= k < len(dla_tasks) else k
        desc = ops.get(tid, [])
        op = desc[index] if 0 <= index < len(desc) else None
        detail = f"{op.precision}" + (f" {op.dst.width}x{op.dst.height}x{op.dst.channel}" if op and op.dst else "")
        fused = bool(op and op.src is not None and op.src.type == 2)
        out.append(OpTime(tid, index, op.name if op else "?", detail if op else "", op_macs(op) if op else 0, t - prev,
                          fused))
        prev = t
    return out


def run_mnist(target: str, args: argparse.Namespace, repeat: int) -> NetRun:
    """MNIST on ``target`` (model or cmod) ``repeat`` times; the fastest run's figures."""
    from nvdla_hil.drivers.profiles import load_profile
    from nvdla_hil.harness.loadables.check import find_loadables, read_loadable
    from nvdla_hil.harness.loadables.dimg import md5
    from nvdla_hil.harness.loadables.fbs import IFACE_DLA1
    from nvdla_hil.harness.loadables.firmware import build_firmware
    from nvdla_hil.harness.loadables.runtime import check_profile, run_loadable

    res = NetRun(target)
    found = {n: (f, g) for n, f, g in find_loadables(args.loadables)}
    if MNIST not in found or found[MNIST][1] is None:
        res.error = f"{MNIST} or its golden is not in {args.loadables}"
        return res
    path, golden = found[MNIST]
    res.expected = (golden.parent / "lead.md5").read_text().split()[0]
    ld = read_loadable(path)
    prof = load_profile("nv_full")
    check_profile(ld, prof, MNIST)
    dla_tasks = [tid for s in ld.submits for tid in s.task_ids if ld.tasks[tid].interface == IFACE_DLA1]
    fwb = build_firmware(args.nvdla_sw, prof.generation)
    best = float("inf")
    for _ in range(repeat):
        marks: list[tuple[float, str, int]] = []
        fw = _timed_firmware(fwb, marks)
        try:
            with fw, _open(target, args, res) as t:
                r = run_loadable(ld, prof, t, fw)
        except Exception as e:  # noqa: BLE001 - reported in the table, exit 1
            res.error = f"{type(e).__name__}: {e}"[:300]
            return res
        res.runs += 1
        digest = md5(r.dump)
        if r.seconds < best or digest != res.expected:  # the fastest run, or the first wrong one
            best = r.seconds
            res.seconds, res.md5, res.ops = r.seconds, digest, _op_times(marks, dla_tasks, r.ops)
        if digest != res.expected:
            break
    return res


class _Opened:
    """Open a target, timing its start-up apart (added to ``res.startup``)."""

    def __init__(self, make: Callable[[], Any], res: NetRun | None) -> None:
        self.t = make()
        self.res = res

    def __enter__(self):  # noqa: ANN204
        t0 = time.perf_counter()
        self.t.open()
        if self.res is not None:
            self.res.startup += time.perf_counter() - t0
        return self.t

    def __exit__(self, *exc: object) -> None:
        self.t.close()


def _open(target: str, args: argparse.Namespace, res: NetRun | None) -> _Opened:
    if target == "model":
        from nvdla_hil.harness.targets.model import ModelTarget

        return _Opened(lambda: ModelTarget("nv_full"), res)
    from nvdla_hil.harness.targets.cmod import CmodTarget

    return _Opened(lambda: CmodTarget(nvdla_hw=args.nvdla_hw_v1, config="nv_full"), res)


# ---- 2. traces -----------------------------------------------------------------------------------
@dataclass
class TraceRun:
    name: str
    target: str
    status: str = "not run"
    seconds: float = 0.0
    cycles: int = 0
    startup: float = 0.0
    macs: int = 0
    layers: int = 0
    message: str = ""


def trace_convs(tr) -> list[tuple[int, int, int, int, int, int]]:  # noqa: ANN001 - a parsed Trace
    """(W', H', K, R, S, C) of each convolution the trace launches (each ``CACC.D_OP_ENABLE``
    write of 1), from the last values written to the CSC's output and weight size registers."""
    from nvdla_hil.drivers.profiles import load_profile

    rm = load_profile("nv_small").regmap  # the traces are nv_small's (LONG_TRACES)
    vals: dict[str, int] = {}
    out = []
    for c in tr.of_kind("reg_write"):
        reg = rm.register(c.args[0])
        vals[f"{reg.block}.{reg.name}"] = int(c.args[1])
        if (reg.block, reg.name) == ("CACC", "D_OP_ENABLE") and int(c.args[1]) & 1:
            def f(r: str, fld: str) -> int:
                return rm.register("CSC", r).field(fld).extract(vals.get(f"CSC.{r}", 0)) + 1

            out.append((f("D_DATAOUT_SIZE_0", "DATAOUT_WIDTH"), f("D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT"),
                        f("D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL"), f("D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT"),
                        f("D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT"), f("D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT")))
    return out


def run_trace_on(target: str, path: Path, build, args: argparse.Namespace, repeat: int) -> TraceRun:  # noqa: ANN001
    """One trace on the model (fastest of ``repeat``, a fresh target each) or the RTL (once)."""
    from nvdla_hil.drivers.driver import NvdlaDriver
    from nvdla_hil.harness.traces import parse_trace, run_trace

    res = TraceRun(path.name, target)
    parsed = parse_trace(path)
    convs = trace_convs(parsed)
    res.macs, res.layers = sum(w * h * k * r * s * c for w, h, k, r, s, c in convs), len(convs)
    best = float("inf")
    for _ in range(repeat):
        if target == "model":
            from nvdla_hil.harness.targets.model import ModelTarget

            t = ModelTarget("nv_small")
        else:
            from nvdla_hil.harness.targets.verilator import VerilatorTarget

            t = VerilatorTarget(build)
        try:
            s0 = time.perf_counter()
            with t:
                res.startup = time.perf_counter() - s0
                drv = NvdlaDriver(t)  # loading the register map is not the layer's time
                c0 = getattr(t, "cycles", 0)
                w0 = time.perf_counter()
                r = run_trace(parsed, t, driver=drv, timeout=args.timeout)
                wall = time.perf_counter() - w0
                cycles = getattr(t, "cycles", 0) - c0
        except Exception as e:  # noqa: BLE001 - reported in the table, exit 1
            res.status, res.message = "error", f"{type(e).__name__}: {e}"[:300]
            return res
        if r.status != "passed":
            res.status, res.message, res.seconds, res.cycles = r.status, r.message, wall, cycles
            return res
        if wall < best:
            best = wall
            res.status, res.seconds, res.cycles = r.status, wall, cycles
    return res


# ---- 3. the estimate -------------------------------------------------------------------------------
@dataclass(frozen=True)
class CostModel:
    """time of a layer = fixed + MACs / rate (seconds, MAC/s), and where each figure comes from.
    ``rate`` is the largest measured layer's (ResNet's layers are large and use the MAC array
    well); ``rate_all`` that of every measured convolution together (small-channel layers that
    leave most of the array idle included): the estimate's optimistic and pessimistic ends."""

    target: str
    fixed: float
    rate: float
    rate_all: float
    fixed_from: str
    rate_from: str

    def seconds(self, layers: list[NetLayer], rate: float) -> float:
        return sum(self.fixed + x.macs / rate for x in layers)


def _busy(seconds: float, fixed: float) -> float:
    """A layer's time with its fixed cost taken off (the whole time when not twice the fixed)."""
    return seconds - fixed if seconds > 2 * fixed else seconds


def mnist_cost(run: NetRun) -> CostModel | None:
    """From MNIST's operations: fixed = the median time of its SDP and PDP operations that read
    their input from memory (no MACs: the firmware's per-operation cost; a conv's fused SDP shows
    only a remainder, see the module docstring); rate = its largest CONV operation, rate_all =
    all its CONV operations."""
    if not run.ok:
        return None
    small = [o.seconds for o in run.ops if o.name in ("SDP", "PDP") and not o.fused]
    convs = [o for o in run.ops if o.macs]
    if not small or not convs:
        return None
    fixed = statistics.median(small)
    big = max(convs, key=lambda o: o.macs)
    rate_all = sum(o.macs for o in convs) / sum(_busy(o.seconds, fixed) for o in convs)
    return CostModel(f"{run.target} (MNIST, FP16, nv_full)", fixed, big.macs / _busy(big.seconds, fixed), rate_all,
                     f"median of MNIST's {len(small)} SDP/PDP ops from memory",
                     f"MNIST op {big.index} CONV {big.macs:,} MACs in {big.seconds * 1e3:.1f} ms; all: "
                     f"{len(convs)} CONV ops")


def trace_cost(target: str, runs: dict[str, TraceRun], array: int, cyc_rate: float | None) -> CostModel | None:
    """From the traces: fixed = the probe trace's wall time (8 MACs); rate = the largest trace,
    rate_all = the long traces together, the probe's cost taken off. On the RTL the rate is
    ``array x efficiency x cycles/s``: the efficiency (MACs per cycle / array, the probe's cycles
    taken off) of the largest trace (all: of the long traces together), cycles/s of the long
    traces."""
    probe = runs.get(PROBE_TRACE)
    longs = [r for n, r in runs.items() if n in LONG_TRACES and r.status == "passed"]
    if probe is None or probe.status != "passed" or not longs:
        return None
    big = max(longs, key=lambda r: r.macs)
    fixed, macs = probe.seconds, sum(r.macs for r in longs)
    label = f"{target} (traces, INT8, nv_small)"
    if cyc_rate is None:
        return CostModel(label, fixed, big.macs / _busy(big.seconds, fixed),
                         macs / sum(_busy(r.seconds, fixed) for r in longs), f"{PROBE_TRACE} wall",
                         f"{big.name}: {big.macs:,} MACs in {big.seconds:.3f} s; all: {len(longs)} long traces")
    eff = big.macs / max(big.cycles - probe.cycles, 1) / array
    eff_all = macs / max(sum(r.cycles - probe.cycles for r in longs), 1) / array
    return CostModel(label, fixed, array * eff * cyc_rate, array * eff_all * cyc_rate,
                     f"{PROBE_TRACE} wall ({probe.cycles:,} cycles)",
                     f"{array} MACs/cycle array x efficiency {eff:.1%} ({big.name}; all: {eff_all:.1%}) x "
                     f"{cyc_rate:,.0f} cycles/s")


# ---- report ------------------------------------------------------------------------------------
def print_mnist(runs: list[NetRun]) -> None:
    print("\n## 1. MNIST (NN_L0_0, nv_full) through NVDLA's firmware: measured; per op = wall time from the previous "
          "op's completion (task start for the first) to its own")
    ok_runs = [r for r in runs if r.ops]
    if ok_runs:
        base = ok_runs[0].ops
        head = f"{'task.op':>7} {'op':<5} {'out (prec WxHxC)':<18} {'MACs':>10}"
        for r in ok_runs:
            head += f" {r.target + ' ms':>12}"
        two = len(ok_runs) == 2 and all(len(r.ops) == len(base) for r in ok_runs)
        print(head + (f" {ok_runs[1].target + '/' + ok_runs[0].target:>11}" if two else ""))
        for i, o in enumerate(base):
            line = f"{o.task:>4}.{o.index:<2} {o.name + ('*' if o.fused else ''):<5} {o.detail:<18} {o.macs:>10,}"
            for r in ok_runs:
                line += f" {r.ops[i].seconds * 1e3:12.2f}" if i < len(r.ops) else f" {'-':>12}"
            if two and o.seconds > 0:
                line += f" {ok_runs[1].ops[i].seconds / o.seconds:10.1f}x"
            print(line)
        line = f"{'':>7} {'sum of DLA ops':<35}"
        for r in ok_runs:
            line += f" {sum(o.seconds for o in r.ops) * 1e3:12.1f}"
        print(line)
        print("        (* fused: input on the fly from the conv before it, which its time includes)")
    for r in runs:
        verdict = "MD5 equal to NVDLA's" if r.ok else f"FAILED: md5 {r.md5 or '-'} vs NVDLA's {r.expected or '-'}"
        print(f"{r.target:>6}: total {r.seconds:.3f} s (run_loadable: memory, 3 tasks incl. 2 EMU, dump; best of "
              f"{r.runs}); start-up {r.startup / max(r.runs, 1):.2f} s apart; {verdict}" + (f"; {r.error}" if r.error else ""))
    if len(ok_runs) == 2 and ok_runs[0].seconds:
        a, b = ok_runs
        print(f"  ratio {b.target}/{a.target}: total {b.seconds / a.seconds:.1f}x, sum of DLA ops "
              f"{sum(o.seconds for o in b.ops) / max(sum(o.seconds for o in a.ops), 1e-9):.1f}x")


def print_traces(runs: list[TraceRun], array: int) -> None:
    print("\n## 2. NVDLA's nv_small traces: measured; wall = run_trace (set-up, programming, layer, checks), "
          "start-up apart; MACs = W'xH'xK x RxSxC from the CSC registers")
    print(f"{'trace':<32} {'target':<6} {'result':<7} {'MACs':>11} {'wall s':>8} {'MMAC/s':>8} {'cycles':>9} "
          f"{'cyc/s':>7} {'MAC/cyc':>7} {'eff':>6} {'start s':>7}")
    for r in runs:
        rate = r.macs / r.seconds / 1e6 if r.seconds else 0.0
        cyc = (f"{r.cycles:>9,} {r.cycles / r.seconds:>7,.0f} {r.macs / r.cycles:>7.2f} {r.macs / r.cycles / array:>6.1%}"
               if r.cycles and r.seconds else f"{'-':>9} {'-':>7} {'-':>7} {'-':>6}")
        print(f"{r.name:<32} {r.target:<6} {r.status:<7} {r.macs:>11,} {r.seconds:>8.3f} {rate:>8.2f} {cyc} "
              f"{r.startup:>7.2f}" + (f"  {r.message[:200]}" if r.status != "passed" else ""))


def print_estimate(models: list[CostModel], layers: list[NetLayer], checks: list[str]) -> None:
    total = sum(x.macs for x in layers)
    convs = sum(1 for x in layers if x.kernels)
    print(f"\n## 3. ResNet-50, 224x224: ESTIMATED from the measured figures above ({len(layers)} hardware layers: "
          f"{convs} convolutions incl. fc, 2 poolings; {total:,} MACs = {total / 1e9:.2f} GMAC)")
    print("   estimate = sum over layers of (fixed + MACs / rate); residual adds, batch norm and ReLU fused in the "
          "convolutions' SDP; softmax on the CPU, not counted")
    print("   rate: of the largest measured layer (first estimate); all: of every measured convolution together "
          "(second estimate, with small-channel layers that leave most of the MAC array idle)")
    print(f"{'target (source of figures)':<34} {'fixed/layer':>11} {'rate MMAC/s':>11} {'all':>7} "
          f"{'estimate':>9} {'(all)':>9}   fixed from; rate from")
    for m in models:
        est = [m.seconds(layers, r) for r in (m.rate, m.rate_all)]
        human = [f"{s:.1f} s" if s < 600 else f"{s / 3600:.2f} h" for s in est]
        print(f"{m.target:<34} {m.fixed * 1e3:8.2f} ms {m.rate / 1e6:11.2f} {m.rate_all / 1e6:7.2f} {human[0]:>9} "
              f"{human[1]:>9}   {m.fixed_from}; {m.rate_from}")
    for c in checks:
        print(c)


# ---- main --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvdla-sw", default=benchenv.default("NVDLA_SW"), help="nvdla/sw checkout ($NVDLA_SW): its firmware")
    ap.add_argument("--nvdla-hw", default=benchenv.default("NVDLA_HW"), help="nvdla/hw master checkout ($NVDLA_HW): nv_small RTL")
    ap.add_argument("--nvdla-hw-v1", default=benchenv.default("NVDLA_HW_V1"), help="nvdla/hw nvdlav1 ($NVDLA_HW_V1): the C model")
    ap.add_argument("--loadables", default=env("NVDLA_LOADABLES") or str(SHARED / "nvdla_sw"),
                    help="NVDLA's software regression: flatbufs/ and golden/ ($NVDLA_LOADABLES)")
    ap.add_argument("--traces", default=env("NVDLA_TRACES") or str(SHARED / "nvdla" / "trace_tests" / "nv_small"),
                    help="nv_small trace folders ($NVDLA_TRACES)")
    ap.add_argument("--skip-cmod", action="store_true", help="do not run MNIST on NVDLA's C model")
    ap.add_argument("--skip-rtl", action="store_true", help="do not run the traces on the Verilator RTL")
    ap.add_argument("--build-rtl", action="store_true", help="build the nv_small simulator when it is not cached")
    ap.add_argument("--repeat", type=int, default=5, help="runs on the model, the fastest counts (default 5)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per-layer wall timeout on the RTL (s)")
    return ap


def _check_args(args: argparse.Namespace) -> str:
    """A message naming what is missing (and the option that skips it), or ''."""
    if args.repeat < 1 or args.timeout <= 0:
        return "--repeat must be >= 1 and --timeout > 0"
    if not args.nvdla_sw or not (Path(args.nvdla_sw) / "kmd" / "firmware" / "scheduler.c").is_file():
        return "no nvdla/sw checkout: --nvdla-sw PATH or NVDLA_SW (its firmware runs MNIST)"
    if not (Path(args.loadables) / "flatbufs").is_dir():
        return f"{args.loadables}: no flatbufs/ (NVDLA's software regression): --loadables or NVDLA_LOADABLES"
    if not all((Path(args.traces) / n).is_dir() for n in (*LONG_TRACES, PROBE_TRACE)):
        return f"{args.traces}: lacks one of {', '.join((*LONG_TRACES, PROBE_TRACE))}: --traces or NVDLA_TRACES"
    if not args.skip_cmod and not (args.nvdla_hw_v1 and Path(args.nvdla_hw_v1, "cmod").is_dir()):
        return "no nvdla/hw nvdlav1 checkout for the C model: --nvdla-hw-v1 or NVDLA_HW_V1, or --skip-cmod"
    if not args.skip_rtl and not (args.nvdla_hw and Path(args.nvdla_hw, "outdir", "nv_small", "vmod").is_dir()):
        return "no nvdla/hw checkout with outdir/nv_small/vmod for the RTL: --nvdla-hw or NVDLA_HW, or --skip-rtl"
    return ""


def _rtl_build(args: argparse.Namespace, skipped: list[str]):  # noqa: ANN202
    from nvdla_hil.sims.build import build_nvdla, cached_nvdla

    build = cached_nvdla(args.nvdla_hw, "nv_small")
    if build is None and args.build_rtl:
        build = build_nvdla(args.nvdla_hw, "nv_small")
    if build is None:
        skipped.append("RTL: no cached nv_small simulator for this checkout and tree (`nvdla-hil sim build "
                       "--config nv_small`, or --build-rtl)")
    return build


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = _check_args(args)
    if problem:
        print(f"bench_network: {problem}", file=sys.stderr)
        return 2
    from nvdla_hil.drivers.profiles import load_profile

    small = load_profile("nv_small")
    array = small.mac_atomic_c * small.mac_atomic_k
    skipped = [s for s, on in (("C model (--skip-cmod)", args.skip_cmod), ("RTL (--skip-rtl)", args.skip_rtl)) if on]
    print(machine("before"))
    print(f"# loadables {args.loadables}; traces {args.traces}; firmware {args.nvdla_sw}; model runs: best of "
          f"{args.repeat}; C model and RTL: one run; model target with its default (rtl) semantics", flush=True)
    t0 = time.perf_counter()
    mnist = [run_mnist("model", args, args.repeat)]
    print(f"# MNIST on the model done ({time.perf_counter() - t0:.0f} s)", flush=True)
    if not args.skip_cmod:
        mnist.append(run_mnist("cmod", args, 1))
        print(f"# MNIST on the C model done ({time.perf_counter() - t0:.0f} s)", flush=True)
    names = (*LONG_TRACES, PROBE_TRACE)
    traces = {n: run_trace_on("model", Path(args.traces) / n, None, args, args.repeat) for n in names}
    print(f"# traces on the model done ({time.perf_counter() - t0:.0f} s)", flush=True)
    rtl: dict[str, TraceRun] = {}
    build = None if args.skip_rtl else _rtl_build(args, skipped)
    if build is not None:
        for n in names:  # one simulator at a time; nothing else of this run is running
            rtl[n] = run_trace_on("rtl", Path(args.traces) / n, build, args, 1)
            print(f"# {n} on the RTL: {rtl[n].status} ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(machine("after"))
    print_mnist(mnist)
    print_traces([*traces.values(), *rtl.values()], array)
    longs = [r for n, r in rtl.items() if n in LONG_TRACES and r.status == "passed" and r.seconds]
    cyc_rate = sum(r.cycles for r in longs) / sum(r.seconds for r in longs) if longs else None
    if cyc_rate:
        print(f"RTL: {sum(r.cycles for r in longs):,} cycles in {sum(r.seconds for r in longs):.2f} s over the long "
              f"traces = {cyc_rate:,.0f} cycles/s; nv_small's MAC array {small.mac_atomic_c}x{small.mac_atomic_k} = "
              f"{array} MACs/cycle (profile mac_atomic_c x mac_atomic_k)")
    models = [m for m in (*(mnist_cost(r) for r in mnist), trace_cost("model", traces, array, None),
                          trace_cost("rtl", rtl, array, cyc_rate) if cyc_rate else None) if m is not None]
    layers = resnet50_layers()
    checks = _fit_checks(models, traces, rtl) + _rtl_cycles(rtl, array, layers)
    print_estimate(models, layers, checks)
    if skipped:
        print(f"\nskipped: {'; '.join(skipped)}")
    failed = [r.target for r in mnist if not r.ok] + [f"{r.target}:{r.name}" for r in (*traces.values(), *rtl.values())
                                                       if r.status != "passed"]
    print(f"\nresult: {'FAILED: ' + ', '.join(failed) if failed else 'everything that ran passed'}")
    return 1 if failed else 0


def _rtl_cycles(rtl: dict[str, TraceRun], array: int, layers: list[NetLayer]) -> list[str]:
    """ResNet-50 in simulated nv_small cycles: per layer the probe's cycles + MACs / (array x
    the largest trace's efficiency), as :func:`trace_cost` counts them."""
    probe = rtl.get(PROBE_TRACE)
    longs = [r for n, r in rtl.items() if n in LONG_TRACES and r.status == "passed" and r.cycles]
    if probe is None or probe.status != "passed" or not longs:
        return []
    big = max(longs, key=lambda r: r.macs)
    per_cycle = big.macs / max(big.cycles - probe.cycles, 1)
    cycles = sum(probe.cycles + x.macs / per_cycle for x in layers)
    return [f"   rtl: ResNet-50 = {cycles / 1e6:,.1f} M simulated cycles ({per_cycle:.1f} MACs/cycle of {array}, "
            f"+{probe.cycles} cycles per layer, the probe's)"]


def _fit_checks(models: list[CostModel], traces: dict[str, TraceRun], rtl: dict[str, TraceRun]) -> list[str]:
    """The cost model of the traces on a layer it was not fitted on (the middle trace): predicted
    against measured, to show how far the two-figure model can be trusted."""
    out = []
    for m, runs in ((next((x for x in models if x.target.startswith("model (traces")), None), traces),
                    (next((x for x in models if x.target.startswith("rtl")), None), rtl)):
        mid = runs.get(LONG_TRACES[1])
        if m is None or mid is None or mid.status != "passed":
            continue
        pred = m.fixed * mid.layers + mid.macs / m.rate  # the largest trace's rate
        out.append(f"   check, {m.target}: {mid.name} predicted {pred:.3f} s, measured {mid.seconds:.3f} s "
                   f"({pred / mid.seconds:.2f}x)")
    return out


if __name__ == "__main__":
    sys.exit(main())
