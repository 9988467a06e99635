/* The memory of mem.v written in C, edge for edge (every decision of a
 * clock edge reads the state before it), driving simfa through host.h:
 * the reference the Verilator run must match exactly. */
#include <string.h>

#include "host.h"

#define DEPTH 8

typedef struct {
    uint32_t f_id[DEPTH], f_bytes[DEPTH];
    uint8_t f_bank[DEPTH];
    unsigned head, tail, count;
    bool busy[4];
    uint64_t done_at[4];
    uint32_t bid[4];
    uint64_t t;
} Mem;

static bool mem_ready(void *self) {
    return ((Mem *)self)->count < DEPTH;
}

static bool mem_tick(void *self, bool valid, uint32_t id, uint64_t addr, uint32_t bytes,
                     uint32_t *answered) {
    Mem *m = (Mem *)self;
    Mem old = *m;
    bool found = false;
    for (int b = 0; b < 4; b++) {
        if (old.busy[b] && old.done_at[b] <= old.t) {
            found = true;
            *answered = old.bid[b];
            m->busy[b] = false;
            break;
        }
    }
    unsigned pop = 0, push = 0;
    uint8_t hb = old.f_bank[old.head];
    if (old.count != 0 && !old.busy[hb]) {
        pop = 1;
        m->busy[hb] = true;
        m->bid[hb] = old.f_id[old.head];
        m->done_at[hb] = old.t + (uint64_t)((old.f_bytes[old.head] + 31u) >> 5) + 20 + 8u * hb;
        m->head = (old.head + 1) % DEPTH;
    }
    if (valid && old.count < DEPTH) {
        push = 1;
        m->f_id[old.tail] = id;
        m->f_bank[old.tail] = (uint8_t)((addr >> 7) & 3);
        m->f_bytes[old.tail] = bytes;
        m->tail = (old.tail + 1) % DEPTH;
    }
    m->count = old.count - pop + push;
    m->t = old.t + 1;
    return found;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    uint32_t samples[] = {0, 3};
    for (unsigned k = 0; k < 2; k++) {
        Mem m;
        memset(&m, 0, sizeof m);
        Memory mem = {mem_ready, mem_tick, &m};
        if (host_run(samples[k], &mem) != 0) {
            return 1;
        }
    }
    return 0;
}
