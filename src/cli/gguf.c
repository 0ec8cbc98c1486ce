/* gguf.c -- `longattn gguf`: inspect GGUF model files.
 *   longattn gguf info FILE [--json] [--full]   metadata and tensor list
 *   longattn gguf dequant FILE TENSOR OUT.npy    one tensor as float32 .npy (numpy order)
 *   longattn gguf types                          ggml type table (id, name, block, bytes) */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn gguf info FILE [--json] [--full]\n"
    "longattn gguf dequant FILE TENSOR OUT.npy\n"
    "longattn gguf types",
    "info      print the header, every metadata key (type and value) and every tensor\n"
    "          (type, dims fastest first, data offset, bytes)\n"
    "dequant   write tensor TENSOR dequantized to float32 as OUT.npy, dims slowest first\n"
    "types     the ggml tensor types longattn knows: id, name, values and bytes per block,\n"
    "          and whether it dequantizes them",
    NULL, 0,
};

static void print_elem(const la_gguf_kv *kv, uint64_t i) {
    int t = kv->type == LA_GGUF_ARR ? (int)kv->arr_type : (int)kv->type;
    switch (t) {
    case LA_GGUF_STR: {
        uint64_t len;
        const char *s = la_gguf_arr_str(kv, i, &len);
        putchar('"');
        for (uint64_t j = 0; j < len; j++) {
            unsigned char ch = (unsigned char)s[j];
            if (ch == '"' || ch == '\\') printf("\\%c", ch);
            else if (ch < 0x20 || ch == 0x7f) printf("\\x%02x", ch);
            else putchar(ch);
        }
        putchar('"');
        break;
    }
    case LA_GGUF_F32: case LA_GGUF_F64: printf("%.9g", la_gguf_arr_float(kv, i)); break;
    case LA_GGUF_BOOL: printf("%s", la_gguf_arr_int(kv, i) ? "true" : "false"); break;
    case LA_GGUF_U64: printf("%" PRIu64, la_gguf_arr_uint(kv, i)); break;
    default: printf("%" PRId64, la_gguf_arr_int(kv, i)); break;
    }
}

