// nvdla-hil: self-test fixture speaking NVDLA's CSB protocol (no NVDLA code).
//
// Written for nvdla-hil (Apache-2.0). Lets CI exercise the cocotb CSB driver, the AXI memory
// model with its shared-memory backdoor, the interrupt line and the build cache without an
// nvdla/hw checkout. Same ports as nvdla_hil_top (host_* to the same HDL CSB master; the copy
// engine's AXI master on dbb_*, answered by the main loop's memory, nvdla_hil_axi_mem.h).
//
// Register map (CSB byte address; the bus carries byte >> 2):
//   0x00 ID         RO  0x4C555431
//   0x04 SCRATCH    RW
//   0x08 LUT_CFG    RW  [9:0] index, [16] table (0: 65 entries, 1: 257 entries)
//   0x0C LUT_DATA   RW  [15:0] entry at (table, index); every access increments index
//   0x10 DMA_SRC    RW  byte address (8-byte aligned)
//   0x14 DMA_DST    RW
//   0x18 DMA_LEN    RW  number of 8-byte beats to copy
//   0x1C DMA_GO     WO  write 1: copy DMA_LEN beats SRC -> DST in bursts of <= 16 beats
//   0x20 INTR_STATUS RW1C [0] copy done
//   0x24 INTR_MASK  RW  [0] 1 = masked
//   0x28 DMA_BUSY   RO  [0]
//   0x2C HANG       WO  [0] 1 = ready stays low, [1] 1 = reads are never answered (until reset)
// The slave stalls requests (ready low) on a pseudo-random pattern and answers reads after
// 1..4 cycles, so the driver's handshakes are exercised.
`include "nvdla_hil_ports.svh"

module nvdla_hil_fixture_top (
    `NVDLA_HIL_HOST_PORTS,
    `NVDLA_HIL_AXI_PORTS(dbb_, 64, 32, 4)  // the copy engine's port
);
    `NVDLA_HIL_CSB_MASTER
    logic [15:0] lfsr;
    logic [31:0] scratch, dma_src, dma_dst, dma_len;
    logic [16:0] lut_cfg;
    logic [9:0]  lut_idx;
    logic [15:0] lut_le [65];
    logic [15:0] lut_lo [257];
    logic        st_done, mask_done;
    logic [2:0]  rd_wait;
    logic        rd_pending, wc_pending;
    logic [31:0] rd_value;
    logic        go;
    logic        hang_ready, mute_reads;

    // DMA state (declared early for readback)
    typedef enum logic [2:0] {IDLE, AR, R, AW, W, B} dstate_t;
    dstate_t     dstate;

    assign csb_ready = rstn && !hang_ready && !rd_pending && !wc_pending && lfsr[0];
    assign intr = st_done && !mask_done;

    function automatic logic [15:0] lut_get(input logic tbl, input logic [9:0] idx);
        if (tbl) return (idx < 257) ? lut_lo[idx] : 16'h0;
        return (idx < 65) ? lut_le[idx[6:0]] : 16'h0;
    endfunction

    wire take = csb_valid && csb_ready;
    wire [7:0] reg_off = {csb_addr[5:0], 2'b00};

    always_ff @(posedge clk) begin
        if (!rstn) begin
            lfsr <= 16'hACE1;
            scratch <= '0; dma_src <= '0; dma_dst <= '0; dma_len <= '0;
            lut_cfg <= '0; lut_idx <= '0; mask_done <= 1'b0;
            rd_wait <= '0; rd_pending <= 1'b0; wc_pending <= 1'b0; rd_value <= '0;
            csb_rvalid <= 1'b0; csb_rdata <= '0; csb_wr_complete <= 1'b0; go <= 1'b0;
            hang_ready <= 1'b0; mute_reads <= 1'b0;
        end else begin
            lfsr <= {lfsr[14:0], lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10]};
            csb_rvalid <= 1'b0;
            csb_wr_complete <= 1'b0;
            go <= 1'b0;
            if (rd_pending && !mute_reads) begin
                if (rd_wait == 0) begin
                    csb_rvalid <= 1'b1;
                    csb_rdata <= rd_value;
                    rd_pending <= 1'b0;
                end else rd_wait <= rd_wait - 1'b1;
            end
            if (wc_pending) begin
                csb_wr_complete <= 1'b1;
                wc_pending <= 1'b0;
            end
            if (take && csb_write) begin
                wc_pending <= csb_nposted;
                case (reg_off)
                    8'h04: scratch <= csb_wdat;
                    8'h08: begin lut_cfg <= {csb_wdat[16], 6'b0, csb_wdat[9:0]}; lut_idx <= csb_wdat[9:0]; end
                    8'h0C: begin
                        if (lut_cfg[16]) begin if (lut_idx < 257) lut_lo[lut_idx] <= csb_wdat[15:0]; end
                        else if (lut_idx < 65) lut_le[lut_idx[6:0]] <= csb_wdat[15:0];
                        lut_idx <= lut_idx + 1'b1;
                    end
                    8'h10: dma_src <= csb_wdat;
                    8'h14: dma_dst <= csb_wdat;
                    8'h18: dma_len <= csb_wdat;
                    8'h1C: go <= csb_wdat[0];
                    8'h24: mask_done <= csb_wdat[0];
                    8'h2C: begin hang_ready <= csb_wdat[0]; mute_reads <= csb_wdat[1]; end
                    default: ;
                endcase
            end else if (take) begin
                rd_pending <= 1'b1;
                rd_wait <= {1'b0, lfsr[2:1]};
                case (reg_off)
                    8'h00: rd_value <= 32'h4C555431;
                    8'h04: rd_value <= scratch;
                    8'h08: rd_value <= {15'b0, lut_cfg};
                    8'h0C: begin rd_value <= {16'b0, lut_get(lut_cfg[16], lut_idx)}; lut_idx <= lut_idx + 1'b1; end
                    8'h10: rd_value <= dma_src;
                    8'h14: rd_value <= dma_dst;
                    8'h18: rd_value <= dma_len;
                    8'h20: rd_value <= {31'b0, st_done};
                    8'h24: rd_value <= {31'b0, mask_done};
                    8'h28: rd_value <= {31'b0, dstate != IDLE};
                    default: rd_value <= 32'hDEAD_0000 | {16'b0, reg_off, 8'b0};
                endcase
            end
        end
    end

    // ---------------- copy engine on an AXI port -----------------
    logic ar_valid, ar_ready, r_valid, r_ready, r_last;
    logic aw_valid, aw_ready, w_valid, w_ready, w_last, b_valid, b_ready;
    logic [7:0] r_id, b_id;
    logic [3:0] blen;
    logic [31:0] src, dst, left;
    logic [63:0] buf_q [16];
    logic [3:0] bi;
    logic [63:0] r_data;

    always_ff @(posedge clk) begin
        if (!rstn) begin
            dstate <= IDLE; st_done <= 1'b0; src <= '0; dst <= '0; left <= '0; blen <= '0; bi <= '0;
        end else begin
            if (take && csb_write && reg_off == 8'h20 && csb_wdat[0]) st_done <= 1'b0;
            case (dstate)
                IDLE: if (go) begin
                    src <= dma_src; dst <= dma_dst; left <= dma_len;
                    dstate <= (dma_len == 0) ? IDLE : AR;
                    if (dma_len == 0) st_done <= 1'b1;
                end
                AR: begin
                    blen <= (left > 16) ? 4'd15 : 4'(left - 1);
                    if (ar_valid && ar_ready) begin dstate <= R; bi <= '0; end
                end
                R: if (r_valid && r_ready) begin
                    buf_q[bi] <= r_data;
                    bi <= bi + 1'b1;
                    if (r_last) dstate <= AW;
                end
                AW: if (aw_valid && aw_ready) begin dstate <= W; bi <= '0; end
                W: if (w_valid && w_ready) begin
                    bi <= bi + 1'b1;
                    if (w_last) dstate <= B;
                end
                B: if (b_valid && b_ready) begin
                    src <= src + ({28'b0, blen} + 1) * 8;
                    dst <= dst + ({28'b0, blen} + 1) * 8;
                    left <= left - ({28'b0, blen} + 1);
                    if (left == {28'b0, blen} + 1) begin dstate <= IDLE; st_done <= 1'b1; end
                    else dstate <= AR;
                end
                default: dstate <= IDLE;
            endcase
        end
    end
    wire [3:0] cur_len = (left > 16) ? 4'd15 : 4'(left - 1);
    assign ar_valid = (dstate == AR);
    assign r_ready = (dstate == R);
    assign aw_valid = (dstate == AW);
    assign w_valid = (dstate == W);
    assign w_last = (dstate == W) && (bi == blen);
    assign b_ready = (dstate == B);

    assign dbb_ar_valid = ar_valid; assign ar_ready = dbb_ar_ready; assign dbb_ar_id = 8'd3;
    assign dbb_ar_len = cur_len; assign dbb_ar_addr = src;
    assign r_valid = dbb_r_valid; assign dbb_r_ready = r_ready; assign r_id = dbb_r_id;
    assign r_last = dbb_r_last; assign r_data = dbb_r_data;
    assign dbb_aw_valid = aw_valid; assign aw_ready = dbb_aw_ready; assign dbb_aw_id = 8'd5;
    assign dbb_aw_len = blen; assign dbb_aw_addr = dst;
    assign dbb_w_valid = w_valid; assign w_ready = dbb_w_ready; assign dbb_w_data = buf_q[bi];
    assign dbb_w_strb = 8'hFF; assign dbb_w_last = w_last;
    assign b_valid = dbb_b_valid; assign dbb_b_ready = b_ready; assign b_id = dbb_b_id;
endmodule
