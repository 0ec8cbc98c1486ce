/* gguf.c -- GGUF v2/v3 reader (ggml's docs/gguf.md): header, metadata, tensor infos, the
 * data section mapped read-only.
 *
 * Layout (little-endian, packed):
 *   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { str key | u32 type | value }          str = u64 length + bytes (no NUL)
 *       value: scalar, str, or arr = { u32 elem type | u64 n | n values }
 *   n_tensors x { str name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
 *   padding to general.alignment (u32, default 32) | data section
 *
 * Hostile input: the parser reads through one cursor whose every read is checked against
 * the bytes left in the file, and no count from the file sizes an allocation before it
 * has been bounded by those bytes (each element needs at least a fixed number of them).
 * Arithmetic on file values uses overflow-checked builtins. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "longattn/gguf.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

/* ---- string arena: chunked bump allocator (chunks never move, so pointers stay valid) ---- */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    char mem[];
} arena_chunk;

static char *arena_alloc(arena_chunk **head, size_t n) {
    arena_chunk *c = *head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ((size_t)1 << 20) ? n : ((size_t)1 << 20);
        arena_chunk *nc = la_malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->next = c;
        nc->used = 0;
        nc->cap = cap;
        *head = nc;
        c = nc;
    }
    char *p = c->mem + c->used;
    c->used += n;
    return p;
}

static void arena_free(arena_chunk *c) {
    while (c) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* ---- name -> index hash table (open addressing, FNV-1a) ---- */
typedef struct {
    int64_t *slot; /* index + 1, 0 = empty */
    uint64_t mask;
} name_table;

static uint64_t fnv1a(const char *s) { return la_fnv1a(LA_FNV0, s, strlen(s)); }

static int table_init(name_table *t, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    t->slot = la_calloc(cap, sizeof *t->slot);
    t->mask = cap - 1;
    return t->slot != NULL;
}

/* Find name; names(i) gives the name of entry i. Returns the index or -1, and the slot
 * where it would go in *where. */
#define TABLE_FIND(t, name, NAME_OF, where)                                     \
    ({                                                                          \
        uint64_t h_ = fnv1a(name) & (t)->mask;                                  \
        int64_t r_ = -1;                                                        \
        while ((t)->slot[h_]) {                                                 \
            int64_t i_ = (t)->slot[h_] - 1;                                     \
            if (!strcmp(NAME_OF(i_), name)) { r_ = i_; break; }                 \
            h_ = (h_ + 1) & (t)->mask;                                          \
        }                                                                       \
        *(where) = h_;                                                          \
        r_;                                                                     \
    })

struct la_gguf {
    const uint8_t *map;
    uint64_t size;
    int mapped; /* map is ours (mmap) rather than the caller's buffer */
    uint32_t version;
    uint64_t alignment, data_offset;
    int64_t n_kv, n_tensors;
    la_gguf_kv *kv;
    la_gguf_tensor *t;
    name_table kv_table, t_table;
    arena_chunk *arena;
    /* per string-array pointer tables (freed at close) */
    void **blocks;
    int64_t n_blocks, cap_blocks;
    char path[256];
};

#define KV_NAME(i) (g->kv[i].key)
#define T_NAME(i) (g->t[i].name)

/* ---- checked cursor ---- */
typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    const char *path;
} cursor;

