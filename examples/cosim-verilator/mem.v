// A small memory for co-simulation: a request FIFO in front of four banks,
// each with its own latency, behind a 32-byte-per-cycle bus. A request
// goes to bank (addr >> 7) & 3, holds it for ceil(bytes / 32) cycles of
// transfer plus the bank's latency (20 + 8 * bank cycles), and then
// answers with its id; one answer per cycle, lowest bank first. Requests
// leave the FIFO in order (a busy bank blocks the head).
//
// Every decision of a clock edge reads the state before the edge; model.c
// in this directory is the same machine written in C, edge for edge.
/* verilator lint_off BLKSEQ */
// (The blocking assignments below are the edge's local temporaries.)
module mem #(
    parameter DEPTH = 8
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        req_valid,
    output wire        req_ready,
    input  wire [31:0] req_id,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [63:0] req_addr,  // only bits 8:7, the bank, matter here
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [31:0] req_bytes,
    output reg         resp_valid,
    output reg  [31:0] resp_id
);
    reg [31:0] f_id[0:DEPTH-1];
    reg [1:0] f_bank[0:DEPTH-1];
    reg [31:0] f_bytes[0:DEPTH-1];
    reg [2:0] head, tail;
    reg [3:0] count;
    reg busy[0:3];
    reg [63:0] done_at[0:3];
    reg [31:0] bid[0:3];
    reg [63:0] t;

    assign req_ready = count < DEPTH;

    integer i;
    reg found;
    reg [1:0] rb;
    reg pop, push;
    reg [1:0] hb;

    always @(posedge clk) begin
        if (rst) begin
            head <= 0;
            tail <= 0;
            count <= 0;
            t <= 0;
            resp_valid <= 0;
            resp_id <= 0;
            for (i = 0; i < 4; i = i + 1) begin
                busy[i] <= 0;
                done_at[i] <= 0;
                bid[i] <= 0;
            end
        end else begin
            // Answer: the lowest finished bank.
            found = 0;
            rb = 0;
            for (i = 0; i < 4; i = i + 1) begin
                if (!found && busy[i] && done_at[i] <= t) begin
                    found = 1;
                    rb = i[1:0];
                end
            end
            resp_valid <= found;
            if (found) begin
                resp_id <= bid[rb];
                busy[rb] <= 0;
            end
            // Dispatch the FIFO's head to its bank when that bank is idle.
            pop = 0;
            hb = f_bank[head];
            if (count != 0 && !busy[hb]) begin
                pop = 1;
                busy[hb] <= 1;
                bid[hb] <= f_id[head];
                done_at[hb] <= t + {32'd0, (f_bytes[head] + 32'd31) >> 5} + 64'd20 + 64'd8 * {62'd0, hb};
                head <= head + 1;
            end
            // Take a request while there is room.
            push = 0;
            if (req_valid && count < DEPTH) begin
                push = 1;
                f_id[tail] <= req_id;
                f_bank[tail] <= req_addr[8:7];
                f_bytes[tail] <= req_bytes;
                tail <= tail + 1;
            end
            count <= count - {3'd0, pop} + {3'd0, push};
            t <= t + 1;
        end
    end
endmodule
