// nvdla-hil: a SystemC host for NVDLA's C model (cmod/ of the user's nvdla/hw checkout).
//
// This file is nvdla-hil's own code; it contains no NVDLA source. It is compiled against the
// user's checkout (the include directories of cmod/include and cmod/nvdla_top, and the
// libnvdla_cmod.so that cmod/Makefile builds) by harness/targets/cmod.py.
//
// What it builds: sc_main instantiates the cmod top level, scsim::cmod::NV_nvdla, and binds
//   * its CSB target socket (nvdla_host_master_if, TLM-2.0 b_transport, 4-byte accesses at CSB
//     *byte* addresses) to our initiator socket,
//   * its two AXI initiator sockets (nvdla_core2dbb_axi4 = DBBIF = pri_mem, nvdla_core2cvsram_axi4
//     = CVIF/SRAMIF = sec_mem; both b_transport with byte enables) to two sparse memories of
//     4 GiB each (the low 32 address bits select the byte, as on the Verilator target),
//   * its interrupt output (sc_out<bool> nvdla_intr) to a signal we watch.
//
// Protocol: one request per line, one reply per line ("ok ..." or "err MESSAGE"). Numbers are
// decimal or 0x-hex. Every reply ends with the simulated time in ns (t=...).
//   write ADDR VALUE            CSB write                         -> ok t=T
//   read ADDR                   CSB read                          -> ok VALUE t=T
//   wait_irq MAX_NS SETTLE_NS   wait for the interrupt line, at most MAX_NS of simulated time;
//                               if the line is already high, simulate SETTLE_NS first
//                                                                 -> ok IRQ t=T
//   run NS                      advance simulated time            -> ok t=T
//   status                      interrupt level                   -> ok IRQ t=T
//   load_mem PORT ADDR HEX      write bytes (PORT 0 = pri_mem/DBB, 1 = sec_mem/CVSRAM)
//                                                                 -> ok t=T
//   dump_mem PORT ADDR LEN      read bytes                        -> ok HEX t=T
//   quit                                                          -> ok t=T, then exit
// The first line the server sends is "ok hello t=0". Standalone use: `cmod_server < requests.txt`.
//
// Channel: the socket whose descriptor is in $NVDLA_HIL_SOCK_FD, else stdin/stdout (stdout is
// then moved to a private descriptor and fd 1 points at stderr, so model messages never mix
// with replies). Memory: the descriptors in $NVDLA_HIL_MEM0_FD / $NVDLA_HIL_MEM1_FD (4 GiB
// sparse files shared with the Python side, which then reads and writes memory directly), else
// private anonymous mappings.
//
// Time: the cmod is loosely timed (its units compute in delta cycles; a few steps wait 1 ns).
// The host thread only yields to the model inside a request, so the model runs only while a
// request is served; every CSB access is followed by $NVDLA_HIL_CSB_NS (default 1) ns of
// simulated time so that polling loops make progress.

#ifndef SC_INCLUDE_DYNAMIC_PROCESSES
#define SC_INCLUDE_DYNAMIC_PROCESSES
#endif
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

#include "NV_nvdla.h"

using namespace sc_core;

static const uint64_t kWindow = 1ull << 32;

// ---- memory ------------------------------------------------------------------------------
// The C model's CVIF (cvif/gen/NV_NVDLA_cvif.cpp, every WriteRequest_*2cvif) builds a write that
// starts on the second 32-byte atom of a 64-byte AXI beat with its data buffer laid out from the
// aligned beat (bytes 0-31 disabled, zeroed) but moves the payload's address up by 32 bytes;
// MCIF sends the aligned address. Taken by the letter of TLM-2.0 (data[i] belongs at address+i)
// every such atom would land one atom late. The secondary-port memory therefore places a write
// whose address is 32 past a 64-byte boundary and whose first 32 byte enables are off from the
// aligned beat, as the CVIF's own buffer intends and as the RTL writes it (cvif_aligned_origin).
struct HilMemory : sc_module {
    tlm_utils::simple_target_socket<HilMemory> socket;
    uint8_t* base;
    uint64_t reads, writes;
    bool cvif_aligned_origin;

