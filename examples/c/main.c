/* literun from C: load a model, describe its inputs and outputs, run it on a .npy input and
 * compare the output with an expected .npy (bit-exact by default, or within a relative tolerance).
 *
 *   examples/c/run.sh            # builds the static library and this program, runs it on a fixture
 *   ./literun_c MODEL.lite INPUT.npy EXPECTED.npy [REL_TOL]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "literun.h"

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: read failed\n", path);
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The data of a version-1 .npy file (little-endian, C order). */
static const unsigned char *npy_data(const unsigned char *npy, size_t len, size_t *data_len) {
    if (len < 10 || memcmp(npy, "\x93NUMPY", 6) != 0) return NULL;
    size_t header = (size_t)npy[8] | ((size_t)npy[9] << 8);
    if (10 + header > len) return NULL;
    *data_len = len - 10 - header;
    return npy + 10 + header;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        LiterunStatus s_ = (call);                                                     \
        if (s_ != LITERUN_STATUS_OK) {                                                 \
            fprintf(stderr, "%s failed: %s: %s\n", #call, literun_status_name(s_),     \
                    literun_last_error());                                             \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

static void print_info(const char *what, size_t i, const LiterunTensorInfo *t) {
    printf("%s %zu '%s' dtype %d shape [", what, i, t->name, (int)t->dtype);
    for (size_t d = 0; d < t->rank; d++) printf(d ? ",%zu" : "%zu", t->dims[d]);
    printf("] %zu bytes\n", t->bytes);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.lite INPUT.npy EXPECTED.npy [REL_TOL]\n", argv[0]);
        return 2;
    }
    double tol = argc > 4 ? atof(argv[4]) : 0.0;
    printf("literun %s\n", literun_version());

    /* Errors are statuses with a message, never crashes. */
    LiterunInterpreter *bad = NULL;
    const unsigned char junk[16] = {0};
    if (literun_interpreter_create(junk, sizeof junk, &bad) != LITERUN_STATUS_INVALID_MODEL || bad) {
        fprintf(stderr, "junk bytes were not rejected\n");
        return 1;
    }
    printf("junk model rejected: %s\n", literun_last_error());
    if (literun_invoke(NULL) != LITERUN_STATUS_NULL_ARGUMENT) {
        fprintf(stderr, "NULL interpreter was not rejected\n");
        return 1;
    }

    size_t model_len, input_len, expected_len, x_len, want_len;
    unsigned char *model = read_file(argv[1], &model_len);
    unsigned char *input = read_file(argv[2], &input_len);
    unsigned char *expected = read_file(argv[3], &expected_len);
    if (!model || !input || !expected) return 1;
    const unsigned char *x = npy_data(input, input_len, &x_len);
    const unsigned char *want = npy_data(expected, expected_len, &want_len);
    if (!x || !want) {
        fprintf(stderr, "bad .npy file\n");
        return 1;
    }

    LiterunInterpreter *it = NULL;
    CHECK(literun_interpreter_create(model, model_len, &it));
    free(model); /* the interpreter keeps its own aligned copy */
    printf("arena %zu bytes\n", literun_arena_bytes(it));

    LiterunTensorInfo in, out;
    for (size_t i = 0; i < literun_input_count(it); i++) {
        CHECK(literun_input_info(it, i, &in));
        print_info("input", i, &in);
    }
    for (size_t i = 0; i < literun_output_count(it); i++) {
        CHECK(literun_output_info(it, i, &out));
        print_info("output", i, &out);
    }
    CHECK(literun_input_info(it, 0, &in));
    CHECK(literun_output_info(it, 0, &out));
    if (literun_set_input(it, 0, x, x_len + 1) != LITERUN_STATUS_BAD_ARGUMENT) {
        fprintf(stderr, "wrong input size was not rejected\n");
        return 1;
    }
    CHECK(literun_set_input(it, 0, x, x_len));
    CHECK(literun_invoke(it));

    unsigned char *y = malloc(out.bytes);
    CHECK(literun_get_output(it, 0, y, out.bytes));
    if (want_len != out.bytes) {
        fprintf(stderr, "expected %zu output bytes, the model has %zu\n", want_len, out.bytes);
        return 1;
    }
    int ok = 1;
    if (out.dtype == LITERUN_DTYPE_FLOAT32) {
        const float *g = (const float *)y;
        float w[4096];
        size_t n = out.bytes / 4, best = 0;
        if (n > 4096) n = 4096;
        memcpy(w, want, n * 4);
        double scale = 1e-30;
        for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(w[i]));
        for (size_t i = 0; i < n; i++) {
            double rel = fabs((double)g[i] - w[i]) / scale;
            if (rel > tol) {
                fprintf(stderr, "output[%zu] = %.9g, expected %.9g\n", i, g[i], w[i]);
                ok = 0;
            }
            if (g[i] > g[best]) best = i;
        }
        printf("top-1: %zu\n", best);
    } else if (memcmp(y, want, out.bytes) != 0) {
        ok = 0;
    }
    printf("output %s the expected values (%s)\n", ok ? "matches" : "DOES NOT match",
           tol > 0 ? "relative tolerance" : "bit-exact");
    free(y);
    free(input);
    free(expected);
    literun_interpreter_destroy(it);
    return ok ? 0 : 1;
}
