// nvdla-hil: the simulator's main loop, with the clock driven in C++.
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources. The time-slot loop
// (eval, value-change, ReadWrite, ReadOnly, NextSimTime and timed VPI callbacks) follows
// cocotb's share/lib/verilator/verilator.cpp (BSD-3-Clause), which this replaces.
//
// What differs: cocotb's main leaves the clock to a cocotb Clock, a VPI timer callback and a
// vpi_put_value on every half period. Here the loop itself toggles the top's `clk` input at
// the point where that timer callback would run (before the value-change callbacks of the
// time slot), so RisingEdge(clk) in Python sees exactly the same edges and cycle counts,
// while no VPI call is made per half cycle. Python (cocotb) runs only when something it
// waits for happens: a Timer deadline, a signal it watches, a ReadOnly phase it asked for.
//
// Runs of whole cycles: while cocotb waits for the interrupt or for a number of cycles (reset,
// `run`), it asks for the run through the top's host_run_* ports and sleeps until host_run_ack
// changes. The loop then makes those cycles in a tight loop of edges and evals with no VPI
// work at all (no callback lists to test twice per half cycle), stopping after the rising edge
// where the interrupt is high (host_run_irq), before the next timed callback is due, or after
// host_run_cycles cycles (just before the following rising edge). Python sees the same edges
// and cycle counts as when it slept on RisingEdge(intr) or a Timer.
//
// The AXI memory ports (DBBIF, and CVIF when the top has it) are answered here too, in C++
// (nvdla_hil_axi_mem.h), the way NVDLA's own C++ trace player answers them: the memory steps at
// each rising edge and presents its outputs before the falling one.
//
// The clock's half period is NVDLA_HIL_CLK_HALF_NS (compile-time define, default 5 ns: the
// 10 ns period tb_server.py counts cycles with); `clk` starts low and first rises at one
// half period, as cocotb's Clock(start_high=False) did.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "Vtop.h"
#include "nvdla_hil_axi_mem.h"
#include "verilated.h"
#include "verilated_vpi.h"

#if VM_TRACE
#if VM_TRACE_FST
#include <verilated_fst_c.h>
using trace_file_t = VerilatedFstC;
#else
#include <verilated_vcd_c.h>
using trace_file_t = VerilatedVcdC;
#endif
static trace_file_t *g_trace = nullptr;
#endif

#ifndef NVDLA_HIL_CLK_HALF_NS
#define NVDLA_HIL_CLK_HALF_NS 5
#endif

static vluint64_t g_time = 0;

double sc_time_stamp() { return static_cast<double>(g_time); }

extern "C" void vlog_startup_routines_bootstrap(void);

namespace {

// Value-change callbacks may change signals that other callbacks watch: run until quiet.
bool settle_value_callbacks() {
    bool called = VerilatedVpi::callValueCbs();
    bool again = called;
    while (again) again = VerilatedVpi::callValueCbs();
    return called;
}

void wrap_up() {
    VerilatedVpi::callCbs(cbEndOfSimulation);
#if VM_TRACE
    if (g_trace) g_trace->close();
#endif
}

// One half period in the design's time precision (e.g. 5000 for 5 ns at 1 ps).
vluint64_t half_period_ticks() {
    const int precision = Verilated::threadContextp()->timeprecision();  // e.g. -12
    const double ticks = NVDLA_HIL_CLK_HALF_NS * std::pow(10.0, -9 - precision);
    return ticks < 1.0 ? 1 : static_cast<vluint64_t>(ticks + 0.5);
}

template <class T, class = void>
struct HasCvif : std::false_type {};
template <class T>
struct HasCvif<T, std::void_t<decltype(std::declval<T &>().cv_ar_valid)>> : std::true_type {};

// Evaluate one edge of the clock: the memories first (see nvdla_hil_axi_mem.h), then the design.
template <class Top, class Memories>
void clock_edge(Top *top, const Memories &memories, bool rising) {
    if (rising) {
        for (const auto &m : memories) m->posedge(top->rstn);  // samples what the edge samples
    } else {
        for (const auto &m : memories) m->drive();
    }
    top->clk = rising;
}

// A run the host asked for (host_run_cycles != 0), starting with the rising edge due now
// (g_time); returns with the last edge evaluated at g_time (its waves and the slot's callbacks
// are left to the caller's time slot) and next_edge set. Toggles host_run_ack.
template <class Top, class Memories>
void host_run(Top *top, const Memories &memories, vluint64_t half, vluint64_t &next_edge) {
    vluint64_t left = top->host_run_cycles;
    const bool stop_at_irq = top->host_run_irq;
    const vluint64_t deadline = VerilatedVpi::cbNextDeadline();  // a cocotb Timer, if any
    for (bool rising = true;; rising = !rising) {
        clock_edge(top, memories, rising);
        top->eval_step();
        top->eval_end_step();
        next_edge = g_time + half;
        if (rising) --left;
        const bool over = rising ? stop_at_irq && top->intr : left == 0;  // whole cycles end at a falling edge
        if (over || next_edge >= deadline || Verilated::gotFinish()) break;
#if VM_TRACE
        if (g_trace) g_trace->dump(g_time);
#endif
        g_time = next_edge;
        Verilated::threadContextp()->time(g_time);
    }
    top->host_run_cycles = 0;
    top->host_run_ack = !top->host_run_ack;
}

// The memory behind each AXI port of the top: backing store 0 on dbb_*, 1 on cv_* (if present).
template <class Top>
std::vector<std::unique_ptr<nvdla_hil::AxiPort>> attach_memories(Top *top) {
    std::vector<std::unique_ptr<nvdla_hil::AxiPort>> ports;
    ports.emplace_back(nvdla_hil::new_axi_memory(0, NVDLA_HIL_AXI_PORT(top, dbb_)));
    if constexpr (HasCvif<Top>::value) ports.emplace_back(nvdla_hil::new_axi_memory(1, NVDLA_HIL_AXI_PORT(top, cv_)));
    return ports;
}

}  // namespace