    HilMemory(sc_module_name n, int fd, bool cvif = false)
        : sc_module(n), socket("socket"), base(nullptr), reads(0), writes(0), cvif_aligned_origin(cvif) {
        void* p;
        if (fd >= 0)
            p = mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        else
            p = mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "cmod_server: mmap of %s failed: %s\n", name(), strerror(errno));
            exit(3);
        }
        base = static_cast<uint8_t*>(p);
        socket.register_b_transport(this, &HilMemory::b_transport);
    }

    void b_transport(tlm::tlm_generic_payload& gp, sc_time& /*delay*/) {
        uint64_t addr = gp.get_address() & (kWindow - 1);
        unsigned len = gp.get_data_length();
        uint8_t* data = gp.get_data_ptr();
        if (addr + len > kWindow) {
            gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return;
        }
        const uint8_t* be = gp.get_byte_enable_ptr();
        unsigned be_len = gp.get_byte_enable_length();
        if (gp.is_write()) {
            ++writes;
            if (cvif_aligned_origin && be && be_len >= 32 && (addr & 63) == 32) {
                bool lead_off = true;
                for (unsigned i = 0; i < 32 && lead_off; ++i) lead_off = be[i % be_len] != TLM_BYTE_ENABLED;
                if (lead_off) addr -= 32;  // the CVIF's buffer starts at the aligned beat
            }
            if (!be || !be_len) {
                memcpy(base + addr, data, len);
            } else {
                for (unsigned i = 0; i < len; ++i)
                    if (be[i % be_len] == TLM_BYTE_ENABLED) base[addr + i] = data[i];
            }
        } else if (gp.is_read()) {
            ++reads;
            memcpy(data, base + addr, len);
        }
        gp.set_response_status(tlm::TLM_OK_RESPONSE);
    }
};

// ---- host: CSB initiator + request loop ------------------------------------------------------
struct HilHost : sc_module {
    tlm_utils::simple_initiator_socket<HilHost> csb;
    sc_in<bool> irq;
    HilMemory* mem[2];
    FILE* in;
    FILE* out;
    sc_time csb_time;

    SC_HAS_PROCESS(HilHost);
    HilHost(sc_module_name n, FILE* in_, FILE* out_, HilMemory* m0, HilMemory* m1, sc_time csb_t)
        : sc_module(n), csb("csb"), irq("irq"), in(in_), out(out_), csb_time(csb_t) {
        mem[0] = m0;
        mem[1] = m1;
        SC_THREAD(serve);
    }

    uint64_t now_ns() const { return (uint64_t)(sc_time_stamp().to_seconds() * 1e9 + 0.5); }

    void reply(const std::string& body) {
        fprintf(out, "ok%s%s t=%" PRIu64 "\n", body.empty() ? "" : " ", body.c_str(), now_ns());
        fflush(out);
    }
    void error(const std::string& msg) {
        fprintf(out, "err %s\n", msg.c_str());
        fflush(out);
    }

    bool csb_access(bool write, uint32_t addr, uint32_t& value) {
        tlm::tlm_generic_payload gp;
        uint32_t buf = value;
        gp.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
        gp.set_address(addr);
        gp.set_data_ptr(reinterpret_cast<unsigned char*>(&buf));
        gp.set_data_length(4);
        gp.set_streaming_width(4);
        gp.set_byte_enable_ptr(nullptr);
        gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
        sc_time delay = SC_ZERO_TIME;
        csb->b_transport(gp, delay);
        wait(delay + csb_time);
        if (!write) value = buf;
        return gp.is_response_ok();
    }

    static bool parse_u64(const char* s, uint64_t& v) {
        if (!s) return false;
        char* end = nullptr;
        errno = 0;
        v = strtoull(s, &end, 0);
        return errno == 0 && end != s && *end == '\0';
    }

