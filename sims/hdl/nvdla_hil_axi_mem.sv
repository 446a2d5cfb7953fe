// nvdla-hil: AXI4 slave memory for the DBBIF port(s) of NVDLA-style masters.
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources.
// Storage lives in C++ (nvdla_hil_mem.cpp) behind DPI: a shared-memory file the host
// process maps too, so bulk loads/reads are backdoor accesses without bus cycles.
// INCR bursts, beat size = DW, in-order responses; AWLEN/ARLEN up to 8 bits.
module nvdla_hil_axi_mem #(
    parameter int DW = 64,          // data width in bits (multiple of 64)
    parameter int IDW = 8,          // id width
    parameter int LW = 4,           // len width (AXI3-style 4, AXI4 8)
    parameter int AW = 64,          // address width as driven by the master
    parameter int PORT = 0,         // backing store index (0 = pri_mem, 1 = sec_mem)
    parameter int DEPTH = 8         // outstanding requests per channel
) (
    input  logic           clk,
    input  logic           rstn,
    // read address
    input  logic           ar_valid,
    output logic           ar_ready,
    input  logic [IDW-1:0] ar_id,
    input  logic [LW-1:0]  ar_len,
    input  logic [AW-1:0]  ar_addr,
    // read data
    output logic           r_valid,
    input  logic           r_ready,
    output logic [IDW-1:0] r_id,
    output logic           r_last,
    output logic [DW-1:0]  r_data,
    // write address
    input  logic           aw_valid,
    output logic           aw_ready,
    input  logic [IDW-1:0] aw_id,
    input  logic [LW-1:0]  aw_len,
    input  logic [AW-1:0]  aw_addr,
    // write data
    input  logic           w_valid,
    output logic           w_ready,
    input  logic [DW-1:0]  w_data,
    input  logic [DW/8-1:0] w_strb,
    input  logic           w_last,
    // write response
    output logic           b_valid,
    input  logic           b_ready,
    output logic [IDW-1:0] b_id
);
    import "DPI-C" function longint unsigned nvdla_hil_mem_rd64(input int port, input longint unsigned addr);
    import "DPI-C" function void nvdla_hil_mem_wr64(input int port, input longint unsigned addr,
                                                    input longint unsigned data, input byte unsigned strb);

    localparam int NB = DW / 8;          // bytes per beat
    localparam int NW = DW / 64;         // 64-bit words per beat
    localparam int PW = $clog2(DEPTH);

    // ---------------- read channel -----------------
    logic [IDW-1:0] arq_id   [DEPTH];
    logic [LW-1:0]  arq_len  [DEPTH];
    logic [63:0]    arq_addr [DEPTH];
    logic [PW-1:0]  arq_wp, arq_rp;
    logic [PW:0]    arq_cnt;
    logic [LW-1:0]  rd_beat;

    assign ar_ready = (arq_cnt != DEPTH[PW:0]);

    function automatic logic [DW-1:0] read_beat(input logic [63:0] a);
        logic [DW-1:0] d;
        for (int i = 0; i < NW; i++) d[i*64 +: 64] = nvdla_hil_mem_rd64(PORT, a + 64'(i * 8));
        return d;
    endfunction

    always_ff @(posedge clk) begin
        if (!rstn) begin
            arq_wp <= '0; arq_rp <= '0; arq_cnt <= '0; rd_beat <= '0;
            r_valid <= 1'b0; r_last <= 1'b0; r_id <= '0; r_data <= '0;
        end else begin
            logic push, pop;
            push = ar_valid && ar_ready;
            pop = 1'b0;
            if (push) begin
                arq_id[arq_wp] <= ar_id;
                arq_len[arq_wp] <= ar_len;
                arq_addr[arq_wp] <= 64'(ar_addr);
                arq_wp <= arq_wp + 1'b1;
            end
            if (!r_valid || r_ready) begin
                if (arq_cnt != 0) begin
                    r_valid <= 1'b1;
                    r_id <= arq_id[arq_rp];
                    r_data <= read_beat(arq_addr[arq_rp] + 64'(rd_beat) * 64'(NB));
                    r_last <= (rd_beat == arq_len[arq_rp]);
                    if (rd_beat == arq_len[arq_rp]) begin
                        rd_beat <= '0;
                        arq_rp <= arq_rp + 1'b1;
                        pop = 1'b1;
                    end else begin
                        rd_beat <= rd_beat + 1'b1;
                    end
                end else begin
                    r_valid <= 1'b0;
                    r_last <= 1'b0;
                end
            end
            arq_cnt <= arq_cnt + (PW+1)'(push) - (PW+1)'(pop);
        end
    end

    // ---------------- write channel -----------------
    logic [IDW-1:0] awq_id   [DEPTH];
    logic [LW-1:0]  awq_len  [DEPTH];
    logic [63:0]    awq_addr [DEPTH];
    logic [PW-1:0]  awq_wp, awq_rp;
    logic [PW:0]    awq_cnt;
    logic [LW-1:0]  wr_beat;
    logic [IDW-1:0] bq_id [DEPTH];
    logic [PW-1:0]  bq_wp, bq_rp;
    logic [PW:0]    bq_cnt;

    assign aw_ready = (awq_cnt != DEPTH[PW:0]);
    assign w_ready = (awq_cnt != 0) && (bq_cnt != DEPTH[PW:0]);
    assign b_valid = (bq_cnt != 0);
    assign b_id = bq_id[bq_rp];

    always_ff @(posedge clk) begin
        if (!rstn) begin
            awq_wp <= '0; awq_rp <= '0; awq_cnt <= '0; wr_beat <= '0;
            bq_wp <= '0; bq_rp <= '0; bq_cnt <= '0;
        end else begin
            logic aw_push, aw_pop, b_push, b_pop;
            aw_push = aw_valid && aw_ready;
            aw_pop = 1'b0;
            b_pop = b_valid && b_ready;
            b_push = 1'b0;
            if (aw_push) begin
                awq_id[awq_wp] <= aw_id;
                awq_len[awq_wp] <= aw_len;
                awq_addr[awq_wp] <= 64'(aw_addr);
                awq_wp <= awq_wp + 1'b1;
            end
            if (w_valid && w_ready) begin
                logic [63:0] a;
                a = awq_addr[awq_rp] + 64'(wr_beat) * 64'(NB);
                for (int i = 0; i < NW; i++)
                    nvdla_hil_mem_wr64(PORT, a + 64'(i * 8), w_data[i*64 +: 64], w_strb[i*8 +: 8]);
                if (w_last || wr_beat == awq_len[awq_rp]) begin
                    wr_beat <= '0;
                    awq_rp <= awq_rp + 1'b1;
                    aw_pop = 1'b1;
                    bq_id[bq_wp] <= awq_id[awq_rp];
                    bq_wp <= bq_wp + 1'b1;
                    b_push = 1'b1;
                end else begin
                    wr_beat <= wr_beat + 1'b1;
                end
            end
            if (b_pop) bq_rp <= bq_rp + 1'b1;
            awq_cnt <= awq_cnt + (PW+1)'(aw_push) - (PW+1)'(aw_pop);
            bq_cnt <= bq_cnt + (PW+1)'(b_push) - (PW+1)'(b_pop);
        end
    end
endmodule
