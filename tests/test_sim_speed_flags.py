"""The simulator's speed options (issue 41): each is its own flag list and its own cache entry,
and NVDLA's native player is built either as NVDLA's Makefile builds it or with our flags.

Nothing here builds or times anything (``bench/bench_sim.py`` measures the variants); the keys are
computed from fixed Verilator/cocotb version strings, so no tool needs to be installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _bench import bench_module
from nvdla_hil.sims import build as simbuild
from nvdla_hil.sims import native, toolchain
from nvdla_hil.sims.build import BuildError, BuildOptions, PgoProfile

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "default": BuildOptions(),
    "verilator default -O": BuildOptions(verilator_o3=False),
    "no x fast": BuildOptions(x_fast=False),
    "noassert": BuildOptions(noassert=True),
    "OPT_FAST -O3": BuildOptions(opt_fast="-O3"),
    "OPT_FAST -O3 -march=native": BuildOptions(opt_fast="-O3 -march=native"),
    "output-split 5000": BuildOptions(output_split=5000),
    "pgo generate": BuildOptions(pgo="generate"),
    "lto": BuildOptions(lto=True),
    "extra flags": BuildOptions(extra=("--inline-cfuncs", "200")),
}


def _key(opts: BuildOptions, *, threads: int = 1, training: str = "", cxx: str | None = None) -> str:
    parts = opts.key_parts() + ([f"pgo-trained-on={training}"] if training else [])
    return simbuild.cache_key(name="nvdla", config="nv_small", toplevel="nvdla_hil_top",
                              flags=[*opts.verilator_flags(), *simbuild.thread_flags(threads)],
                              key_parts=parts, hashed=[], hashed_base=None, own=[], waves=False,
                              vversion="Verilator 5.048", cocotb_version="2.1", opt_fast=opts.opt_fast,
                              make_flags=opts.make_flags(), cxx=cxx)


def test_the_default_build_keeps_its_flags_and_key() -> None:
    """The default options are the flags the cached builds before issue 41 were made with, so
    their key (and every existing cache entry) is unchanged."""
    assert simbuild.BASE_VERILATOR_FLAGS == (*simbuild.REQUIRED_VERILATOR_FLAGS, "--x-assign", "fast",
                                             "--x-initial", "fast", "-O3", "--output-split", "20000")
    assert BuildOptions().make_flags() == toolchain.MAKE_FLAGS
    old = simbuild.cache_key(name="nvdla", config="nv_small", toplevel="nvdla_hil_top",
                             flags=list(simbuild.BASE_VERILATOR_FLAGS), key_parts=[], hashed=[],
                             hashed_base=None, own=[], waves=False, vversion="Verilator 5.048",
                             cocotb_version="2.1")
    assert _key(BuildOptions()) == old


def test_each_speed_option_is_its_own_flag_and_cache_entry() -> None:
    flags = {name: opts.verilator_flags() for name, opts in VARIANTS.items()}
    assert "-O3" not in flags["verilator default -O"] and "-O3" in flags["default"]
    assert "--x-assign" not in flags["no x fast"] and "--x-initial" not in flags["no x fast"]
    assert "--noassert" in flags["noassert"] and "--noassert" not in flags["default"]
    assert flags["output-split 5000"][-2:] == ["--output-split", "5000"]
    assert flags["extra flags"][-2:] == ["--inline-cfuncs", "200"]
    assert "OPT_FAST=-O3" in VARIANTS["OPT_FAST -O3"].make_flags()
    lto = flags["lto"]
    assert lto[lto.index("-CFLAGS") + 1] == "-flto=auto" and lto[lto.index("-LDFLAGS") + 1] == "-flto=auto -O2"
    assert "OPT_FAST=-O2" in VARIANTS["default"].make_flags()
    keys = {name: _key(opts) for name, opts in VARIANTS.items()}
    keys["threads 2"] = _key(BuildOptions(), threads=2)
    keys["pgo use"] = _key(BuildOptions(pgo="use"), training="nv_small traces a b")
    keys["pgo use, other training"] = _key(BuildOptions(pgo="use"), training="nv_small traces c")
    keys["clang"] = _key(BuildOptions(), cxx="clang++-that-is-not-installed")
    assert len(set(keys.values())) == len(keys), keys
    for opts in VARIANTS.values():  # every build still has what the RTL needs
        assert set(simbuild.REQUIRED_VERILATOR_FLAGS) <= set(opts.verilator_flags())


def test_march_native_puts_the_host_cpu_in_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A -march=native build runs only on CPUs like the builder's: another CPU, another entry."""
    native_opts = BuildOptions(opt_fast="-O3 -march=native")
    assert BuildOptions(opt_fast="-O3").key_parts() == []
    assert native_opts.key_parts() == [f"host-cpu={toolchain.host_cpu()}"]
    here, plain = _key(native_opts), _key(BuildOptions(opt_fast="-O3"))
    monkeypatch.setattr(simbuild, "host_cpu", lambda: "another CPU; x86_64; sse2")
    assert _key(native_opts) != here
    assert _key(BuildOptions(opt_fast="-O3")) == plain  # a portable build's entry does not depend on the CPU


