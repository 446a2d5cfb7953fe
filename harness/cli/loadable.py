"""``nvdla-hil loadable show FILE`` and ``nvdla-hil loadable run FILE --target ...``: an NVDLA
loadable (a compiled network, harness/loadables) listed, or run through NVDLA's firmware on a
target with its output dump compared with a golden.

Every file an option names is untrusted input: the loadable, ``--golden`` and ``--input`` are
read only when they are regular files (a FIFO, a device or a directory is refused at once, exit
2, naming the option). ``--dump`` never replaces an existing file unless ``--force``, and never,
even then, the run's own loadable, golden or input (same resolved path or same inode). A run
without a golden says "RAN, NO GOLDEN" (exit 0), not PASS."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from ..targets import firmware_spec
from .exits import bad_input
from .options import add_target_options, target_spec

__all__ = ["add_subcommands", "show_text"]


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("loadable", help="show or run an NVDLA loadable (a compiled network) through NVDLA's firmware")
    ls = p.add_subparsers(dest="loadable_cmd", metavar="ACTION", required=True)
    q = ls.add_parser("show", help="memory list, tasks, submit list, operations, LUTs, inputs and outputs")
    q.add_argument("file")
    q.set_defaults(func=_cmd_show)
    q = ls.add_parser("run", help="run every task on a target and compare the output dump with a golden")
    q.add_argument("file")
    add_target_options(q)
    q.add_argument("--nvdla-sw", default=os.environ.get("NVDLA_SW"),
                   help="nvdla/sw checkout whose kmd/firmware is built and run (or NVDLA_SW)")
    q.add_argument("--golden", help="expected DIMG dump (o_000000.dimg); default: found beside the loadable in "
                                    "NVDLA's regression layout (golden/<name>_<hash>/dla/)")
    q.add_argument("--input", help="input tensor: a PGM image or a raw tensor of the input's size")
    q.add_argument("--dump", help="write the output DIMG here (an existing file only with --force; never the run's "
                                  "loadable, golden or input)")
    q.add_argument("--force", action="store_true", help="--dump may replace an existing file")
    q.add_argument("--model-bug", action="append", metavar="SPEC",
                   help="model target: inject a datapath bug (harness/targets/faults.py); the run names the first wrong layer")
    q.set_defaults(func=_cmd_run)


def show_text(path: str) -> str:
    """The listing of a loadable; a :class:`LoadableError` names the file."""
    from ..loadables.check import with_file
    from ..loadables.fbs import LoadableError

    try:
        return _show_text(path)
    except LoadableError as e:
        raise with_file(path, e) from None


def _show_text(path: str) -> str:  # long: one listing, section by section
    from ..loadables.check import profile_for_loadable, read_loadable
    from ..loadables.descriptors import PRECISIONS  # noqa: F401 - the names the listing uses
    from ..loadables.fbs import INTERFACES, IFACE_DLA1, IFACE_EMU1, LoadableError
    from ..loadables.runtime import dla_ops, loadable_config, task_version

    ld = read_loadable(path)
    out = [f"{Path(path).name}: loadable version {'.'.join(map(str, ld.version))}; written for "
           f"{profile_for_loadable(ld)} ({loadable_config(ld)})"]
    out.append(f"memory ({len(ld.memory)}):")
    for m in ld.memory:
        where = "DRAM" if m.domain == 0 else "SRAM"
        cont = ", ".join(f"{c}@{o}" for c, o in zip(m.contents, m.offsets) if c) if m.flags & 2 else ""
        io = f" bind {m.bind_id} tensor {m.tensor_desc_id}" if m.flags & 12 else ""
        out.append(f"  [{m.id}] {where} {m.flag_names():<14} {m.size:>9} B align {m.alignment}{io} {cont}")
    out.append(f"tasks ({len(ld.tasks)}):")
    for i, t in enumerate(ld.tasks):
        out.append(f"  task {t.id}: {INTERFACES.get(t.interface, t.interface)} instance {t.instance}, "
                   f"{len(t.address_list)} addresses, events pre {list(t.pre_actions)} post {list(t.post_actions)}")
        if t.interface == IFACE_DLA1:
            ops, luts = dla_ops(ld, i)
            out.append(f"    firmware interface {'.'.join(map(str, task_version(ld, i)))}, {len(ops)} operations, {luts} LUTs")
            for op in ops:
                out.append(f"    op {op.index:>2} {op.name:<5} {op.precision:<12} {op.detail}")
                if op.src is not None:
                    out.append(f"         in  {op.src.describe()}")
                for nm, c in op.extra:
                    out.append(f"         {nm:<3} {c.describe()}")
                if op.dst is not None:
                    out.append(f"         out {op.dst.describe()}")
                if op.lut_index >= 0:
                    out.append(f"         LUT {op.lut_index}")
        elif t.interface == IFACE_EMU1:
            from ..loadables.emulator import decode_emu_task
            from ..loadables.runtime import entry_bytes

            def entry(k: int, t=t) -> memoryview:  # noqa: ANN001
                if not 0 <= k < len(t.address_list):
                    raise LoadableError(f"EMU task {t.id}: address-list index {k} outside its {len(t.address_list)} entries")
                a = ld.addresses[t.address_list[k]]
                return memoryview(entry_bytes(ld, a.mem_id))[a.offset:]
            for emu in decode_emu_task(entry(0), entry):
                out.append(f"    EMU {emu.name} ({emu.layout} layout) {emu.params}; in [{emu.src.address_index}] "
                           f"{emu.src.width}x{emu.src.height}x{emu.src.channel} out [{emu.dst.address_index}]")
    out.append("submit list: " + "; ".join(f"{s.id}: tasks {list(s.task_ids)}" for s in ld.submits))
    out.append(f"tensors ({len(ld.tensors)}):")
    for td in ld.tensors:
        dn, dc, dh, dw = td.dims
        out.append(f"  {td.id} {td.name!r} mem {td.mem_id} {td.type_name} {dn}x{dc}x{dh}x{dw} strides {list(td.strides[:3])} {td.size} B")
    return "\n".join(out)


def _cmd_show(args: argparse.Namespace) -> int:
    print(show_text(args.file))
    return 0


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _check_dump(dump: str, force: bool, inputs: list[tuple[str, str]]) -> None:
    """Refuse (exit 2) a ``--dump`` that is one of the run's inputs (resolved path or inode),
    or an existing file without ``--force``, or whose folder does not exist."""
    from .exits import BadInput

    target = Path(dump)
    resolved = target.resolve()
    try:
        st = os.stat(target)
    except OSError:
        st = None
    for what, path in inputs:
        try:
            same = Path(path).resolve() == resolved or (st is not None and _same_file(st, os.stat(path)))
        except OSError:
            same = False
        if same:
            raise BadInput(f"--dump {dump}: it is the {what} of this run ({path}); the output never overwrites an input, "
                           "even with --force")
    if os.path.lexists(target) and not force:
        raise BadInput(f"--dump {dump}: the file exists; pass --force to replace it")
    if not resolved.parent.is_dir():
        raise BadInput(f"--dump {dump}: its folder {resolved.parent} does not exist")


def _write_dump(dump: str, data: bytes, inputs: list[tuple[str, str]]) -> None:
    """Write the dump; checked again on the open file (never an input), errors exit 2 naming it."""
    from .exits import BadInput

    try:
        fd = os.open(dump, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as e:
        raise BadInput(f"--dump {dump}: cannot write it: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        for what, path in inputs:
            try:
                if _same_file(st, os.stat(path)):
                    raise BadInput(f"--dump {dump}: it is the {what} of this run ({path}); not overwritten")
            except OSError:
                continue
        try:
            if stat.S_ISREG(st.st_mode):
                os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            raise BadInput(f"--dump {dump}: cannot write it: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _cmd_run(args: argparse.Namespace) -> int:  # long: the checks of every file option, then one run
    import time

    from ..loadables.check import (MAX_INPUT, MAX_LOADABLE, NO_GOLDEN, check_loadable, check_regular, golden_for,
                                   loadable_name, profile_for_loadable, read_loadable, with_bugs, with_file)
    from ..loadables.dimg import MAX_DIMG_BYTES
    from ..loadables.fbs import LoadableError
    from ..loadables.firmware import find_nvdla_sw

    # every file option refused at once unless a regular file (no read, no hang)
    check_regular(args.file, "loadable", MAX_LOADABLE)
    if args.golden:
        check_regular(args.golden, "--golden", MAX_DIMG_BYTES)
    if args.input:
        check_regular(args.input, "--input", MAX_INPUT)
    if args.model_bug and args.target != "model":
        return bad_input("loadable run", "--model-bug applies to the model target only")
    golden = args.golden
    if golden is None and not args.input:  # NVDLA's goldens are of the run without an image
        path = Path(args.file).resolve()
        for parent in path.parents:
            if (parent / "golden").is_dir() and (parent / "flatbufs").is_dir():
                found = golden_for(parent, loadable_name(path))
                golden = str(found) if found else None
                break
    inputs = [(w, p) for w, p in (("loadable", args.file), ("golden", golden), ("input", args.input)) if p]
    if args.dump:
        _check_dump(args.dump, args.force, inputs)
    find_nvdla_sw(args.nvdla_sw)  # a clear exit 2 before anything runs
    try:
        prof = args.profile.split(",")[0] if args.profile else profile_for_loadable(read_loadable(args.file))
    except LoadableError as e:
        raise with_file(args.file, e) from None
    spec = with_bugs(firmware_spec(target_spec(args, prof)), args.model_bug if args.target == "model" else None)
    t0 = time.monotonic()
    v = check_loadable(args.file, spec=spec, nvdla_sw=args.nvdla_sw, golden=golden, input_path=args.input,
                       log=lambda s: print(f"  {s}"))
    wall = time.monotonic() - t0
    if args.dump and v.result is not None:
        _write_dump(args.dump, v.result.dump, inputs)
    verdict = {"passed": "PASS", "failed": "FAIL", NO_GOLDEN: "RAN, NO GOLDEN"}[v.outcome]
    against = f" against {golden}" if golden else " (ran, no golden: nothing to compare the output with)"
    print(f"{verdict} {v.name} on {v.target} ({v.profile}){against}: output MD5 {v.md5 or '-'}"
          + (f", golden {v.expected_md5}" if v.expected_md5 else "") + f"; run {v.seconds:.2f} s, wall {wall:.2f} s")
    if v.result is not None and v.result.meta.note:
        print(f"note: {v.result.meta.note}")
    if v.message:
        print(v.message)
    return 1 if v.outcome == "failed" else 0
