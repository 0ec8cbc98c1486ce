/* alloc.c -- the library's allocation hook: every malloc / calloc / realloc / strdup /
 * posix_memalign of the library goes through la_malloc / la_calloc / la_realloc / la_strdup /
 * la_aligned_alloc, so that a test can
 * make the n-th allocation fail (la_alloc_fail_at) and check that each caller returns
 * LA_ENOMEM, leaks nothing and leaves no partial output (issue 17). Memory comes from the
 * C allocator unchanged, so free() releases it (callers free library results with free()).
 * While armed, cJSON (headers of safetensors files, configs, study files) allocates through
 * the hook too (cJSON_InitHooks; disarming restores its defaults); PCRE2 allocates through
 * a general context whose functions call la_malloc (src/tokenizer/bpe.c). Disarmed, the hook costs one relaxed atomic load per allocation. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static long g_fail_at; /* 0: off; n: the n-th allocation after arming fails */
static long g_count;   /* allocations since arming */

static void *cjson_malloc(size_t n) { return la_malloc(n); }

void la_alloc_fail_at(long n) {
    __atomic_store_n(&g_count, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_fail_at, n > 0 ? n : 0, __ATOMIC_SEQ_CST);
    cJSON_Hooks h = {cjson_malloc, free};
    cJSON_InitHooks(n > 0 ? &h : NULL);
}

long la_alloc_count(void) { return __atomic_load_n(&g_count, __ATOMIC_SEQ_CST); }

static int fail_now(void) {
    long at = __atomic_load_n(&g_fail_at, __ATOMIC_RELAXED);
    if (!at) return 0;
    if (__atomic_add_fetch(&g_count, 1, __ATOMIC_SEQ_CST) != at) return 0;
    errno = ENOMEM;
    return 1;
}

void *la_malloc(size_t n) { return fail_now() ? NULL : malloc(n); }
void *la_calloc(size_t n, size_t size) { return fail_now() ? NULL : calloc(n, size); }
void *la_realloc(void *p, size_t n) { return fail_now() ? NULL : realloc(p, n); }
char *la_strdup(const char *s) { return fail_now() ? NULL : strdup(s); }

void *la_aligned_alloc(size_t align, size_t n) {
    void *p = NULL;
    if (fail_now() || posix_memalign(&p, align, n ? n : 1) != 0) return NULL;
    return p;
}

int la_json_begin(void) {
    int saved = errno;
    errno = 0;
    return saved;
}

cJSON *la_json_end(int saved, cJSON *tree) {
    if (errno == ENOMEM || !tree) {
        cJSON_Delete(tree);
        errno = ENOMEM; /* an enclosing bracket sees it too */
        return NULL;
    }
    errno = saved;
    return tree;
}

int la_json_put(cJSON *obj, const char *key, cJSON *item) {
    if (item && cJSON_AddItemToObject(obj, key, item)) return 1;
    cJSON_Delete(item);
    errno = ENOMEM;
    return 0;
}

int la_json_push(cJSON *arr, cJSON *item) {
    if (item && cJSON_AddItemToArray(arr, item)) return 1;
    cJSON_Delete(item);
    errno = ENOMEM;
    return 0;
}