def test_profile_guided_steps_and_their_flags(tmp_path: Path) -> None:
    gen, use = BuildOptions(pgo="generate").verilator_flags(), BuildOptions(pgo="use").verilator_flags()
    assert gen[gen.index("-CFLAGS") + 1].startswith("-fprofile-generate")
    assert gen[gen.index("-LDFLAGS") + 1] == "-fprofile-generate"
    assert "-fprofile-use" in use[use.index("-CFLAGS") + 1].split()
    assert "-fprofile-partial-training" in use[use.index("-CFLAGS") + 1].split()
    with pytest.raises(BuildError, match="unknown profile-guided"):
        BuildOptions(pgo="train")
    with pytest.raises(BuildError, match="output-split"):
        BuildOptions(output_split=-1)
    # a profile without .gcda files is refused, a profile is copied beside the objects
    with pytest.raises(BuildError, match="no profile"):
        PgoProfile(tmp_path, "nothing").install(tmp_path)
    (tmp_path / "prof").mkdir()
    (tmp_path / "prof" / "Vtop__1.gcda").write_bytes(b"x")
    (tmp_path / "obj").mkdir()
    assert PgoProfile(tmp_path / "prof", "t").install(tmp_path / "obj") == 1
    assert (tmp_path / "obj" / "Vtop__1.gcda").read_bytes() == b"x"


def test_a_clang_build_has_clangs_make_flags_profile_format_and_its_own_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``BuildOptions(compiler="clang")``: clang++ from PATH with the make flags Verilator's
    configure writes for clang, clang's profile flags for each PGO step (a training run's
    ``.profraw`` files merged by llvm-profdata), its own cache entry; LTO stays gcc's."""
    monkeypatch.setattr(simbuild, "find_clang", lambda: "/opt/llvm/bin/clang++")
    clang = BuildOptions(compiler="clang")
    assert clang.cxx() == "/opt/llvm/bin/clang++"
    assert "CFG_LDLIBS_THREADS=-pthread -latomic" in clang.make_flags()
    assert clang.describe().endswith("; CXX=clang")
    gen = BuildOptions(compiler="clang", pgo="generate").verilator_flags()
    use = BuildOptions(compiler="clang", pgo="use").verilator_flags()
    assert gen[gen.index("-CFLAGS") + 1] == "-fprofile-generate"
    assert use[use.index("-CFLAGS") + 1].split()[0] == f"-fprofile-use={simbuild.CLANG_PROFDATA}"
    assert "-fprofile-partial-training" not in " ".join(use)  # gcc's; clang refuses it
    assert _key(clang, cxx=clang.cxx()) != _key(BuildOptions())
    with pytest.raises(BuildError, match="gcc only"):
        BuildOptions(compiler="clang", lto=True)
    with pytest.raises(BuildError, match="unknown compiler"):
        BuildOptions(compiler="icc")
    monkeypatch.setattr(simbuild, "find_clang", lambda: None)
    with pytest.raises(BuildError, match="clang\\+\\+ on PATH"):
        clang.cxx()


def test_a_clang_profile_that_llvm_profdata_cannot_merge_is_a_build_error(tmp_path: Path) -> None:
    """A clang training profile is merged into one .profdata beside the objects; a bad one is refused."""
    (tmp_path / "obj").mkdir()
    (tmp_path / "prof").mkdir()
    bad = tmp_path / "prof" / "train-1.profraw"
    bad.write_bytes(b"not a profile")
    if not shutil.which("llvm-profdata"):
        pytest.skip("llvm-profdata not installed (Debian: apt-get install llvm): the clang profile merge is not checked")
    with pytest.raises(BuildError, match="llvm-profdata could not merge"):
        PgoProfile(tmp_path / "prof", "t").install(tmp_path / "obj")


def test_describe_names_every_speed_flag() -> None:
    d = BuildOptions(verilator_o3=False, noassert=True, opt_fast="-O3", output_split=5000).describe()
    assert d == "verilator --x-assign fast --x-initial fast --output-split 5000 --noassert; OPT_FAST=-O3"


def test_make_flags_for_verilators_default_and_clang() -> None:
    assert not any(f.startswith("OPT_FAST=") for f in toolchain.make_flags(None))
    clang = toolchain.make_flags(None, clang=True)
    assert "CFG_CXXFLAGS_PCH_I=-include-pch" in clang and "CFG_GCH_IF_CLANG=.gch" in clang
    assert "CFG_CXXFLAGS_PCH_I=-include" not in clang
    assert "CFG_LDLIBS_THREADS=-pthread -latomic" in clang  # clang's std::atomic needs libatomic
    assert toolchain.make_flags("-O3")[-1] == "OPT_FAST=-O3"
    over = toolchain.make_overrides("/usr/bin/clang++", clang)
    assert "CXX=/usr/bin/clang++" in over and "LINK=/usr/bin/clang++" in over


