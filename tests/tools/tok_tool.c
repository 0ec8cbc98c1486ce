/* tok_tool.c -- drives la_tokenizer_* for tests/python/test_tokenizer.py, which reads the
 * GGUF tokenizer metadata with the `gguf` package and writes it as JSON.
 *
 * VOCAB is VOCAB.json (below) or a .gguf file (read with la_gguf_open + la_tokenizer_from_gguf).
 *
 *   tok_tool VOCAB.json TEXTS.json OUT.json FLAGS
 *       TEXTS.json: an array of strings; FLAGS: la_tokenizer_encode flags (integer).
 *       OUT.json: one object per text: {"ids": [...], "text": decode(ids), "text_skip":
 *       decode(ids, LA_TOK_SKIP_SPECIAL)} or {"error": msg}.
 *   tok_tool VOCAB.json --bench FILE
 *       encode FILE (whole) and print "bytes N tokens N seconds S tokens_per_s R".
 *   tok_tool VOCAB.json --new
 *       only build the tokenizer; print "ok" or the error message (exit 1).
 *
 * VOCAB.json: {"model", "pre", "tokens", "scores", "token_type", "merges", "bos_id",
 * "eos_id", "unk_id", "pad_id", "add_bos", "add_eos", "add_space_prefix", "chat_template"};
 * absent keys keep la_tokenizer_vocab_default's values. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "longattn.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "%s: read failed\n", path); exit(2); }
    fclose(f);
    s[n] = 0;
    if (len) *len = (size_t)n;
    return s;
}

static int get_int(const cJSON *o, const char *k, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

static const char *get_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* the strings of array o[k] (NULL if absent), *n its length */
static const char **get_strs(const cJSON *o, const char *k, int32_t *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    *n = 0;
    if (!cJSON_IsArray(a)) return NULL;
    int m = cJSON_GetArraySize(a), i = 0;
    const char **s = calloc((size_t)m + 1, sizeof *s);
    const cJSON *e;
    cJSON_ArrayForEach(e, a) s[i++] = cJSON_IsString(e) ? e->valuestring : NULL;
    *n = m;
    return s;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tok_tool VOCAB.json TEXTS.json OUT.json FLAGS | VOCAB.json --bench FILE "
                        "| VOCAB.json --new\n");
        return 2;
    }
    /* the vocabulary: a GGUF file (la_tokenizer_from_gguf) or JSON (la_tokenizer_new) */
    char *vj = NULL;
    cJSON *vo = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    la_tokenizer_vocab v;
    v = la_tokenizer_vocab_default();
    la_tokenizer *t;
    size_t alen = strlen(argv[1]);
    if (alen > 5 && strcmp(argv[1] + alen - 5, ".gguf") == 0) {
        la_gguf *g;
        if (la_gguf_open(argv[1], &g) != LA_OK) {
            printf("%s\n", la_errmsg());
            return 1;
        }
        la_status st = la_tokenizer_from_gguf(g, &t);
        la_gguf_close(g); /* the tokenizer keeps copies */
        if (st != LA_OK) {
            printf("%s\n", la_errmsg());
            return 1;
        }
    } else {
        vj = slurp(argv[1], NULL);
        vo = cJSON_Parse(vj);
        if (!vo) { fprintf(stderr, "%s: not JSON\n", argv[1]); return 2; }
        v.model = get_str(vo, "model");
        v.pre = get_str(vo, "pre");
        v.tokens = get_strs(vo, "tokens", &v.n_tokens);
        v.merges = get_strs(vo, "merges", &v.n_merges);
        v.chat_template = get_str(vo, "chat_template");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(vo, "scores"), *e;
        if (cJSON_IsArray(a)) {
            int i = 0;
            scores = malloc((size_t)cJSON_GetArraySize(a) * sizeof *scores + 1);
            cJSON_ArrayForEach(e, a) scores[i++] = (float)e->valuedouble;
            v.scores = scores;
        }
        a = cJSON_GetObjectItemCaseSensitive(vo, "token_type");
        if (cJSON_IsArray(a)) {
            int i = 0;
            types = malloc((size_t)cJSON_GetArraySize(a) * sizeof *types + 1);
            cJSON_ArrayForEach(e, a) types[i++] = (int32_t)e->valuedouble;
            v.token_type = types;
        }
        v.bos_id = get_int(vo, "bos_id", -1);
        v.eos_id = get_int(vo, "eos_id", -1);
        v.unk_id = get_int(vo, "unk_id", -1);
        v.pad_id = get_int(vo, "pad_id", -1);
        v.add_bos = get_int(vo, "add_bos", 0);
        v.add_eos = get_int(vo, "add_eos", 0);
        v.add_space_prefix = get_int(vo, "add_space_prefix", -1);
        la_status st = la_tokenizer_new(&v, &t);
        free((void *)v.tokens);
        free((void *)v.merges);
        free(scores);
        free(types);
        if (st != LA_OK) {
            printf("%s\n", la_errmsg());
            cJSON_Delete(vo);
            free(vj);
            return 1;
        }
    }
    int rc = 0;
    if (strcmp(argv[2], "--new") == 0) {
        printf("ok\n");
    } else if (strcmp(argv[2], "--bench") == 0 && argc >= 4) {
        size_t len;
        char *text = slurp(argv[3], &len);
        la_token_buf ids = {0};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (la_tokenizer_encode(t, text, len, 0, &ids) != LA_OK) {
            printf("%s\n", la_errmsg());
            rc = 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (!rc)
            printf("bytes %zu tokens %lld seconds %.3f tokens_per_s %.0f\n", len, (long long)ids.n, sec,
                   (double)ids.n / sec);
        la_token_buf_free(&ids);
        free(text);
    } else if (argc >= 5) {
        char *tj = slurp(argv[2], NULL);
        cJSON *texts = cJSON_Parse(tj), *res = cJSON_CreateArray(), *x;
        if (!cJSON_IsArray(texts)) { fprintf(stderr, "%s: not a JSON array\n", argv[2]); return 2; }
        int flags = atoi(argv[4]);
        la_token_buf ids = {0};
        cJSON_ArrayForEach(x, texts) {
            cJSON *o = cJSON_CreateObject();
            ids.n = 0;
            const char *s = cJSON_IsString(x) ? x->valuestring : "";
            if (la_tokenizer_encode(t, s, strlen(s), flags, &ids) != LA_OK) {
                cJSON_AddStringToObject(o, "error", la_errmsg());
            } else {
                cJSON *arr = cJSON_AddArrayToObject(o, "ids");
                for (int64_t i = 0; i < ids.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids.ids[i]));
                for (int skip = 0; skip < 2; skip++) {
                    char *dec;
                    if (la_tokenizer_decode(t, ids.ids, ids.n, skip ? LA_TOK_SKIP_SPECIAL : 0, &dec, NULL) == LA_OK) {
                        cJSON_AddStringToObject(o, skip ? "text_skip" : "text", dec);
                        free(dec);
                    } else {
                        cJSON_AddStringToObject(o, "error", la_errmsg());
                    }
                }
            }
            cJSON_AddItemToArray(res, o);
        }
        char *outs = cJSON_PrintUnformatted(res);
        FILE *f = fopen(argv[3], "wb");
        if (!f || fputs(outs, f) < 0 || fclose(f) != 0) { perror(argv[3]); rc = 2; }
        free(outs);
        la_token_buf_free(&ids);
        cJSON_Delete(res);
        cJSON_Delete(texts);
        free(tj);
    } else {
        fprintf(stderr, "tok_tool: bad arguments\n");
        rc = 2;
    }
    la_tokenizer_free(t); /* it copied the vocabulary: the JSON arrays were freed above */
    cJSON_Delete(vo);
    free(vj);
    return rc;
}
