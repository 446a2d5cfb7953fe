// nvdla-hil: AXI4 slave memory for NVDLA's DBBIF/CVIF ports, run by the simulator's main loop.
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources. The bytes live in the
// shared-memory window of nvdla_hil_mem.cpp, which the host process maps too (the backdoor).
//
// Protocol (the rules the earlier HDL model had, cycle for cycle): INCR bursts, one beat of the
// data width per cycle, responses in order; up to DEPTH outstanding requests per channel.
//   read:  AR accepted while fewer than DEPTH are queued; R gives the next beat of the oldest
//          request whenever R is empty or taken (so the first beat follows AR by one cycle).
//   write: W accepted while an AW is queued and the B queue has room; the last beat (WLAST,
//          or the AW's length) retires the AW and queues B.
//
// Clocking: the main loop calls posedge() just before the clock rises, so it samples the
// master's outputs that the design's own flip-flops sample at that edge, and drive() just
// before the clock falls, so the design sees the memory's new outputs before the next rising
// edge. NVDLA is a rising-edge design, so this equals a memory updating at the rising edge;
// only in waves do the memory's outputs change at the falling edge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "verilated.h"

//! The shared-memory window of backing store ``port`` (nvdla_hil_mem.cpp).
uint8_t *nvdla_hil_mem_window(int port);
//! Window offset of byte address ``addr`` for an 8-byte word (4 GiB window, 8-byte aligned).
inline uint64_t nvdla_hil_mem_offset(uint64_t addr) { return addr & ((1ull << 32) - 8); }

namespace nvdla_hil {

inline uint8_t *bytes_of(QData &v) { return reinterpret_cast<uint8_t *>(&v); }
template <std::size_t N>
inline uint8_t *bytes_of(VlWide<N> &v) {
    return reinterpret_cast<uint8_t *>(static_cast<WDataOutP>(v));
}

//! The AXI pins of one port, as references to the Verilated top's ports (the master's outputs
//! are read, the memory's written). Types follow the port widths (see NVDLA_HIL_AXI_PORT).
template <class LenT, class AddrT, class DataT, class StrbT>
struct AxiPins {
    CData &ar_valid, &ar_ready, &ar_id;
    LenT &ar_len;
    AddrT &ar_addr;
    CData &r_valid, &r_ready, &r_id, &r_last;
    DataT &r_data;
    CData &aw_valid, &aw_ready, &aw_id;
    LenT &aw_len;
    AddrT &aw_addr;
    CData &w_valid, &w_ready;
    DataT &w_data;
    StrbT &w_strb;
    CData &w_last, &b_valid, &b_ready, &b_id;
};

//! What the main loop calls on every memory port.
class AxiPort {
  public:
    virtual ~AxiPort() = default;
    virtual void posedge(bool rstn) = 0;
    virtual void drive() = 0;
};

template <class LenT, class AddrT, class DataT, class StrbT>
class AxiMemory final : public AxiPort {
  public:
    static constexpr int DEPTH = 8;  // outstanding requests per channel
    static constexpr uint64_t BEAT = sizeof(DataT);  // bytes per beat (the port's data width)
    static_assert(BEAT % 8 == 0, "AXI data width must be a multiple of 64 bits");
    static_assert(sizeof(StrbT) <= 8, "AXI data width above 512 bits");

    AxiMemory(int port, const AxiPins<LenT, AddrT, DataT, StrbT> &pins)
        : pins_(pins), mem_(nvdla_hil_mem_window(port)) {
        std::memset(r_data_, 0, sizeof r_data_);
        drive();
    }

    //! The rising edge: sample the master, advance both channels (reset when rstn is low).
    void posedge(bool rstn) override {
        if (!rstn) {
            ar_ = Queue{};
            aw_ = Queue{};
            b_ = Queue{};
            rd_beat_ = wr_beat_ = 0;
            r_valid_ = r_last_ = false;
            r_id_ = 0;
            std::memset(r_data_, 0, sizeof r_data_);
            return;
        }
        read_channel();
        write_channel();
    }

    //! Present the memory's outputs (after the rising edge, before the next one).
    void drive() override {
        pins_.ar_ready = ar_.count != DEPTH;
        pins_.r_valid = r_valid_;
        pins_.r_last = r_last_;
        pins_.r_id = r_id_;
        std::memcpy(bytes_of(pins_.r_data), r_data_, BEAT);
        pins_.aw_ready = aw_.count != DEPTH;
        pins_.w_ready = aw_.count != 0 && b_.count != DEPTH;
        pins_.b_valid = b_.count != 0;
        pins_.b_id = b_.id[b_.rd];
    }