static void print_info(const la_gguf *g, const char *path, int full) {
    printf("%s: GGUF v%u, %" PRIu64 " bytes, alignment %" PRIu64 ", data section at byte %" PRIu64
           "\n", path, la_gguf_version(g), la_gguf_file_size(g), la_gguf_alignment(g),
           la_gguf_data_offset(g));
    printf("metadata: %" PRId64 " keys\n", la_gguf_n_kv(g));
    for (int64_t i = 0; i < la_gguf_n_kv(g); i++) {
        const la_gguf_kv *kv = la_gguf_kv_at(g, i);
        if (kv->type == LA_GGUF_ARR) {
            printf("  %-40s arr[%s,%" PRIu64 "] = [", kv->key, la_gguf_vtype_name(kv->arr_type),
                   kv->n);
            uint64_t show = full || kv->n <= 8 ? kv->n : 8;
            for (uint64_t j = 0; j < show; j++) {
                if (j) printf(", ");
                print_elem(kv, j);
            }
            printf("%s]\n", show < kv->n ? ", ..." : "");
        } else {
            printf("  %-40s %-4s = ", kv->key, la_gguf_vtype_name(kv->type));
            print_elem(kv, 0);
            putchar('\n');
        }
    }
    printf("tensors: %" PRId64 "\n", la_gguf_n_tensors(g));
    for (int64_t i = 0; i < la_gguf_n_tensors(g); i++) {
        const la_gguf_tensor *t = la_gguf_tensor_at(g, i);
        char dims[128];
        int k = snprintf(dims, sizeof dims, "[");
        for (int d = 0; d < t->n_dims; d++)
            k += snprintf(dims + k, sizeof dims - (size_t)k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
        snprintf(dims + k, sizeof dims - (size_t)k, "]");
        printf("  %-40s %-7s %-20s offset %-12" PRIu64 " %" PRIu64 " bytes\n", t->name,
               la_ggml_type_name(t->type), dims, t->offset, t->nbytes);
    }
}

static cJSON *json_int(const la_gguf_kv *kv, uint64_t i) {
    char buf[32];
    int t = kv->type == LA_GGUF_ARR ? (int)kv->arr_type : (int)kv->type;
    if (t == LA_GGUF_U64) snprintf(buf, sizeof buf, "%" PRIu64, la_gguf_arr_uint(kv, i));
    else snprintf(buf, sizeof buf, "%" PRId64, la_gguf_arr_int(kv, i));
    return cJSON_CreateRaw(buf);
}

/* %.17g: exact (cJSON's own number printing may round to 15 digits); non-finite values
 * as Python's json module writes them */
static cJSON *json_float(double v) {
    char buf[40];
    if (isnan(v)) snprintf(buf, sizeof buf, "NaN");
    else if (isinf(v)) snprintf(buf, sizeof buf, "%sInfinity", v < 0 ? "-" : "");
    else snprintf(buf, sizeof buf, "%.17g", v);
    return cJSON_CreateRaw(buf);
}

static cJSON *json_elem(const la_gguf_kv *kv, uint64_t i) {
    int t = kv->type == LA_GGUF_ARR ? (int)kv->arr_type : (int)kv->type;
    switch (t) {
    case LA_GGUF_STR: return cJSON_CreateString(la_gguf_arr_str(kv, i, NULL));
    case LA_GGUF_F32: case LA_GGUF_F64: return json_float(la_gguf_arr_float(kv, i));
    case LA_GGUF_BOOL: return cJSON_CreateBool(la_gguf_arr_int(kv, i) != 0);
    default: return json_int(kv, i);
    }
}

static int print_json(const la_gguf *g) {
    cJSON *root = cJSON_CreateObject(), *md = cJSON_CreateObject(), *ts = cJSON_CreateArray();
    cJSON_AddNumberToObject(root, "version", la_gguf_version(g));
    cJSON_AddNumberToObject(root, "alignment", (double)la_gguf_alignment(g));
    cJSON_AddNumberToObject(root, "data_offset", (double)la_gguf_data_offset(g));
    cJSON_AddItemToObject(root, "metadata", md);
    cJSON_AddItemToObject(root, "tensors", ts);
    for (int64_t i = 0; i < la_gguf_n_kv(g); i++) {
        const la_gguf_kv *kv = la_gguf_kv_at(g, i);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", la_gguf_vtype_name(kv->type));
        if (kv->type == LA_GGUF_ARR) {
            cJSON_AddStringToObject(e, "elem", la_gguf_vtype_name(kv->arr_type));
            cJSON *a = cJSON_AddArrayToObject(e, "value");
            for (uint64_t j = 0; j < kv->n; j++) cJSON_AddItemToArray(a, json_elem(kv, j));
        } else {
            cJSON_AddItemToObject(e, "value", json_elem(kv, 0));
        }
        cJSON_AddItemToObject(md, kv->key, e);
    }
    for (int64_t i = 0; i < la_gguf_n_tensors(g); i++) {
        const la_gguf_tensor *t = la_gguf_tensor_at(g, i);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "type", la_ggml_type_name(t->type));
        cJSON *ne = cJSON_AddArrayToObject(e, "ne");
        for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(ne, cJSON_CreateNumber((double)t->ne[d]));
        cJSON_AddNumberToObject(e, "offset", (double)t->offset);
        cJSON_AddNumberToObject(e, "nbytes", (double)t->nbytes);
        cJSON_AddItemToArray(ts, e);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s) {
        fprintf(stderr, "longattn gguf: out of memory printing JSON\n");
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}

static int cmd_dequant(const la_gguf *g, const char *name, const char *out) {
    const la_gguf_tensor *t;
    la_status s = la_gguf_get_tensor(g, name, &t);
    int64_t n = s == LA_OK ? la_gguf_tensor_nelem(t) : 0;
    float *buf = s == LA_OK ? malloc((size_t)(n ? n : 1) * sizeof *buf) : NULL;
    if (s == LA_OK && !buf) {
        fprintf(stderr, "longattn gguf: out of memory for %" PRId64 " floats\n", n);
        return 1;
    }
    if (s == LA_OK) s = la_gguf_dequant(t, buf);
    if (s == LA_OK) {
        int64_t shape[4];
        for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
        s = la_npy_write_f32(out, buf, t->n_dims, shape);
    }
    free(buf);
    if (s != LA_OK) {
        fprintf(stderr, "longattn gguf: %s\n", la_errmsg());
        return 1;
    }
    return 0;
}

int cli_gguf(int argc, char **argv) {
    const char *pos[4] = {NULL};
    cli_pos args_pos = {pos, 4, 0};
    int json = 0, full = 0;
    cli_arg args[] = {
        CLI_A_POS("the subcommand and its FILE TENSOR OUT.npy", &args_pos),
        CLI_A_FLAG("--json", "info: print all of it, arrays in full, as JSON (64-bit integers exact)", &json),
        CLI_A_FLAG("--full", "info: print arrays in full (default: their first 8 elements)", &full),
        CLI_A_END,
    };
    if (argc < 2) { /* no subcommand: the help on stderr, a usage error */
        cli_print_help(stderr, &DOC, args);
        return 2;
    }
    int prc = cli_parse("gguf", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    if (args_pos.n == 0) return cli_usage_error("gguf", "give a subcommand (info, dequant, types)");
    const char *sub = pos[0];
    if (!strcmp(sub, "types")) {
        if (args_pos.n > 1 || json || full)
            return cli_usage_error("gguf", "types takes no FILE and no options, got '%s'",
                                   args_pos.n > 1 ? pos[1] : json ? "--json" : "--full");
        printf("%-4s %-8s %-6s %-6s %s\n", "id", "name", "block", "bytes", "dequantize");
        for (uint32_t t = 0; t < 64; t++)
            if (la_ggml_type_known(t))
                printf("%-4u %-8s %-6" PRId64 " %-6" PRId64 " %s\n", t, la_ggml_type_name(t),
                       la_ggml_block_size(t), la_ggml_block_bytes(t),
                       la_ggml_type_supported(t) ? "yes" : "no");
        return 0;
    }
    int info = !strcmp(sub, "info"), deq = !strcmp(sub, "dequant");
    if (!info && !deq) return cli_usage_error("gguf", "unknown subcommand '%s' (info, dequant, types)", sub);
    if (!info && (json || full)) return cli_usage_error("gguf", "--json and --full belong to gguf info");
    if (args_pos.n - 1 != (info ? 1 : 3))
        return cli_usage_error("gguf", "%s takes %s, got %d argument%s", sub, info ? "one FILE" : "FILE TENSOR OUT.npy",
                               args_pos.n - 1, args_pos.n == 2 ? "" : "s");
    const char *path = pos[1];
    la_gguf *g;
    if (la_gguf_open(path, &g) != LA_OK) {
        fprintf(stderr, "longattn gguf: %s\n", la_errmsg());
        return 1;
    }
    int rc = 0;
    if (info && json) rc = print_json(g);
    else if (info) print_info(g, path, full);
    else rc = cmd_dequant(g, pos[2], pos[3]);
    la_gguf_close(g);
    return rc;
}