    static int hexval(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    void serve() {
        reply("hello");
        std::string line;
        char chunk[1 << 16];
        for (;;) {
            line.clear();
            bool got = false;
            while (fgets(chunk, sizeof chunk, in)) {
                got = true;
                line += chunk;
                if (!line.empty() && line.back() == '\n') break;
            }
            if (!got) break;  // EOF: the controller went away
            while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
            if (line.empty()) continue;
            std::vector<char> buf(line.begin(), line.end());
            buf.push_back('\0');
            char* save = nullptr;
            const char* op = strtok_r(buf.data(), " \t", &save);
            const char* a1 = strtok_r(nullptr, " \t", &save);
            const char* a2 = strtok_r(nullptr, " \t", &save);
            const char* a3 = strtok_r(nullptr, " \t", &save);
            uint64_t v1 = 0, v2 = 0, v3 = 0;
            std::string sop = op ? op : "";
            if (sop == "quit") {
                reply("");
                sc_stop();
                return;
            } else if (sop == "write") {
                if (!parse_u64(a1, v1) || !parse_u64(a2, v2) || v1 % 4 || v1 >> 32 || v2 >> 32) { error("usage: write ADDR VALUE"); continue; }
                uint32_t v = (uint32_t)v2;
                if (!csb_access(true, (uint32_t)v1, v)) { error("CSB write not acknowledged"); continue; }
                reply("");
            } else if (sop == "read") {
                if (!parse_u64(a1, v1) || v1 % 4 || v1 >> 32) { error("usage: read ADDR"); continue; }
                uint32_t v = 0;
                if (!csb_access(false, (uint32_t)v1, v)) { error("CSB read not acknowledged"); continue; }
                char s[32];
                snprintf(s, sizeof s, "%u", v);
                reply(s);
            } else if (sop == "wait_irq") {
                if (!parse_u64(a1, v1) || (a2 && !parse_u64(a2, v2))) { error("usage: wait_irq MAX_NS [SETTLE_NS]"); continue; }
                if (irq.read()) {
                    if (v2) wait(sc_time((double)v2, SC_NS));
                } else {
                    wait(sc_time((double)v1, SC_NS), irq.posedge_event());
                }
                reply(irq.read() ? "1" : "0");
            } else if (sop == "run") {
                if (!parse_u64(a1, v1)) { error("usage: run NS"); continue; }
                wait(sc_time((double)v1, SC_NS));
                reply("");
            } else if (sop == "status") {
                char s[64];
                snprintf(s, sizeof s, "%d reads=%" PRIu64 ",%" PRIu64 " writes=%" PRIu64 ",%" PRIu64, irq.read() ? 1 : 0,
                         mem[0]->reads, mem[1]->reads, mem[0]->writes, mem[1]->writes);
                reply(s);
            } else if (sop == "load_mem") {
                if (!parse_u64(a1, v1) || v1 > 1 || !parse_u64(a2, v2) || !a3) { error("usage: load_mem PORT ADDR HEX"); continue; }
                size_t n = strlen(a3);
                uint64_t addr = v2 & (kWindow - 1);
                if (n % 2 || addr + n / 2 > kWindow) { error("load_mem: bad hex length or range"); continue; }
                bool ok = true;
                for (size_t i = 0; i < n / 2; ++i) {
                    int h = hexval(a3[2 * i]), l = hexval(a3[2 * i + 1]);
                    if (h < 0 || l < 0) { ok = false; break; }
                    mem[v1]->base[addr + i] = (uint8_t)(h << 4 | l);
                }
                if (!ok) { error("load_mem: bad hex"); continue; }
                reply("");
            } else if (sop == "dump_mem") {
                if (!parse_u64(a1, v1) || v1 > 1 || !parse_u64(a2, v2) || !parse_u64(a3, v3)) { error("usage: dump_mem PORT ADDR LEN"); continue; }
                uint64_t addr = v2 & (kWindow - 1);
                if (addr + v3 > kWindow || v3 > (1u << 26)) { error("dump_mem: bad range"); continue; }
                std::string hex;
                hex.reserve(2 * v3);
                static const char* digits = "0123456789abcdef";
                for (uint64_t i = 0; i < v3; ++i) {
                    uint8_t b = mem[v1]->base[addr + i];
                    hex += digits[b >> 4];
                    hex += digits[b & 15];
                }
                reply(hex);
            } else {
                error("unknown request: " + sop);
            }
        }
        sc_stop();
    }
};

static int env_fd(const char* name) {
    const char* s = getenv(name);
    if (!s || !*s) return -1;
    return atoi(s);
}

int sc_main(int argc, char* argv[]) {
    (void)argc;
    // The cmod writes some signals from more than one process in the same delta cycle (GLB's
    // per-source interrupt methods all drive nvdla_intr; BdmaCore's ResetThread and
    // ReadRequestSequenceGeneratorThread both drive nvdla_core.bdma.signal_2), which SystemC >= 2.3
    // rejects (E115) unless its writer check is off. SystemC reads SC_SIGNAL_WRITE_CHECK when its
    // simulation context is created, before sc_main, so a process started without it re-executes
    // itself with it set. $NVDLA_HIL_SC_WRITE_CHECK=1 keeps the check on.
    const char* keep_check = getenv("NVDLA_HIL_SC_WRITE_CHECK");
    if (!getenv("SC_SIGNAL_WRITE_CHECK") && !(keep_check && *keep_check == '1')) {
        setenv("SC_SIGNAL_WRITE_CHECK", "DISABLE", 1);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "cmod_server: re-exec with SC_SIGNAL_WRITE_CHECK=DISABLE failed: %s\n", strerror(errno));
    }
    FILE* in = nullptr;
    FILE* out = nullptr;
    int sock = env_fd("NVDLA_HIL_SOCK_FD");
    if (sock >= 0) {
        in = fdopen(sock, "r");
        out = fdopen(dup(sock), "w");
    } else {
        in = stdin;
        int priv = dup(1);
        dup2(2, 1);  // model messages (SystemC reports go to std::cout) go to stderr
        out = fdopen(priv, "w");
    }
    if (!in || !out) {
        fprintf(stderr, "cmod_server: cannot open the request channel: %s\n", strerror(errno));
        return 2;
    }
    const char* csb_ns = getenv("NVDLA_HIL_CSB_NS");
    sc_time csb_time((csb_ns && *csb_ns) ? atof(csb_ns) : 1.0, SC_NS);

