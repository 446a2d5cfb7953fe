// nvdla-hil: CSB master in HDL, so the testbench runs Python once per register access, not
// once per clock cycle of it.
//
// Written for nvdla-hil (Apache-2.0); not derived from NVDLA sources. The CSB protocol as the
// NV_nvdla ports implement it (the facts are in sims/csb.py's docstring): the master holds
// `valid` with `addr` (word address), `wdat`, `write`, `nposted`; the request is taken at a
// rising edge with `valid` and `ready` high; a read is answered later by a one-cycle pulse of
// `rvalid` with `rdata`, a non-posted write by a one-cycle pulse of `wr_complete`; posted
// writes have no answer. One request is outstanding at a time.
//
// Host side (driven by cocotb, sims/csb.py): set host_addr/host_wdat/host_write/host_nposted,
// then toggle host_req. The master issues the request at the next rising edge, and when the
// access is over sets host_rdata and host_err and makes host_ack equal host_req again (the
// one value change Python waits for). host_err: 0 done, 1 the request was not accepted within
// host_timeout cycles (ready stuck low), 2 no response within host_timeout cycles after it was.
module nvdla_hil_csb_master (
    input  logic        clk,
    input  logic        rstn,
    input  logic        host_req,
    input  logic [15:0] host_addr,
    input  logic [31:0] host_wdat,
    input  logic        host_write,
    input  logic        host_nposted,
    input  logic [31:0] host_timeout,
    output logic        host_ack,
    output logic [31:0] host_rdata,
    output logic [1:0]  host_err,
    output logic        csb_valid,
    input  logic        csb_ready,
    output logic [15:0] csb_addr,
    output logic [31:0] csb_wdat,
    output logic        csb_write,
    output logic        csb_nposted,
    input  logic        csb_rvalid,
    input  logic [31:0] csb_rdata,
    input  logic        csb_wr_complete
);
    typedef enum logic [1:0] {IDLE, REQUEST, RESPONSE} state_t;
    state_t      state;
    logic [31:0] waited;

    always_ff @(posedge clk) begin
        if (!rstn) begin
            state <= IDLE;
            csb_valid <= 1'b0;
            csb_write <= 1'b0;
            csb_nposted <= 1'b0;
            csb_addr <= '0;
            csb_wdat <= '0;
            host_ack <= host_req;  // an access cut by reset is dropped, not answered
            host_err <= 2'd0;
            waited <= '0;
        end else begin
            case (state)
                IDLE: if (host_req != host_ack) begin
                    csb_valid <= 1'b1;
                    csb_addr <= host_addr;
                    csb_wdat <= host_wdat;
                    csb_write <= host_write;
                    csb_nposted <= host_nposted;
                    waited <= '0;
                    state <= REQUEST;
                end
                REQUEST: if (csb_ready) begin  // taken at this edge
                    csb_valid <= 1'b0;
                    waited <= '0;
                    if (csb_write && !csb_nposted) begin
                        host_err <= 2'd0;
                        host_ack <= host_req;
                        state <= IDLE;
                    end else begin
                        state <= RESPONSE;
                    end
                end else if (waited >= host_timeout) begin
                    csb_valid <= 1'b0;
                    host_err <= 2'd1;
                    host_ack <= host_req;
                    state <= IDLE;
                end else begin
                    waited <= waited + 1;
                end
                RESPONSE: if (csb_write ? csb_wr_complete : csb_rvalid) begin
                    host_rdata <= csb_rdata;
                    host_err <= 2'd0;
                    host_ack <= host_req;
                    state <= IDLE;
                end else if (waited >= host_timeout) begin
                    host_err <= 2'd2;
                    host_ack <= host_req;
                    state <= IDLE;
                end else begin
                    waited <= waited + 1;
                end
                default: state <= IDLE;
            endcase
        end
    end
endmodule