int main(int argc, char **argv) {
    std::string trace_path =
#if VM_TRACE_FST
        "dump.fst";
#else
        "dump.vcd";
#endif
    bool trace_on = false;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--trace") {
            trace_on = true;
        } else if (arg == "--trace-file" && i + 1 < argc) {
            trace_path = argv[++i];
        }
    }
#if !VM_TRACE
    if (trace_on) {
        std::fprintf(stderr, "error: --trace needs a simulator built with waves (sim build --waves)\n");
        return 2;
    }
#endif

    Verilated::commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);
#if VM_TRACE
    Verilated::traceEverOn(true);
    if (trace_on) {
        g_trace = new trace_file_t;
        top->trace(g_trace, 99);
        g_trace->open(trace_path.c_str());
    }
#endif

    const vluint64_t half = half_period_ticks();
    vluint64_t next_edge = half;
    top->clk = 0;
    const auto memories = attach_memories(top.get());

    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void *) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle_value_callbacks();

    while (!Verilated::gotFinish()) {
        do {
            do {
                top->eval_step();
                VerilatedVpi::clearEvalNeeded();
                VerilatedVpi::doInertialPuts();
                settle_value_callbacks();
            } while (VerilatedVpi::evalNeeded());
            // Values change only if a ReadWrite callback ran (cocotb's ReadWrite trigger): else
            // there is nothing to put and no value callback to test again.
            if (VerilatedVpi::callCbs(cbReadWriteSynch)) {
                VerilatedVpi::doInertialPuts();
                settle_value_callbacks();
            }
        } while (VerilatedVpi::evalNeeded());
        top->eval_end_step();
        VerilatedVpi::callCbs(cbReadOnlySynch);
#if VM_TRACE
        if (g_trace) g_trace->dump(g_time);
#endif
        // The clock never stops: the loop ends when cocotb finishes (vpiFinish -> gotFinish).
        const vluint64_t next_cb = VerilatedVpi::cbNextDeadline();
        vluint64_t next_time = next_edge < next_cb ? next_edge : next_cb;
        if (top->eventsPending() && top->nextTimeSlot() < next_time) next_time = top->nextTimeSlot();
        g_time = next_time;
        Verilated::threadContextp()->time(g_time);

        if (VerilatedVpi::callCbs(cbNextSimTime)) settle_value_callbacks();
        if (g_time == next_edge) {  // where cocotb's clock timer callback ran
            if (!top->clk && top->host_run_cycles) {
                host_run(top.get(), memories, half, next_edge);
            } else {
                clock_edge(top.get(), memories, !top->clk);
                next_edge += half;
            }
        }
        VerilatedVpi::callTimedCbs();
        settle_value_callbacks();
    }

    top->final();
    wrap_up();
#if VM_TRACE
    delete g_trace;
    g_trace = nullptr;
#endif
    return Verilated::threadContextp()->errorCount() > 0 ? 1 : 0;
}