    sc_report_handler::set_actions(SC_ID_INSTANCE_EXISTS_, SC_DO_NOTHING);
    scsim::cmod::NV_nvdla* nvdla = new scsim::cmod::NV_nvdla("nvdla", 0);
    HilMemory* dbb = new HilMemory("pri_mem", env_fd("NVDLA_HIL_MEM0_FD"));
    HilMemory* cvsram = new HilMemory("sec_mem", env_fd("NVDLA_HIL_MEM1_FD"), true);
    // the cmod's GLB drives nvdla_intr from one SC_METHOD per interrupt source
    sc_signal<bool, SC_MANY_WRITERS>* irq = new sc_signal<bool, SC_MANY_WRITERS>("irq");
    HilHost* host = new HilHost("host", in, out, dbb, cvsram, csb_time);

    host->csb.bind(nvdla->nvdla_host_master_if);
    nvdla->nvdla_core2dbb_axi4.bind(dbb->socket);
    nvdla->nvdla_core2cvsram_axi4.bind(cvsram->socket);
    nvdla->nvdla_intr(*irq);
    host->irq(*irq);

    sc_start();
    fflush(stdout);
    fflush(stderr);
    // The model's destructors are not needed (the process exits); skipping them avoids any
    // teardown-order problem inside the model.
    _exit(0);
}