def test_native_player_as_nvdla_builds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVDLA's Makefile: --compiler clang --output-split 250000000, -Wno-moddup -Wno-fatal, its
    four defines, Verilator's default OPT_FAST, clang++, VM_PARALLEL_BUILDS=1; none of our
    speed flags."""
    monkeypatch.setattr(native, "find_clang", lambda: "/usr/bin/clang++")
    flags, opt_fast, mflags, cxx = native.native_recipe("nvdla")
    assert " ".join(flags).startswith("--no-timing --compiler clang --output-split 250000000 -Wno-moddup -Wno-fatal")
    assert {f"-D{d}" for d in simbuild.NVDLA_DEFINES} <= set(flags)
    assert not {"-O3", "--x-assign", "--x-initial", "-Wno-lint"} & set(flags)
    assert opt_fast is None and not any(f.startswith("OPT_FAST=") for f in mflags)
    assert "VM_PARALLEL_BUILDS=1" in mflags and cxx == "/usr/bin/clang++"
    monkeypatch.setattr(native, "find_clang", lambda: None)  # no clang: g++, with NVDLA's other flags
    flags_gcc, _, mflags_gcc, cxx_gcc = native.native_recipe("nvdla")
    assert flags_gcc == flags and cxx_gcc == toolchain.cxx_command()
    assert "CFG_GCH_IF_CLANG=.gch" not in mflags_gcc


def test_native_player_with_our_flags_is_the_apples_to_apples_check() -> None:
    flags, opt_fast, mflags, cxx = native.native_recipe("ours")
    assert flags[:len(simbuild.BASE_VERILATOR_FLAGS)] == list(simbuild.BASE_VERILATOR_FLAGS)
    assert opt_fast == BuildOptions().opt_fast and mflags == BuildOptions().make_flags()
    assert cxx == toolchain.cxx_command()
    assert native.native_recipe("ours", threads=2)[0][-2:] == ["--threads", "2"]
    with pytest.raises(BuildError, match="unknown native build style"):
        native.native_recipe("fast")


def test_native_styles_are_separate_cache_entries() -> None:
    keys = set()
    for style in native.NATIVE_STYLES:
        flags, opt_fast, mflags, cxx = native.native_recipe(style)
        keys.add(simbuild.cache_key(name="native", config="nv_small", toplevel="NV_nvdla", flags=flags,
                                    key_parts=[] if style == "ours" else [f"style={style}"], hashed=[],
                                    hashed_base=None, own=[], waves=False, vversion="Verilator 5.048",
                                    cocotb_version="-", opt_fast=opt_fast, make_flags=mflags, cxx=cxx))
    assert len(keys) == len(native.NATIVE_STYLES)


# bench/bench_sim.py -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_sim") as mod:
        yield mod


def test_bench_takes_the_median_and_refuses_differing_runs(bench) -> None:
    Run = bench.Run
    m = bench._median([Run("passed", 100, 1.0, 3.0), Run("passed", 100, 9.0, 1.0), Run("passed", 100, 2.0, 2.0)])
    assert (m.status, m.cycles, m.wall, m.cpu) == ("passed", 100, 2.0, 2.0)
    assert bench._median([Run("passed", 100, 1.0, 1.0), Run("passed", 101, 1.0, 1.0)]).status == "MISMATCH"
    assert bench._median([Run("passed", 100, 1.0, 1.0), Run("failed", 7, 1.0, 1.0)]).status == "failed"
    # ours twice as fast per cycle as the native player -> 2.0 (ours / native)
    assert bench._ratio(Run("passed", 200, 1.0, 1.0), Run("passed", 100, 1.0, 1.0), "cpu") == 2.0


def test_bench_options_make_one_variant_each(bench) -> None:
    ap = bench.build_parser()
    assert bench.target_options(ap.parse_args([])) == BuildOptions()
    assert bench.target_options(ap.parse_args(["--verilator-opt", "default"])) == BuildOptions(verilator_o3=False)
    assert bench.target_options(ap.parse_args(["--x-fast", "off", "--noassert", "on"])) == \
        BuildOptions(x_fast=False, noassert=True)
    assert bench.target_options(ap.parse_args(["--opt-fast", "-O3 -march=native", "--output-split", "0"])) == \
        BuildOptions(opt_fast="-O3 -march=native", output_split=0)
    assert bench.target_options(ap.parse_args(["--lto", "on"])) == BuildOptions(lto=True)
    assert ap.parse_args([]).native_style == "nvdla"
    assert tuple(bench.NATIVE_STYLES) == native.NATIVE_STYLES
    assert not set(bench.PGO_TRAINING_NV_SMALL) & set(bench.LONGEST_NV_SMALL)  # trained on other traces

