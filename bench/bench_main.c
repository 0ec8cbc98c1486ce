/* bench_main.c -- `longattn bench <name> [options]`: dispatch on the table in bench.h. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli/cli.h"

static void bench_help(FILE *f) {
    fprintf(f, "usage: longattn bench <name> [options]\n\nbenchmarks (longattn bench <name> --help lists a benchmark's options):\n");
    for (const la_bench_entry *b = la_benches; b->name; b++) fprintf(f, "  %-10s %s\n", b->name, b->summary);
    fprintf(f, "\noptions:\n  %-20s  %s\n", "--help", "print this help and exit");
}

int cli_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        bench_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const la_bench_entry *b = la_benches; b->name; b++)
        if (!strcmp(argv[1], b->name)) return b->fn(argc - 1, argv + 1);
    fprintf(stderr, "longattn bench: unknown benchmark '%s'; valid:", argv[1]);
    for (const la_bench_entry *b = la_benches; b->name; b++) fprintf(stderr, " %s", b->name);
    fprintf(stderr, "\n");
    return 2;
}