static la_status need(const cursor *c, uint64_t n, const char *what) {
    if (c->size - c->pos < n)
        return la_fail(LA_EFORMAT,
                       "%s: truncated GGUF file: %s at byte %llu needs %llu bytes but the file "
                       "has %llu left (re-download or re-convert the file)",
                       c->path, what, (unsigned long long)c->pos, (unsigned long long)n,
                       (unsigned long long)(c->size - c->pos));
    return LA_OK;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static la_status rd_u32(cursor *c, const char *what, uint32_t *v) {
    LA_TRY(need(c, 4, what));
    *v = le32(c->p + c->pos);
    c->pos += 4;
    return LA_OK;
}

static la_status rd_u64(cursor *c, const char *what, uint64_t *v) {
    LA_TRY(need(c, 8, what));
    *v = le64(c->p + c->pos);
    c->pos += 8;
    return LA_OK;
}

/* A gguf string: its bytes stay in the map; *s points at them, *len is the length. */
static la_status rd_str(cursor *c, const char *what, const uint8_t **s, uint64_t *len) {
    uint64_t at = c->pos;
    LA_TRY(rd_u64(c, what, len));
    if (c->size - c->pos < *len)
        return la_fail(LA_EFORMAT,
                       "%s: %s at byte %llu has length %llu but only %llu bytes are left in the "
                       "file (truncated or corrupt file)",
                       c->path, what, (unsigned long long)at, (unsigned long long)*len,
                       (unsigned long long)(c->size - c->pos));
    *s = c->p + c->pos;
    c->pos += *len;
    return LA_OK;
}

static char *copy_str(la_gguf *g, const uint8_t *s, uint64_t len) {
    char *d = arena_alloc(&g->arena, (size_t)len + 1);
    if (!d) return NULL;
    memcpy(d, s, (size_t)len);
    d[len] = '\0';
    return d;
}

static void *keep_block(la_gguf *g, size_t bytes) {
    if (g->n_blocks == g->cap_blocks) {
        int64_t cap = g->cap_blocks ? 2 * g->cap_blocks : 16;
        void **nb = la_realloc(g->blocks, (size_t)cap * sizeof *nb);
        if (!nb) return NULL;
        g->blocks = nb;
        g->cap_blocks = cap;
    }
    void *p = la_malloc(bytes ? bytes : 1);
    if (p) g->blocks[g->n_blocks++] = p;
    return p;
}

/* Bytes of one scalar of metadata type t; 0 for str/arr/unknown. */
static uint64_t scalar_size(uint32_t t) {
    switch (t) {
    case LA_GGUF_U8: case LA_GGUF_I8: case LA_GGUF_BOOL: return 1;
    case LA_GGUF_U16: case LA_GGUF_I16: return 2;
    case LA_GGUF_U32: case LA_GGUF_I32: case LA_GGUF_F32: return 4;
    case LA_GGUF_U64: case LA_GGUF_I64: case LA_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *la_gguf_vtype_name(int t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                  "bool", "str", "arr", "u64", "i64", "f64"};
    if (t >= 0 && t < (int)(sizeof names / sizeof *names)) return names[t];
    return "?";
}

static la_status bad_bools(cursor *c, const la_gguf_kv *kv, const uint8_t *b, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (b[i] > 1)
            return la_fail(LA_EFORMAT, "%s: key '%s': bool value %u at byte %llu is not 0 or 1",
                           c->path, kv->key, b[i], (unsigned long long)(b - c->p + i));
    return LA_OK;
}

/* Strings of a str value or str array: n pointers + lengths + NUL-terminated copies. n has
 * been bounded by the file (each string needs >= 8 bytes). */
static la_status read_strings(la_gguf *g, cursor *c, la_gguf_kv *kv, uint64_t n) {
    const char **strs = keep_block(g, (size_t)n * sizeof *strs);
    uint64_t *lens = strs ? keep_block(g, (size_t)n * sizeof *lens) : NULL;
    if (!strs || !lens) return la_fail(LA_ENOMEM, "%s: out of memory for %llu strings of key '%s'",
                                       c->path, (unsigned long long)n, kv->key);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *s = NULL;
        LA_TRY(rd_str(c, "metadata string", &s, &lens[i]));
        strs[i] = copy_str(g, s, lens[i]);
        if (!strs[i]) return la_fail(LA_ENOMEM, "%s: out of memory copying strings", c->path);
    }
    kv->str = strs;
    kv->len = lens;
    return LA_OK;
}

static la_status read_value(la_gguf *g, cursor *c, la_gguf_kv *kv) {
    kv->offset = c->pos;
    kv->n = 1;
    uint64_t sz = scalar_size(kv->type);
    if (sz) {
        LA_TRY(need(c, sz, kv->key));
        kv->raw = c->p + c->pos;
        c->pos += sz;
        if (kv->type == LA_GGUF_BOOL) LA_TRY(bad_bools(c, kv, kv->raw, 1));
        return LA_OK;
    }
    if (kv->type == LA_GGUF_STR) return read_strings(g, c, kv, 1);
    if (kv->type != LA_GGUF_ARR)
        return la_fail(LA_EFORMAT, "%s: key '%s' has unknown value type %u (byte %llu); valid "
                       "types are 0..12", c->path, kv->key, (unsigned)kv->type,
                       (unsigned long long)(c->pos - 4));
    uint32_t et;
    LA_TRY(rd_u32(c, "array element type", &et));
    LA_TRY(rd_u64(c, "array length", &kv->n));
    kv->arr_type = (la_gguf_vtype)et;
    uint64_t left = c->size - c->pos;
    if (et == LA_GGUF_ARR)
        return la_fail(LA_EUNSUPPORTED, "%s: key '%s' is an array of arrays (byte %llu); nested "
                       "arrays are not supported (ggml refuses them too)",
                       c->path, kv->key, (unsigned long long)kv->offset);
    if (et == LA_GGUF_STR) {
        if (kv->n > left / 8)
            return la_fail(LA_EFORMAT, "%s: key '%s': array of %llu strings at byte %llu cannot "
                           "fit in the %llu bytes left (truncated or corrupt file)",
                           c->path, kv->key, (unsigned long long)kv->n,
                           (unsigned long long)kv->offset, (unsigned long long)left);
        return read_strings(g, c, kv, kv->n);
    }
    sz = scalar_size(et);
    if (!sz)
        return la_fail(LA_EFORMAT, "%s: key '%s': array element type %u at byte %llu is not a "
                       "valid type (0..12)", c->path, kv->key, et,
                       (unsigned long long)kv->offset);
    if (kv->n > left / sz)
        return la_fail(LA_EFORMAT, "%s: key '%s': array of %llu %s values at byte %llu needs more "
                       "than the %llu bytes left (truncated or corrupt file)",
                       c->path, kv->key, (unsigned long long)kv->n, la_gguf_vtype_name((int)et),
                       (unsigned long long)kv->offset, (unsigned long long)left);
    kv->raw = c->p + c->pos;
    c->pos += kv->n * sz;
    if (et == LA_GGUF_BOOL) LA_TRY(bad_bools(c, kv, kv->raw, kv->n));
    return LA_OK;
}

/* The key of metadata entry i (is_kv) or the name of tensor i: read, copied, refused when it
 * holds a NUL byte or an earlier entry has it, then entered in the name table. */
static la_status read_name(la_gguf *g, cursor *c, int is_kv, int64_t i, const char **name) {
    const char *what = is_kv ? "metadata key" : "tensor name";
    name_table *tb = is_kv ? &g->kv_table : &g->t_table;
#define NAME_OF(j) (is_kv ? KV_NAME(j) : T_NAME(j))
    const uint8_t *s = NULL;
    uint64_t len, at = c->pos, where;
    LA_TRY(rd_str(c, what, &s, &len));
    if (!(*name = copy_str(g, s, len))) return la_fail(LA_ENOMEM, "%s: out of memory", c->path);
    if (memchr(s, 0, (size_t)len))
        return la_fail(LA_EFORMAT, "%s: %s at byte %llu contains a NUL byte", c->path, what,
                       (unsigned long long)at);
    if (TABLE_FIND(tb, *name, NAME_OF, &where) >= 0)
        return la_fail(LA_EFORMAT, "%s: duplicate %s '%s' at byte %llu", c->path, what, *name,
                       (unsigned long long)at);
#undef NAME_OF
    tb->slot[where] = i + 1;
    return LA_OK;
}

static la_status read_kvs(la_gguf *g, cursor *c) {
    /* each kv needs at least 8 (key length) + 4 (type) + 1 (smallest value) bytes */
    if ((uint64_t)g->n_kv > (c->size - c->pos) / 13)
        return la_fail(LA_EFORMAT, "%s: header claims %llu metadata entries (byte 16) but the "
                       "file has only %llu bytes left (corrupt or truncated file)", c->path,
                       (unsigned long long)g->n_kv, (unsigned long long)(c->size - c->pos));
    g->kv = la_calloc((size_t)g->n_kv + 1, sizeof *g->kv);
    if (!g->kv || !table_init(&g->kv_table, g->n_kv))
        return la_fail(LA_ENOMEM, "%s: out of memory for %lld metadata entries", c->path,
                       (long long)g->n_kv);
    for (int64_t i = 0; i < g->n_kv; i++) {
        la_gguf_kv *kv = &g->kv[i];
        LA_TRY(read_name(g, c, 1, i, &kv->key));
        uint32_t ty;
        LA_TRY(rd_u32(c, "metadata value type", &ty));
        kv->type = (la_gguf_vtype)ty;
        LA_TRY(read_value(g, c, kv));
    }
    return LA_OK;
}

static la_status read_alignment(la_gguf *g, const char *path) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const la_gguf_kv *kv = la_gguf_find_kv(g, "general.alignment");
    if (!kv) return LA_OK;
    if (kv->type != LA_GGUF_U32)
        return la_fail(LA_EFORMAT, "%s: general.alignment (byte %llu) has type %s; it must be a "
                       "u32", path, (unsigned long long)kv->offset, la_gguf_vtype_name(kv->type));
    uint32_t a = le32(kv->raw);
    if (a == 0 || (a & (a - 1)))
        return la_fail(LA_EFORMAT, "%s: general.alignment = %u (byte %llu) is not a power of two",
                       path, a, (unsigned long long)kv->offset);
    g->alignment = a;
    return LA_OK;
}

