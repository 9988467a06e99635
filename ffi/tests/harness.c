/* The C side of tests/c_harness.rs: runs every sample kernel through the C
 * ABI, as an embedding host would, and prints one line per sample:
 *
 *     sample <i> <cycles> <digest as 16 hex digits>
 *
 * Each run is also saved half-way, finished, restored and finished again:
 * the restored run must end with the same cycles and digest.
 *
 * Then every sample again with memory = external, served by a small C
 * model that mirrors the fixed port (per-SM serialisation at the port's
 * bytes per cycle, then its latency):
 *
 *     external <i> <cycles> <digest> <tma_ops> <bytes_loaded> <bytes_stored>
 * Any failed call prints the status and message and exits 1. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simfa.h"

static void check(SimfaStatus st, const char *what, SimfaSim *h) {
    if (st == SIMFA_STATUS_OK) {
        return;
    }
    char msg[256] = "";
    if (h != NULL) {
        simfa_last_error_message(h, (uint8_t *)msg, sizeof msg, NULL);
    }
    fprintf(stderr, "%s: %s (%d) %s\n", what, simfa_status_name((int32_t)st), (int)st, msg);
    exit(1);
}

static void *alloc_aligned(size_t n) {
    size_t rounded = (n + SIMFA_MEM_ALIGN - 1) / SIMFA_MEM_ALIGN * SIMFA_MEM_ALIGN;
    void *p = aligned_alloc(SIMFA_MEM_ALIGN, rounded);
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static SimfaRunState run_to_end(SimfaSim *h) {
    SimfaRunState state = SIMFA_RUN_STATE_RUNNING;
    while (state == SIMFA_RUN_STATE_RUNNING) {
        check(simfa_step(h, &state), "step", h);
    }
    return state;
}

/* Builds sample i's kernel on cfg inside a fresh aligned arena, returned
 * through *mem_out for the caller to free. */
static SimfaSim *start_sample(uint32_t i, const SimfaConfig *cfg, uint8_t **mem_out) {
    size_t klen = 0;
    simfa_sample_kernel(i, NULL, 0, &klen);
    uint8_t *kernel = malloc(klen);
    check(simfa_sample_kernel(i, kernel, klen, &klen), "sample_kernel", NULL);
    size_t need = 0;
    check(simfa_arena_size(cfg, kernel, klen, &need), "arena_size", NULL);
    uint8_t *mem = alloc_aligned(need);
    SimfaSim *h = NULL;
    check(simfa_init(mem, need, cfg, kernel, klen, &h), "init", NULL);
    free(kernel); /* decoded into mem: the bytes are no longer needed */
    *mem_out = mem;
    return h;
}

static int run_sample(uint32_t i) {
    SimfaConfig cfg;
    check(simfa_config_sample(i, &cfg), "config_sample", NULL);

    /* The size query: a null buffer of length 0 reports the size needed. */
    size_t klen = 0;
    if (simfa_sample_kernel(i, NULL, 0, &klen) != SIMFA_STATUS_BUFFER_TOO_SMALL) {
        fprintf(stderr, "size query did not report BUFFER_TOO_SMALL\n");
        return 1;
    }
    uint8_t *mem = NULL;
    SimfaSim *h = start_sample(i, &cfg, &mem);

    /* Half-way: the number of steps of a first run would do, but any
     * point works; use the first event at or after cycle 2000. */
    SimfaRunState state;
    check(simfa_run_until(h, 2000, &state), "run_until", h);
    size_t snap_cap = 0;
    check(simfa_snapshot_size(h, &snap_cap), "snapshot_size", h);
    uint8_t *snap = malloc(snap_cap);
    size_t snap_len = 0;
    check(simfa_save(h, snap, snap_cap, &snap_len), "save", h);

    run_to_end(h);
    SimfaSummary first;
    check(simfa_summary(h, &first), "summary", h);

    check(simfa_restore(h, snap, snap_len), "restore", h);
    run_to_end(h);
    SimfaSummary again;
    check(simfa_summary(h, &again), "summary", h);
    if (again.cycles != first.cycles || again.digest != first.digest) {
        fprintf(stderr, "sample %u: restored run differs\n", i);
        return 1;
    }
    uint64_t next = 0;
    check(simfa_next_event_cycle(h, &next), "next_event_cycle", h);
    if (next != SIMFA_NO_EVENT || first.ctas_retired != first.ctas_total) {
        fprintf(stderr, "sample %u: finished run still has work\n", i);
        return 1;
    }
    printf("sample %u %llu %016llx\n", i, (unsigned long long)first.cycles,
           (unsigned long long)first.digest);
    free(snap);
    free(mem);
    return 0;
}

/* The fixed port, as a host-side memory model. */
typedef struct {
    SimfaPortConfig cfg;
    uint64_t *free_at; /* per SM: the cycle its channel is free again */
} FixedModel;

static uint64_t fixed_model_answer(FixedModel *m, const SimfaExtRequest *r) {
    uint64_t num = m->cfg.bytes_num, den = m->cfg.bytes_den;
    uint64_t xfer = (r->bytes * den + num - 1) / num;
    uint64_t begin = r->cycle > m->free_at[r->sm] ? r->cycle : m->free_at[r->sm];
    m->free_at[r->sm] = begin + xfer;
    return begin + xfer + m->cfg.latency;
}

static int run_external(uint32_t i) {
    SimfaConfig cfg;
    check(simfa_config_sample(i, &cfg), "config_sample", NULL);
    check(simfa_config_set_memory(&cfg, SIMFA_MEMORY_EXTERNAL), "set_memory", NULL);
    FixedModel model;
    check(simfa_config_port(&cfg, &model.cfg), "config_port", NULL);
    model.free_at = calloc(model.cfg.sms, sizeof(uint64_t));

    uint8_t *mem = NULL;
    SimfaSim *h = start_sample(i, &cfg, &mem);

    SimfaRunState state = SIMFA_RUN_STATE_RUNNING;
    while (state == SIMFA_RUN_STATE_RUNNING) {
        check(simfa_step(h, &state), "step", h);
        SimfaExtRequest r;
        bool got = false;
        for (;;) {
            check(simfa_ext_pop_request(h, &r, &got), "ext_pop_request", h);
            if (!got) {
                break;
            }
            check(simfa_ext_complete(h, r.id, fixed_model_answer(&model, &r)), "ext_complete", h);
        }
    }
    size_t left = 1;
    check(simfa_ext_outstanding(h, &left), "ext_outstanding", h);
    SimfaSummary s;
    check(simfa_summary(h, &s), "summary", h);
    if (left != 0) {
        fprintf(stderr, "external %u: %zu requests left\n", i, left);
        return 1;
    }
    printf("external %u %llu %016llx %llu %llu %llu\n", i, (unsigned long long)s.cycles,
           (unsigned long long)s.digest, (unsigned long long)s.tma_ops,
           (unsigned long long)s.bytes_loaded, (unsigned long long)s.bytes_stored);
    free(model.free_at);
    free(mem);
    return 0;
}

int main(void) {
    for (uint32_t i = 0; i < simfa_sample_count(); i++) {
        if (run_sample(i) != 0) {
            return 1;
        }
    }
    for (uint32_t i = 0; i < simfa_sample_count(); i++) {
        if (run_external(i) != 0) {
            return 1;
        }
    }
    return 0;
}