  private:
    struct Queue {  // a ring of DEPTH requests
        uint8_t id[DEPTH] = {};
        uint32_t len[DEPTH] = {};
        uint64_t addr[DEPTH] = {};
        int rd = 0, wr = 0, count = 0;
        void push(uint8_t i, uint32_t l, uint64_t a) {
            id[wr] = i;
            len[wr] = l;
            addr[wr] = a;
            wr = (wr + 1) % DEPTH;
            ++count;
        }
        void pop() {
            rd = (rd + 1) % DEPTH;
            --count;
        }
    };

    void read_channel() {
        const bool push = pins_.ar_valid && ar_.count != DEPTH;
        const bool ready = pins_.r_ready;
        if (!r_valid_ || ready) {
            if (ar_.count != 0) {
                const uint64_t base = ar_.addr[ar_.rd] + uint64_t(rd_beat_) * BEAT;
                for (uint64_t w = 0; w < BEAT; w += 8)
                    std::memcpy(r_data_ + w, mem_ + nvdla_hil_mem_offset(base + w), 8);
                r_valid_ = true;
                r_id_ = ar_.id[ar_.rd];
                r_last_ = rd_beat_ == ar_.len[ar_.rd];
                if (r_last_) {
                    rd_beat_ = 0;
                    ar_.pop();
                } else {
                    ++rd_beat_;
                }
            } else {
                r_valid_ = r_last_ = false;
            }
        }
        if (push) ar_.push(pins_.ar_id, uint32_t(pins_.ar_len), uint64_t(pins_.ar_addr));
    }

    void write_channel() {
        const bool aw_push = pins_.aw_valid && aw_.count != DEPTH;
        const bool b_pop = b_.count != 0 && pins_.b_ready;
        const bool w_take = pins_.w_valid && aw_.count != 0 && b_.count != DEPTH;
        bool retire = false;
        if (w_take) {
            const uint64_t base = aw_.addr[aw_.rd] + uint64_t(wr_beat_) * BEAT;
            const uint8_t *data = bytes_of(pins_.w_data);
            const uint64_t strb = uint64_t(pins_.w_strb);
            for (uint64_t w = 0; w < BEAT; w += 8) {
                const unsigned s = unsigned(strb >> w) & 0xFF;
                uint8_t *p = mem_ + nvdla_hil_mem_offset(base + w);
                if (s == 0xFF) {
                    std::memcpy(p, data + w, 8);
                } else {
                    for (int i = 0; i < 8; i++)
                        if (s >> i & 1) p[i] = data[w + i];
                }
            }
            retire = pins_.w_last || wr_beat_ == aw_.len[aw_.rd];
            wr_beat_ = retire ? 0 : wr_beat_ + 1;
        }
        if (retire) {
            const uint8_t id = aw_.id[aw_.rd];
            aw_.pop();
            b_.push(id, 0, 0);
        }
        if (b_pop) b_.pop();
        if (aw_push) aw_.push(pins_.aw_id, uint32_t(pins_.aw_len), uint64_t(pins_.aw_addr));
    }

    AxiPins<LenT, AddrT, DataT, StrbT> pins_;
    uint8_t *mem_;
    Queue ar_, aw_, b_;
    uint32_t rd_beat_ = 0, wr_beat_ = 0;
    bool r_valid_ = false, r_last_ = false;
    uint8_t r_id_ = 0;
    uint8_t r_data_[BEAT];
};

template <class LenT, class AddrT, class DataT, class StrbT>
AxiMemory<LenT, AddrT, DataT, StrbT> *new_axi_memory(int port, const AxiPins<LenT, AddrT, DataT, StrbT> &pins) {
    return new AxiMemory<LenT, AddrT, DataT, StrbT>(port, pins);
}

}  // namespace nvdla_hil

//! The AxiPins of the top's ports named PREFIX##ar_valid ... PREFIX##b_id.
#define NVDLA_HIL_AXI_PORT(top, P)                                                             \
    nvdla_hil::AxiPins<decltype((top)->P##ar_len), decltype((top)->P##ar_addr),              \
                       decltype((top)->P##r_data), decltype((top)->P##w_strb)> {              \
        (top)->P##ar_valid, (top)->P##ar_ready, (top)->P##ar_id, (top)->P##ar_len,            \
        (top)->P##ar_addr, (top)->P##r_valid, (top)->P##r_ready, (top)->P##r_id,              \
        (top)->P##r_last, (top)->P##r_data, (top)->P##aw_valid, (top)->P##aw_ready,           \
        (top)->P##aw_id, (top)->P##aw_len, (top)->P##aw_addr, (top)->P##w_valid,             \
        (top)->P##w_ready, (top)->P##w_data, (top)->P##w_strb, (top)->P##w_last,              \
        (top)->P##b_valid, (top)->P##b_ready, (top)->P##b_id                                  \
    }