static la_status read_tensor_infos(la_gguf *g, cursor *c) {
    /* each info needs at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes */
    if ((uint64_t)g->n_tensors > (c->size - c->pos) / 24)
        return la_fail(LA_EFORMAT, "%s: header claims %llu tensors (byte 8) but the file has "
                       "only %llu bytes left for their descriptions (corrupt or truncated file)",
                       c->path, (unsigned long long)g->n_tensors,
                       (unsigned long long)(c->size - c->pos));
    g->t = la_calloc((size_t)g->n_tensors + 1, sizeof *g->t);
    if (!g->t || !table_init(&g->t_table, g->n_tensors))
        return la_fail(LA_ENOMEM, "%s: out of memory for %lld tensors", c->path,
                       (long long)g->n_tensors);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        la_gguf_tensor *t = &g->t[i];
        LA_TRY(read_name(g, c, 0, i, &t->name));
        uint32_t nd;
        LA_TRY(rd_u32(c, "tensor n_dims", &nd));
        if (nd < 1 || nd > GGUF_MAX_DIMS)
            return la_fail(LA_EFORMAT, "%s: tensor '%s' has %u dimensions (byte %llu); 1 to %d are "
                           "valid", c->path, t->name, nd, (unsigned long long)(c->pos - 4),
                           GGUF_MAX_DIMS);
        t->n_dims = (int)nd;
        int64_t nelem = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) {
            uint64_t ne = 1;
            if (d < (int)nd) LA_TRY(rd_u64(c, "tensor dimension", &ne));
            if (ne > (uint64_t)INT64_MAX || __builtin_mul_overflow(nelem, (int64_t)ne, &nelem))
                return la_fail(LA_EFORMAT, "%s: tensor '%s': dimensions overflow 64 bits (ne[%d] = "
                               "%llu at byte %llu)", c->path, t->name, d,
                               (unsigned long long)ne, (unsigned long long)(c->pos - 8));
            t->ne[d] = (int64_t)ne;
        }
        LA_TRY(rd_u32(c, "tensor type", &t->type));
        if (!la_ggml_type_known(t->type))
            return la_fail(LA_EFORMAT, "%s: tensor '%s' has unknown type id %u (byte %llu)", c->path,
                           t->name, t->type, (unsigned long long)(c->pos - 4));
        int64_t bs = la_ggml_block_size(t->type);
        if (t->ne[0] % bs)
            return la_fail(LA_EFORMAT, "%s: tensor '%s' of type %s has rows of %lld values, not a "
                           "multiple of its block size %lld", c->path, t->name,
                           la_ggml_type_name(t->type), (long long)t->ne[0], (long long)bs);
        uint64_t nb = (uint64_t)la_ggml_block_bytes(t->type), nbytes;
        if (__builtin_mul_overflow((uint64_t)(nelem / bs), nb, &nbytes))
            return la_fail(LA_EFORMAT, "%s: tensor '%s': byte size overflows 64 bits", c->path,
                           t->name);
        t->nbytes = nbytes;
        LA_TRY(rd_u64(c, "tensor offset", &t->offset));
        if (t->offset % g->alignment)
            return la_fail(LA_EFORMAT, "%s: tensor '%s' has data offset %llu (byte %llu), not a "
                           "multiple of the alignment %llu", c->path, t->name,
                           (unsigned long long)t->offset, (unsigned long long)(c->pos - 8),
                           (unsigned long long)g->alignment);
    }
    return LA_OK;
}

