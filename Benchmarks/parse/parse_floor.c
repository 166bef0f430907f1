// What libjansson alone costs per request line, the floor under every request halcyond
// parses: json_loadb with the daemon's flags, then json_decref, on the request shapes the
// benchmarks send. Five interleaved rounds; the median per shape.
//
// Build and run: Benchmarks/parse/parse_floor.sh

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct shape {
    const char *name;
    char *line;
    size_t length;
    long iterations;
    double microseconds[5];
};

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static char *set_line(size_t value_bytes, size_t *length) {
    const char *head = "{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"cache.set\",\"params\":{\"key\":\"key:1234\",\"value\":\"";
    const char *tail = "\"}}";
    size_t total = strlen(head) + value_bytes + strlen(tail);
    char *line = malloc(total + 1);
    memcpy(line, head, strlen(head));
    memset(line + strlen(head), 'x', value_bytes);
    memcpy(line + strlen(head) + value_bytes, tail, strlen(tail) + 1);
    *length = total;
    return line;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    // The flags of JSONValue.parse.
    const size_t flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    struct shape shapes[] = {
        {"get", NULL, 0, 200000, {0}},
        {"set 100 B", NULL, 0, 200000, {0}},
        {"set 1 KiB", NULL, 0, 40000, {0}},
        {"set 4 KiB", NULL, 0, 10000, {0}},
        {"set 64 KiB", NULL, 0, 600, {0}},
        {"set 1 MiB", NULL, 0, 40, {0}},
    };
    const size_t values[] = {0, 100, 1024, 4096, 65536, 1048576};
    const int count = sizeof shapes / sizeof shapes[0];
    shapes[0].line = strdup("{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"cache.get\",\"params\":{\"key\":\"key:1234\"}}");
    shapes[0].length = strlen(shapes[0].line);
    for (int i = 1; i < count; i++) shapes[i].line = set_line(values[i], &shapes[i].length);

    json_error_t error;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < count; i++) {
            double start = now_us();
            for (long n = 0; n < shapes[i].iterations; n++) {
                json_t *root = json_loadb(shapes[i].line, shapes[i].length, flags, &error);
                if (!root) { fprintf(stderr, "parse failed: %s\n", error.text); return 1; }
                json_decref(root);
            }
            shapes[i].microseconds[round] = (now_us() - start) / shapes[i].iterations;
        }
    }
    printf("| request line | bytes | µs per parse (median of 5) | ns per byte |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < count; i++) {
        qsort(shapes[i].microseconds, 5, sizeof(double), by_value);
        double median = shapes[i].microseconds[2];
        printf("| %s | %zu | %.2f | %.1f |\n", shapes[i].name, shapes[i].length, median, median * 1000 / shapes[i].length);
    }
    return 0;
}
