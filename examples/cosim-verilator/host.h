/* The host side of the co-simulation, shared by the Verilator testbench
 * (tb.cpp, memory in RTL) and the C reference (model.c, the same memory in
 * C): one memory clock per simulator cycle. Each cycle the host runs simfa
 * up to the cycle, moves the requests it issued into a queue, offers the
 * oldest one that has left its TMA engine to the memory, clocks the memory
 * once, and completes the request the memory answered, one cycle later.
 * Valid C and C++. */
#ifndef COSIM_HOST_H
#define COSIM_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "simfa.h"

/* The memory under test: is there room for a request, and one clock edge
 * with a request offered (or not); returns whether it answered, and whom. */
typedef struct {
    bool (*ready)(void *self);
    bool (*tick)(void *self, bool valid, uint32_t id, uint64_t addr, uint32_t bytes,
                 uint32_t *answered);
    void *self;
} Memory;

static void host_check(SimfaStatus st, const char *what, SimfaSim *h) {
    if (st == SIMFA_STATUS_OK) {
        return;
    }
    char msg[256] = "";
    if (h != NULL) {
        simfa_last_error_message(h, (uint8_t *)msg, sizeof msg, NULL);
    }
    fprintf(stderr, "%s: %s %s\n", what, simfa_status_name((int32_t)st), msg);
    exit(1);
}

/* Runs sample `i` with memory = external against `mem`; prints
 * `sample <i> <cycles> <digest> <requests>`. */
static int host_run(uint32_t i, Memory *mem) {
    SimfaConfig cfg;
    host_check(simfa_config_sample(i, &cfg), "config_sample", NULL);
    host_check(simfa_config_set_memory(&cfg, SIMFA_MEMORY_EXTERNAL), "set_memory", NULL);
    size_t klen = 0;
    simfa_sample_kernel(i, NULL, 0, &klen);
    uint8_t *kernel = (uint8_t *)malloc(klen);
    host_check(simfa_sample_kernel(i, kernel, klen, &klen), "sample_kernel", NULL);
    size_t need = 0;
    host_check(simfa_arena_size(&cfg, kernel, klen, &need), "arena_size", NULL);
    size_t rounded = (need + SIMFA_MEM_ALIGN - 1) / SIMFA_MEM_ALIGN * SIMFA_MEM_ALIGN;
    uint8_t *arena = (uint8_t *)aligned_alloc(SIMFA_MEM_ALIGN, rounded);
    SimfaSim *h = NULL;
    host_check(simfa_init(arena, need, &cfg, kernel, klen, &h), "init", NULL);
    free(kernel);

    /* Requests issued and not yet taken by the memory, oldest first. */
    size_t cap = 64, len = 0, first = 0;
    SimfaExtRequest *q = (SimfaExtRequest *)malloc(cap * sizeof *q);
    uint64_t requests = 0;
    SimfaRunState state = SIMFA_RUN_STATE_RUNNING;
    for (uint64_t c = 0;; c++) {
        if (c > 100000000u) {
            fprintf(stderr, "sample %u: no end after %llu cycles\n", i, (unsigned long long)c);
            return 1;
        }
        host_check(simfa_run_until(h, c, &state), "run_until", h);
        if (state != SIMFA_RUN_STATE_RUNNING) {
            break;
        }
        for (;;) {
            SimfaExtRequest r;
            bool got = false;
            host_check(simfa_ext_pop_request(h, &r, &got), "ext_pop_request", h);
            if (!got) {
                break;
            }
            if (first + len == cap) {
                cap *= 2;
                q = (SimfaExtRequest *)realloc(q, cap * sizeof *q);
            }
            q[first + len++] = r;
            requests++;
        }
        bool offer = len > 0 && q[first].cycle <= c && mem->ready(mem->self);
        const SimfaExtRequest *head = offer ? &q[first] : NULL;
        uint32_t answered = 0;
        bool done = mem->tick(mem->self, offer, head ? head->id : 0, head ? head->addr : 0,
                              head ? (uint32_t)head->bytes : 0, &answered);
        if (offer) {
            first++;
            len--;
        }
        if (done) {
            host_check(simfa_ext_complete(h, answered, c + 1), "ext_complete", h);
        }
    }
    if (state != SIMFA_RUN_STATE_FINISHED) {
        host_check(SIMFA_STATUS_DEADLOCK, "run", h);
    }
    SimfaSummary s;
    host_check(simfa_summary(h, &s), "summary", h);
    printf("sample %u %llu %016llx %llu\n", i, (unsigned long long)s.cycles,
           (unsigned long long)s.digest, (unsigned long long)requests);
    free(q);
    free(arena);
    return 0;
}

#endif