static la_status place_tensors(la_gguf *g, const char *path, uint64_t info_end) {
    uint64_t a = g->alignment, off;
    if (__builtin_add_overflow(info_end, a - 1, &off)) off = UINT64_MAX;
    g->data_offset = off / a * a;
    uint64_t data_size = g->size > g->data_offset ? g->size - g->data_offset : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        la_gguf_tensor *t = &g->t[i];
        uint64_t end;
        if (g->data_offset > g->size || __builtin_add_overflow(t->offset, t->nbytes, &end) ||
            end > data_size)
            return la_fail(LA_EFORMAT, "%s: tensor '%s' (%s, %llu bytes at data offset %llu) ends "
                           "beyond the end of the file: the data section starts at byte %llu and "
                           "holds %llu bytes (truncated or corrupt file)", path, t->name,
                           la_ggml_type_name(t->type), (unsigned long long)t->nbytes,
                           (unsigned long long)t->offset, (unsigned long long)g->data_offset,
                           (unsigned long long)data_size);
        t->data = g->map + g->data_offset + t->offset;
    }
    return LA_OK;
}

static la_status parse(la_gguf *g, const char *path) {
    cursor c = {g->map, g->size, 0, path};
    LA_TRY(need(&c, 4, "magic"));
    if (memcmp(g->map, "GGUF", 4))
        return la_fail(LA_EFORMAT, "%s: not a GGUF file (the first bytes are not \"GGUF\")", path);
    c.pos = 4;
    LA_TRY(rd_u32(&c, "version", &g->version));
    if ((g->version & 0xffff) == 0 && (g->version >> 24 == 2 || g->version >> 24 == 3))
        return la_fail(LA_EUNSUPPORTED, "%s: big-endian GGUF file (version %u byte-swapped); "
                       "longattn reads little-endian files only (convert it with gguf-py)",
                       path, g->version >> 24);
    if (g->version == 1)
        return la_fail(LA_EUNSUPPORTED, "%s: GGUF version 1 is not supported (versions 2 and 3 "
                       "are): re-convert the model with a current llama.cpp", path);
    if (g->version != 2 && g->version != 3)
        return la_fail(LA_EFORMAT, "%s: unknown GGUF version %u at byte 4 (2 and 3 are valid)",
                       path, g->version);
    uint64_t nt, nkv;
    LA_TRY(rd_u64(&c, "tensor count", &nt));
    LA_TRY(rd_u64(&c, "metadata count", &nkv));
    if (nt > (uint64_t)INT64_MAX / 2 || nkv > (uint64_t)INT64_MAX / 2)
        return la_fail(LA_EFORMAT, "%s: absurd counts in the header (%llu tensors, %llu keys)",
                       path, (unsigned long long)nt, (unsigned long long)nkv);
    g->n_tensors = (int64_t)nt;
    g->n_kv = (int64_t)nkv;
    LA_TRY(read_kvs(g, &c));
    LA_TRY(read_alignment(g, path));
    LA_TRY(read_tensor_infos(g, &c));
    return place_tensors(g, path, c.pos);
}

