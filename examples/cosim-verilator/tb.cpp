// The Verilator testbench: clocks mem.v once per simulator cycle and
// serves simfa's external memory port from it through host.h. Prints the
// same lines as model.c, which must match exactly.
#include <memory>

#include "Vmem.h"
#include "verilated.h"

extern "C" {
#include "host.h"
}

struct Rtl {
    Vmem *top;
};

static bool rtl_ready(void *self) {
    return static_cast<Rtl *>(self)->top->req_ready;
}

static bool rtl_tick(void *self, bool valid, uint32_t id, uint64_t addr, uint32_t bytes,
                     uint32_t *answered) {
    Vmem *top = static_cast<Rtl *>(self)->top;
    top->req_valid = valid;
    top->req_id = id;
    top->req_addr = addr;
    top->req_bytes = bytes;
    top->clk = 1;
    top->eval();
    top->clk = 0;
    top->eval();
    *answered = top->resp_id;
    return top->resp_valid;
}

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    uint32_t samples[] = {0, 3};
    for (uint32_t s : samples) {
        auto top = std::make_unique<Vmem>();
        top->rst = 1;
        top->clk = 0;
        top->eval();
        top->clk = 1;
        top->eval();
        top->clk = 0;
        top->eval();
        top->rst = 0;
        top->eval();
        Rtl rtl{top.get()};
        Memory mem = {rtl_ready, rtl_tick, &rtl};
        if (host_run(s, &mem) != 0) {
            return 1;
        }
        top->final();
    }
    return 0;
}
