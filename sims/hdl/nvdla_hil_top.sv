// nvdla-hil: thin simulation top around NV_nvdla (the NVDLA core from nvdla/hw).
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources.
// One clock drives both the core and the CSB clock; rstn drives both resets.
// The CSB port is driven by nvdla_hil_csb_master.sv, which the cocotb driver
// (nvdla_hil.sims.csb) asks for one access at a time through the host_* ports. DBBIF (and CVIF
// when the configuration has it, `define NVDLA_HIL_CVIF) are ports of this top, answered by the
// AXI memory that the simulator's main loop runs in C++ (nvdla_hil_axi_mem.h), as NVDLA's own
// C++ trace player does. clock_gating_off drives NV_nvdla's tmc2slcg_disable_clock_gating (its
// second-level clock gating, SLCG, off), held from time 0 by the testbench (sims/tb_server.py):
// low runs the RTL as NVDLA ships it and as NVDLA's own player does.
`include "nvdla_hil_ports.svh"

module nvdla_hil_top #(
    parameter int DBB_DW = 64,
    parameter int DBB_AW = 32,
    parameter int DBB_LW = 4,
    parameter int CVIF_DW = 64,
    parameter int CVIF_AW = 32,
    parameter int CVIF_LW = 4
) (
    `NVDLA_HIL_HOST_PORTS,
    input logic clock_gating_off,
    `NVDLA_HIL_AXI_PORTS(dbb_, DBB_DW, DBB_AW, DBB_LW)  // DBBIF
`ifdef NVDLA_HIL_CVIF
    , `NVDLA_HIL_AXI_PORTS(cv_, CVIF_DW, CVIF_AW, CVIF_LW)  // CVIF (on-chip SRAM port)
`endif
);
    `NVDLA_HIL_CSB_MASTER

    NV_nvdla u_nvdla (
        .dla_core_clk                  (clk),
        .dla_csb_clk                   (clk),
        .global_clk_ovr_on             (1'b0),
        .tmc2slcg_disable_clock_gating (clock_gating_off),
        .dla_reset_rstn                (rstn),
        .direct_reset_                 (rstn),
        .test_mode                     (1'b0),
        .csb2nvdla_valid               (csb_valid),
        .csb2nvdla_ready               (csb_ready),
        .csb2nvdla_addr                (csb_addr),
        .csb2nvdla_wdat                (csb_wdat),
        .csb2nvdla_write               (csb_write),
        .csb2nvdla_nposted             (csb_nposted),
        .nvdla2csb_valid               (csb_rvalid),
        .nvdla2csb_data                (csb_rdata),
        .nvdla2csb_wr_complete         (csb_wr_complete),
        .nvdla_core2dbb_aw_awvalid     (dbb_aw_valid),
        .nvdla_core2dbb_aw_awready     (dbb_aw_ready),
        .nvdla_core2dbb_aw_awid        (dbb_aw_id),
        .nvdla_core2dbb_aw_awlen       (dbb_aw_len),
        .nvdla_core2dbb_aw_awaddr      (dbb_aw_addr),
        .nvdla_core2dbb_w_wvalid       (dbb_w_valid),
        .nvdla_core2dbb_w_wready       (dbb_w_ready),
        .nvdla_core2dbb_w_wdata        (dbb_w_data),
        .nvdla_core2dbb_w_wstrb        (dbb_w_strb),
        .nvdla_core2dbb_w_wlast        (dbb_w_last),
        .nvdla_core2dbb_ar_arvalid     (dbb_ar_valid),
        .nvdla_core2dbb_ar_arready     (dbb_ar_ready),
        .nvdla_core2dbb_ar_arid        (dbb_ar_id),
        .nvdla_core2dbb_ar_arlen       (dbb_ar_len),
        .nvdla_core2dbb_ar_araddr      (dbb_ar_addr),
        .nvdla_core2dbb_b_bvalid       (dbb_b_valid),
        .nvdla_core2dbb_b_bready       (dbb_b_ready),
        .nvdla_core2dbb_b_bid          (dbb_b_id),
        .nvdla_core2dbb_r_rvalid       (dbb_r_valid),
        .nvdla_core2dbb_r_rready       (dbb_r_ready),
        .nvdla_core2dbb_r_rid          (dbb_r_id),
        .nvdla_core2dbb_r_rlast        (dbb_r_last),
        .nvdla_core2dbb_r_rdata        (dbb_r_data),
`ifdef NVDLA_HIL_CVIF
        .nvdla_core2cvsram_aw_awvalid  (cv_aw_valid),
        .nvdla_core2cvsram_aw_awready  (cv_aw_ready),
        .nvdla_core2cvsram_aw_awid     (cv_aw_id),
        .nvdla_core2cvsram_aw_awlen    (cv_aw_len),
        .nvdla_core2cvsram_aw_awaddr   (cv_aw_addr),
        .nvdla_core2cvsram_w_wvalid    (cv_w_valid),
        .nvdla_core2cvsram_w_wready    (cv_w_ready),
        .nvdla_core2cvsram_w_wdata     (cv_w_data),
        .nvdla_core2cvsram_w_wstrb     (cv_w_strb),
        .nvdla_core2cvsram_w_wlast     (cv_w_last),
        .nvdla_core2cvsram_ar_arvalid  (cv_ar_valid),
        .nvdla_core2cvsram_ar_arready  (cv_ar_ready),
        .nvdla_core2cvsram_ar_arid     (cv_ar_id),
        .nvdla_core2cvsram_ar_arlen    (cv_ar_len),
        .nvdla_core2cvsram_ar_araddr   (cv_ar_addr),
        .nvdla_core2cvsram_b_bvalid    (cv_b_valid),
        .nvdla_core2cvsram_b_bready    (cv_b_ready),
        .nvdla_core2cvsram_b_bid       (cv_b_id),
        .nvdla_core2cvsram_r_rvalid    (cv_r_valid),
        .nvdla_core2cvsram_r_rready    (cv_r_ready),
        .nvdla_core2cvsram_r_rid       (cv_r_id),
        .nvdla_core2cvsram_r_rlast     (cv_r_last),
        .nvdla_core2cvsram_r_rdata     (cv_r_data),
`endif
        .dla_intr                      (intr),
        .nvdla_pwrbus_ram_c_pd         (32'd0),
        .nvdla_pwrbus_ram_ma_pd        (32'd0),
        .nvdla_pwrbus_ram_mb_pd        (32'd0),
        .nvdla_pwrbus_ram_p_pd         (32'd0),
        .nvdla_pwrbus_ram_o_pd         (32'd0),
        .nvdla_pwrbus_ram_a_pd         (32'd0)
    );

endmodule