/* Parse g: *out = g when it parses, else g is closed. */
static la_status parse_or_close(la_gguf *g, const char *path, la_gguf **out) {
    la_status s = parse(g, path);
    if (s != LA_OK) {
        la_gguf_close(g);
        return s;
    }
    *out = g;
    return LA_OK;
}

la_status la_gguf_open(const char *path, la_gguf **out) {
    if (!out) return la_fail(LA_EINVAL, "la_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return la_fail(LA_EINVAL, "la_gguf_open: path is NULL");
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO is refused below, not waited on */
    if (fd < 0) return la_fail(LA_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return la_fail(LA_EIO, "%s: not a regular file", path);
    }
    la_gguf *g = la_calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return la_fail(LA_ENOMEM, "%s: out of memory", path);
    }
    snprintf(g->path, sizeof g->path, "%s", path);
    g->size = (uint64_t)st.st_size;
    if (g->size == 0) {
        close(fd);
        la_gguf_close(g);
        return la_fail(LA_EFORMAT, "%s: empty file (0 bytes), not a GGUF file", path);
    }
    void *m = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        la_gguf_close(g);
        return la_fail(LA_EIO, "%s: cannot map %llu bytes: %s", path,
                       (unsigned long long)st.st_size, strerror(errno));
    }
    g->map = m;
    g->mapped = 1;
    return parse_or_close(g, path, out);
}

