/* fuzz_gguf.c -- GGUF model files (la_gguf_open_mem on the input, la_gguf_open on the same
 * bytes written to a file). On success every key/value is read through the accessors,
 * every tensor's data is checked to lie inside the image, and supported tensors of up to
 * 2^20 values are dequantized (ASan sees any read past the image). The two open paths must
 * agree. */
#include <string.h>

#include "fuzz_util.h"
#include "longattn.h"

static void exercise(const la_gguf *g, const uint8_t *base, size_t size) {
    int64_t nkv = la_gguf_n_kv(g);
    FZ_CHECK(nkv >= 0, "n_kv %lld", (long long)nkv);
    for (int64_t i = 0; i < nkv; i++) {
        const la_gguf_kv *kv = la_gguf_kv_at(g, i);
        FZ_CHECK(kv && kv->key, "kv %lld missing", (long long)i);
        FZ_CHECK(la_gguf_find_kv(g, kv->key) == kv, "key '%s' not found by name", kv->key);
        (void)la_gguf_vtype_name(kv->type);
        uint64_t n = kv->n < 4096 ? kv->n : 4096;
        for (uint64_t j = 0; j < n; j++) {
            la_gguf_vtype t = kv->type == LA_GGUF_ARR ? kv->arr_type : kv->type;
            if (t == LA_GGUF_STR) {
                uint64_t len = 0;
                const char *s = la_gguf_arr_str(kv, j, &len);
                if (s) {
                    volatile char c = 0;
                    for (uint64_t b = 0; b < len; b++) c ^= s[b];
                    (void)c;
                    FZ_CHECK(s[len] == 0, "string not NUL-terminated");
                }
            } else { /* the accessors' contract: integer ones for integers and bool */
                int is_int = t <= LA_GGUF_I32 || t == LA_GGUF_BOOL || t == LA_GGUF_U64 || t == LA_GGUF_I64;
                if (is_int) (void)la_gguf_arr_int(kv, j), (void)la_gguf_arr_uint(kv, j);
                if (t != LA_GGUF_BOOL) (void)la_gguf_arr_float(kv, j);
            }
        }
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        int b;
        const char *s;
        (void)la_gguf_get_u32(g, kv->key, &u32), (void)la_gguf_get_i32(g, kv->key, &i32);
        (void)la_gguf_get_u64(g, kv->key, &u64), (void)la_gguf_get_i64(g, kv->key, &i64);
        (void)la_gguf_get_f32(g, kv->key, &f32), (void)la_gguf_get_f64(g, kv->key, &f64);
        (void)la_gguf_get_bool(g, kv->key, &b), (void)la_gguf_get_str(g, kv->key, &s);
    }
    int64_t nt = la_gguf_n_tensors(g);
    FZ_CHECK(nt >= 0, "n_tensors %lld", (long long)nt);
    for (int64_t i = 0; i < nt; i++) {
        const la_gguf_tensor *t = la_gguf_tensor_at(g, i);
        FZ_CHECK(t && t->name, "tensor %lld missing", (long long)i);
        FZ_CHECK(la_gguf_find_tensor(g, t->name) == t, "tensor '%s' not found by name", t->name);
        FZ_CHECK(t->n_dims >= 1 && t->n_dims <= 4, "tensor %s: n_dims %d", t->name, t->n_dims);
        const uint8_t *d = t->data;
        FZ_CHECK(d >= base && (uint64_t)(d - base) <= size && t->nbytes <= size - (uint64_t)(d - base),
                 "tensor %s: data outside the file", t->name);
        int64_t ne = la_gguf_tensor_nelem(t);
        FZ_CHECK(ne >= 0, "tensor %s: nelem %lld", t->name, (long long)ne);
        if (la_ggml_type_supported(t->type) && ne > 0 && ne <= (1 << 20)) {
            float *out = malloc((size_t)ne * sizeof(float));
            FZ_CHECK(out != NULL, "out of memory");
            la_status st = la_gguf_dequant(t, out);
            FZ_CHECK(st == LA_OK, "tensor %s: dequant failed: %s", t->name, la_errmsg());
            if (la_gguf_tensor_nrows(t) > 0) (void)la_gguf_dequant_rows(t, 0, 1, out);
            free(out);
        }
    }
    (void)la_gguf_version(g), (void)la_gguf_alignment(g), (void)la_gguf_data_offset(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    la_gguf *g = NULL;
    la_status s1 = la_gguf_open_mem(data, size, "fuzz.gguf", &g);
    if (s1 == LA_OK) {
        exercise(g, data, size);
        la_gguf_close(g);
    } else {
        FZ_CHECK(g == NULL, "failed open left a handle");
    }
    char path[512];
    snprintf(path, sizeof path, "%s/in.gguf", fz_tmpdir());
    fz_write(path, data, size);
    la_status s2 = la_gguf_open(path, &g);
    FZ_CHECK((s1 == LA_OK) == (s2 == LA_OK), "open_mem gave %d, open %d", (int)s1, (int)s2);
    la_gguf_close(g);
    return 0;
}
