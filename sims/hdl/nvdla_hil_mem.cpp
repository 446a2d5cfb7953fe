// nvdla-hil: backing store of the AXI memories (nvdla_hil_axi_mem.h).
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources.
// Each port is a 4 GiB window (byte address & 0xFFFFFFFF) mapped MAP_SHARED from the file
// descriptor $NVDLA_HIL_MEM<port>_FD (inherited, already unlinked, so nothing leaks) or the
// file named by $NVDLA_HIL_MEM<port>. The host process maps the same file, so it loads and
// reads memory directly while the simulator waits for its next request (no bus cycles).
// Without the variable the window is private anonymous memory (sparse, reads 0).
#include "nvdla_hil_axi_mem.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace {
constexpr uint64_t kWindow = 1ull << 32;
constexpr int kPorts = 2;
uint8_t *g_base[kPorts] = {nullptr, nullptr};

uint8_t *window(int port) {
    if (port < 0 || port >= kPorts) port = 0;
    if (g_base[port]) return g_base[port];
    char name[32];
    std::snprintf(name, sizeof name, "NVDLA_HIL_MEM%d_FD", port);
    const char *fdstr = std::getenv(name);
    std::snprintf(name, sizeof name, "NVDLA_HIL_MEM%d", port);
    const char *path = std::getenv(name);
    void *p = MAP_FAILED;
    if (fdstr && *fdstr) {
        p = ::mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                   std::atoi(fdstr), 0);
    } else if (path && *path) {
        int fd = ::open(path, O_RDWR);
        if (fd < 0) {
            std::fprintf(stderr, "nvdla_hil_mem: cannot open %s=%s\n", name, path);
            std::abort();
        }
        p = ::mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        ::close(fd);
    } else {
        p = ::mmap(nullptr, kWindow, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "nvdla_hil_mem: mmap of port %d failed\n", port);
        std::abort();
    }
    g_base[port] = static_cast<uint8_t *>(p);
    return g_base[port];
}
}  // namespace

uint8_t *nvdla_hil_mem_window(int port) { return window(port); }