la_status la_gguf_open_mem(const void *data, size_t size, const char *name, la_gguf **out) {
    if (!out) return la_fail(LA_EINVAL, "la_gguf_open_mem: out is NULL");
    *out = NULL;
    if (!data && size) return la_fail(LA_EINVAL, "la_gguf_open_mem: data is NULL");
    if (!name) name = "(memory)";
    if (size == 0) return la_fail(LA_EFORMAT, "%s: empty buffer (0 bytes), not a GGUF file", name);
    la_gguf *g = la_calloc(1, sizeof *g);
    if (!g) return la_fail(LA_ENOMEM, "%s: out of memory", name);
    snprintf(g->path, sizeof g->path, "%s", name);
    g->map = data;
    g->size = size;
    return parse_or_close(g, name, out);
}

void la_gguf_close(la_gguf *g) {
    if (!g) return;
    if (g->map && g->mapped) munmap((void *)g->map, (size_t)g->size);
    for (int64_t i = 0; i < g->n_blocks; i++) free(g->blocks[i]);
    free(g->blocks);
    free(g->kv);
    free(g->t);
    free(g->kv_table.slot);
    free(g->t_table.slot);
    arena_free(g->arena);
    free(g);
}

uint32_t la_gguf_version(const la_gguf *g) { return g->version; }
uint64_t la_gguf_alignment(const la_gguf *g) { return g->alignment; }
uint64_t la_gguf_data_offset(const la_gguf *g) { return g->data_offset; }
uint64_t la_gguf_file_size(const la_gguf *g) { return g->size; }
int64_t la_gguf_n_kv(const la_gguf *g) { return g->n_kv; }
int64_t la_gguf_n_tensors(const la_gguf *g) { return g->n_tensors; }

