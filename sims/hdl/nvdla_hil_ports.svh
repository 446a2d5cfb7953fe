// nvdla-hil: what every simulation top (nvdla_hil_top.sv, nvdla_hil_fixture.sv) shares.
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources.
`ifndef NVDLA_HIL_PORTS_SVH
`define NVDLA_HIL_PORTS_SVH

// The ports the testbench drives or watches: the clock (toggled by the main loop,
// nvdla_hil_main.cpp), reset, the host side of the HDL CSB master (sims/csb.py), the
// interrupt, and host_run_*: a run of whole clock cycles the main loop makes without VPI work
// (cocotb writes host_run_cycles, and host_run_irq to stop at the interrupt; the loop toggles
// host_run_ack when the run is over; the design does not use them).
`define NVDLA_HIL_HOST_PORTS \
    input  logic        clk, \
    input  logic        rstn, \
    input  logic        host_req, \
    input  logic [15:0] host_addr, \
    input  logic [31:0] host_wdat, \
    input  logic        host_write, \
    input  logic        host_nposted, \
    input  logic [31:0] host_timeout, \
    output logic        host_ack, \
    output logic [31:0] host_rdata, \
    output logic [1:0]  host_err, \
    output logic        intr, \
    input  logic [31:0] host_run_cycles, \
    input  logic        host_run_irq, \
    input  logic        host_run_ack

// One AXI master's port toward the memory that the main loop answers in C++
// (nvdla_hil_axi_mem.h; the C++ side names the same ports, NVDLA_HIL_AXI_PORT): P is the
// prefix (dbb_, cv_), DW/AW/LW the data, address and burst-length widths, ids 8 bits.
`define NVDLA_HIL_AXI_PORTS(P, DW, AW, LW) \
    output logic P``ar_valid, input logic P``ar_ready, output logic [7:0] P``ar_id, \
    output logic [LW-1:0] P``ar_len, output logic [AW-1:0] P``ar_addr, \
    input logic P``r_valid, output logic P``r_ready, input logic [7:0] P``r_id, \
    input logic P``r_last, input logic [DW-1:0] P``r_data, \
    output logic P``aw_valid, input logic P``aw_ready, output logic [7:0] P``aw_id, \
    output logic [LW-1:0] P``aw_len, output logic [AW-1:0] P``aw_addr, \
    output logic P``w_valid, input logic P``w_ready, output logic [DW-1:0] P``w_data, \
    output logic [DW/8-1:0] P``w_strb, output logic P``w_last, \
    input logic P``b_valid, output logic P``b_ready, input logic [7:0] P``b_id

// The HDL CSB master (nvdla_hil_csb_master.sv) on the host_* ports, and the csb_* wires to
// the slave (NV_nvdla, or the fixture's register block).
`define NVDLA_HIL_CSB_MASTER \
    logic        csb_valid, csb_ready, csb_write, csb_nposted, csb_rvalid, csb_wr_complete; \
    logic [15:0] csb_addr; \
    logic [31:0] csb_wdat, csb_rdata; \
    nvdla_hil_csb_master u_csb_master ( \
        .clk(clk), .rstn(rstn), \
        .host_req(host_req), .host_addr(host_addr), .host_wdat(host_wdat), .host_write(host_write), \
        .host_nposted(host_nposted), .host_timeout(host_timeout), .host_ack(host_ack), \
        .host_rdata(host_rdata), .host_err(host_err), \
        .csb_valid(csb_valid), .csb_ready(csb_ready), .csb_addr(csb_addr), .csb_wdat(csb_wdat), \
        .csb_write(csb_write), .csb_nposted(csb_nposted), .csb_rvalid(csb_rvalid), \
        .csb_rdata(csb_rdata), .csb_wr_complete(csb_wr_complete) \
    );

`endif
