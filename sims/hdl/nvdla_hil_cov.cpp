// nvdla-hil: per-test RTL coverage of an instrumented simulator (sim build --coverage ...).
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources. Compiled only into builds
// made with Verilator's --coverage-line / --coverage-toggle, and linked with --export-dynamic,
// so the testbench's Python (tb_server.py, running inside this process) finds the function with
// ctypes.CDLL(None) and calls it between two tests: the counts since the last call are written
// in Verilator's coverage.dat format and then zeroed, so each file holds exactly one test's hits;
// nvdla_hil_coverage_zero drops what the reset between two tests counted.
#include <exception>

#include "verilated.h"
#include "verilated_cov.h"

extern "C" int nvdla_hil_coverage_write(const char *path) {
    try {
        VerilatedCovContext *cov = Verilated::threadContextp()->coveragep();
        cov->write(path);
        cov->zero();
    } catch (const std::exception &) {
        return 1;
    }
    return 0;
}

extern "C" int nvdla_hil_coverage_zero() {
    Verilated::threadContextp()->coveragep()->zero();
    return 0;
}