const la_gguf_kv *la_gguf_kv_at(const la_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const la_gguf_tensor *la_gguf_tensor_at(const la_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->t[i] : NULL;
}

const la_gguf_kv *la_gguf_find_kv(const la_gguf *g, const char *key) {
    if (!g || !key || !g->kv_table.slot) return NULL;
    uint64_t where;
    int64_t i = TABLE_FIND(&g->kv_table, key, KV_NAME, &where);
    return i >= 0 ? &g->kv[i] : NULL;
}

const la_gguf_tensor *la_gguf_find_tensor(const la_gguf *g, const char *name) {
    if (!g || !name || !g->t_table.slot) return NULL;
    uint64_t where;
    int64_t i = TABLE_FIND(&g->t_table, name, T_NAME, &where);
    return i >= 0 ? &g->t[i] : NULL;
}

la_status la_gguf_get_tensor(const la_gguf *g, const char *name, const la_gguf_tensor **out) {
    if (!g || !name || !out) return la_fail(LA_EINVAL, "la_gguf_get_tensor: NULL argument");
    const la_gguf_tensor *t = la_gguf_find_tensor(g, name);
    if (!t) return la_fail(LA_EFORMAT, "%s: no tensor named '%s' in the file (`longattn gguf info "
                           "%s` lists them)", g->path, name, g->path);
    *out = t;
    return LA_OK;
}

int64_t la_gguf_tensor_nelem(const la_gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t la_gguf_tensor_nrows(const la_gguf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* ---- value accessors ---- */

static int is_int_type(int t) {
    return t == LA_GGUF_U8 || t == LA_GGUF_I8 || t == LA_GGUF_U16 || t == LA_GGUF_I16 ||
           t == LA_GGUF_U32 || t == LA_GGUF_I32 || t == LA_GGUF_U64 || t == LA_GGUF_I64 ||
           t == LA_GGUF_BOOL;
}

static int elem_type(const la_gguf_kv *kv) { return kv->type == LA_GGUF_ARR ? kv->arr_type : kv->type; }

/* Element i as a signed 128-bit-safe pair: *neg set when negative, magnitude in *mag. */
static void int_elem(const la_gguf_kv *kv, uint64_t i, int *neg, uint64_t *mag) {
    int t = elem_type(kv);
    const uint8_t *p = kv->raw + i * scalar_size((uint32_t)t);
    int64_t s = 0;
    uint64_t u = 0;
    int is_signed = 1;
    switch (t) {
    case LA_GGUF_U8: case LA_GGUF_BOOL: u = p[0]; is_signed = 0; break;
    case LA_GGUF_I8: s = (int8_t)p[0]; break;
    case LA_GGUF_U16: u = (uint16_t)(p[0] | p[1] << 8); is_signed = 0; break;
    case LA_GGUF_I16: s = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case LA_GGUF_U32: u = le32(p); is_signed = 0; break;
    case LA_GGUF_I32: s = (int32_t)le32(p); break;
    case LA_GGUF_U64: u = le64(p); is_signed = 0; break;
    case LA_GGUF_I64: s = (int64_t)le64(p); break;
    default: break;
    }
    if (is_signed) {
        *neg = s < 0;
        *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    } else {
        *neg = 0;
        *mag = u;
    }
}

int64_t la_gguf_arr_int(const la_gguf_kv *kv, uint64_t i) {
    int neg = 0;
    uint64_t mag = 0;
    assert(is_int_type(elem_type(kv)) && i < kv->n);
    if (!is_int_type(elem_type(kv)) || i >= kv->n) return 0;
    int_elem(kv, i, &neg, &mag);
    if (neg) return mag == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)mag;
    return mag > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)mag;
}

uint64_t la_gguf_arr_uint(const la_gguf_kv *kv, uint64_t i) {
    int neg = 0;
    uint64_t mag = 0;
    assert(is_int_type(elem_type(kv)) && i < kv->n);
    if (!is_int_type(elem_type(kv)) || i >= kv->n) return 0;
    int_elem(kv, i, &neg, &mag);
    return neg ? 0 : mag;
}

double la_gguf_arr_float(const la_gguf_kv *kv, uint64_t i) {
    int t = elem_type(kv);
    assert(i < kv->n && (t == LA_GGUF_F32 || t == LA_GGUF_F64 || is_int_type(t)));
    if (i >= kv->n) return 0.0;
    if (t == LA_GGUF_F32) {
        uint32_t b = le32(kv->raw + 4 * i);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    if (t == LA_GGUF_F64) {
        uint64_t b = le64(kv->raw + 8 * i);
        double f;
        memcpy(&f, &b, 8);
        return f;
    }
    if (!is_int_type(t)) return 0.0;
    int neg = 0;
    uint64_t mag = 0;
    int_elem(kv, i, &neg, &mag);
    return neg ? -(double)mag : (double)mag;
}

const char *la_gguf_arr_str(const la_gguf_kv *kv, uint64_t i, uint64_t *len) {
    assert(elem_type(kv) == LA_GGUF_STR && i < kv->n);
    if (elem_type(kv) != LA_GGUF_STR || i >= kv->n) return NULL;
    if (len) *len = kv->len[i];
    return kv->str[i];
}

/* ---- typed lookups ---- */

static la_status lookup(const la_gguf *g, const char *key, const la_gguf_kv **kv) {
    if (!g || !key) return la_fail(LA_EINVAL, "la_gguf_get: NULL file or key");
    *kv = la_gguf_find_kv(g, key);
    if (!*kv) return la_fail(LA_EFORMAT, "%s: metadata key '%s' is missing", g->path, key);
    return LA_OK;
}

static la_status get_int(const la_gguf *g, const char *key, int64_t lo, uint64_t hi,
                         const char *want, int *neg, uint64_t *mag) {
    const la_gguf_kv *kv;
    LA_TRY(lookup(g, key, &kv));
    if (kv->type == LA_GGUF_BOOL || !is_int_type(kv->type))
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' has type %s; a %s was expected",
                       g->path, key, la_gguf_vtype_name(kv->type), want);
    int_elem(kv, 0, neg, mag);
    if ((*neg && *mag > (uint64_t)0 - (uint64_t)lo) || (!*neg && *mag > hi))
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' = %s%llu does not fit a %s", g->path,
                       key, *neg ? "-" : "", (unsigned long long)*mag, want);
    return LA_OK;
}

