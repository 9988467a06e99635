/* Random-access latency of this host's memory for a table of a given size:
 * a pointer chase over one random cycle through the table. Used to explain
 * the simulator's speed limit (docs/speed.md).
 *   gcc -O2 -o /tmp/host-latency scripts/host-latency.c
 *   for s in 262144 1048576 4194304 16777216 67108864; do /tmp/host-latency $s; done
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s TABLE_BYTES\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atol(argv[1]) / sizeof(size_t);
    if (n < 2) {
        fprintf(stderr, "table too small\n");
        return 2;
    }
    size_t *perm = malloc(n * sizeof(size_t));
    size_t *next = malloc(n * sizeof(size_t));
    if (!perm || !next) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) perm[i] = i;
    srand(1);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = ((size_t)rand() * RAND_MAX + (size_t)rand()) % (i + 1);
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) next[perm[i]] = perm[(i + 1) % n];
    struct timespec s, e;
    size_t p = 0, hops = 20000000;
    clock_gettime(CLOCK_MONOTONIC, &s);
    for (size_t i = 0; i < hops; i++) p = next[p];
    clock_gettime(CLOCK_MONOTONIC, &e);
    double ns = ((e.tv_sec - s.tv_sec) * 1e9 + (e.tv_nsec - s.tv_nsec)) / hops;
    printf("%zu KiB: %.1f ns per random access (end %zu)\n", n * sizeof(size_t) / 1024, ns, p);
    return 0;
}