la_status la_gguf_get_u32(const la_gguf *g, const char *key, uint32_t *out) {
    int neg = 0;
    uint64_t mag = 0;
    LA_TRY(get_int(g, key, 0, UINT32_MAX, "u32", &neg, &mag));
    *out = (uint32_t)mag;
    return LA_OK;
}

la_status la_gguf_get_u64(const la_gguf *g, const char *key, uint64_t *out) {
    int neg = 0;
    uint64_t mag = 0;
    LA_TRY(get_int(g, key, 0, UINT64_MAX, "u64", &neg, &mag));
    *out = mag;
    return LA_OK;
}

la_status la_gguf_get_i32(const la_gguf *g, const char *key, int32_t *out) {
    int neg = 0;
    uint64_t mag = 0;
    LA_TRY(get_int(g, key, INT32_MIN, INT32_MAX, "i32", &neg, &mag));
    *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return LA_OK;
}

la_status la_gguf_get_i64(const la_gguf *g, const char *key, int64_t *out) {
    int neg = 0;
    uint64_t mag = 0;
    LA_TRY(get_int(g, key, INT64_MIN, INT64_MAX, "i64", &neg, &mag));
    *out = neg ? (mag == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return LA_OK;
}

la_status la_gguf_get_f64(const la_gguf *g, const char *key, double *out) {
    const la_gguf_kv *kv;
    LA_TRY(lookup(g, key, &kv));
    if (kv->type != LA_GGUF_F32 && kv->type != LA_GGUF_F64)
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' has type %s; a float (f32/f64) was "
                       "expected", g->path, key, la_gguf_vtype_name(kv->type));
    *out = la_gguf_arr_float(kv, 0);
    return LA_OK;
}

la_status la_gguf_get_f32(const la_gguf *g, const char *key, float *out) {
    double d = 0;
    LA_TRY(la_gguf_get_f64(g, key, &d));
    *out = (float)d;
    return LA_OK;
}

la_status la_gguf_get_bool(const la_gguf *g, const char *key, int *out) {
    const la_gguf_kv *kv;
    LA_TRY(lookup(g, key, &kv));
    if (kv->type != LA_GGUF_BOOL)
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' has type %s; a bool was expected",
                       g->path, key, la_gguf_vtype_name(kv->type));
    *out = kv->raw[0];
    return LA_OK;
}

la_status la_gguf_get_str(const la_gguf *g, const char *key, const char **out) {
    const la_gguf_kv *kv;
    LA_TRY(lookup(g, key, &kv));
    if (kv->type != LA_GGUF_STR)
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' has type %s; a string was expected",
                       g->path, key, la_gguf_vtype_name(kv->type));
    *out = kv->str[0];
    return LA_OK;
}

la_status la_gguf_get_arr(const la_gguf *g, const char *key, la_gguf_vtype elem,
                          const la_gguf_kv **out) {
    const la_gguf_kv *kv;
    LA_TRY(lookup(g, key, &kv));
    if (kv->type != LA_GGUF_ARR)
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' has type %s; an array was expected",
                       g->path, key, la_gguf_vtype_name(kv->type));
    if (elem != LA_GGUF_ANY && kv->arr_type != elem)
        return la_fail(LA_EFORMAT, "%s: metadata key '%s' is an array of %s; an array of %s was "
                       "expected", g->path, key, la_gguf_vtype_name(kv->arr_type),
                       la_gguf_vtype_name(elem));
    *out = kv;
    return LA_OK;
}
