/* study_file.c -- the study file of `longattn study`: a JSON object (parsed with cJSON)
 * naming the data, the model, the training run, the evaluation lengths, the passkey grid
 * and the attention specs to compare. Strict: every key is known, every value is checked,
 * and each error names the file, the key, the problem and the fix. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/internal.h"
#include "longattn/experiments.h"

/* Report "<where>: key "k": ..." as LA_EFORMAT. */
#define BAD(...) la_fail(LA_EFORMAT, __VA_ARGS__)

/* line:column of byte p in text (1-based) */
static void line_col(const char *text, const char *p, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *c = text; *c && c < p; c++) {
        if (*c == '\n') { (*line)++; *col = 1; } else (*col)++;
    }
}

/* Keys of obj must be in allowed (NULL-terminated) and appear once. */
static la_status check_keys(const cJSON *obj, const char *const *allowed, const char *where,
                            const char *section) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        int known = 0;
        for (int i = 0; allowed[i]; i++) known |= !strcmp(it->string, allowed[i]);
        if (!known) {
            char list[512] = "";
            for (int i = 0; allowed[i]; i++) {
                strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
                strncat(list, allowed[i], sizeof list - strlen(list) - 1);
            }
            return BAD("%s: unknown key \"%s\"%s%s; valid keys are: %s", where, it->string,
                       section ? " in " : "", section ? section : "", list);
        }
        for (const cJSON *o = it->next; o; o = o->next)
            if (!strcmp(o->string, it->string))
                return BAD("%s: key \"%s\" appears twice; keep one", where, it->string);
    }
    return LA_OK;
}

/* Integer value of key (dotted name for messages) in [lo, hi]; missing -> keep *v. */
static la_status get_int(const cJSON *obj, const char *key, const char *name, int lo, int hi,
                         int required, const char *where, int *v) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) return required ? BAD("%s: key \"%s\" is missing; add it (a whole number >= %d)", where, name, lo) : LA_OK;
    double x = it->valuedouble;
    if (!cJSON_IsNumber(it) || x != floor(x))
        return BAD("%s: key \"%s\" must be a whole number, e.g. \"%s\": %d", where, name, key, lo > 1 ? lo : 1);
    if (x < lo || x > hi)
        return BAD("%s: key \"%s\" is %.0f; it must be between %d and %d", where, name, x, lo, hi);
    *v = (int)x;
    return LA_OK;
}

static la_status get_num(const cJSON *obj, const char *key, const char *name, double lo, double hi,
                         int required, const char *where, double *v) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) return required ? BAD("%s: key \"%s\" is missing; add it (a number in (%g, %g])", where, name, lo, hi) : LA_OK;
    if (!cJSON_IsNumber(it)) return BAD("%s: key \"%s\" must be a number, e.g. \"%s\": 0.001", where, name, key);
    double x = it->valuedouble;
    if (!(x > lo && x <= hi))
        return BAD("%s: key \"%s\" is %g; it must be > %g and <= %g", where, name, x, lo, hi);
    *v = x;
    return LA_OK;
}

/* Strictly increasing list of integers >= lo. */
static la_status get_lens(const cJSON *obj, const char *key, const char *name, int lo, const char *where,
                          int *lens, int *n, int *given) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *given = it != NULL;
    if (!it) return LA_OK;
    int m = cJSON_GetArraySize(it);
    if (!cJSON_IsArray(it) || m < 1)
        return BAD("%s: key \"%s\" must be a non-empty list of lengths in tokens, e.g. [128, 512, 2048]", where, name);
    if (m > LA_STUDY_MAX_LENS)
        return BAD("%s: key \"%s\" lists %d lengths; at most %d are supported", where, name, m, LA_STUDY_MAX_LENS);
    int i = 0;
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        double x = e->valuedouble;
        if (!cJSON_IsNumber(e) || x != floor(x) || x < lo || x > (1 << 24))
            return BAD("%s: key \"%s\": entry %d must be a whole number of tokens between %d and %d", where,
                       name, i + 1, lo, 1 << 24);
        lens[i] = (int)x;
        if (i > 0 && lens[i] <= lens[i - 1])
            return BAD("%s: key \"%s\": lengths must be strictly increasing (%d comes after %d); list each "
                       "length once, shortest first, e.g. [128, 512, 2048]", where, name, lens[i], lens[i - 1]);
    }
    *n = m;
    return LA_OK;
}

static la_status parse_model(const cJSON *m, const char *where, la_study *s) {
    if (!cJSON_IsObject(m))
        return BAD("%s: key \"model\" must be an object, e.g. {\"n_layer\": 4, \"d_model\": 128, "
                   "\"n_head\": 4, \"n_kv_head\": 4}", where);
    static const char *const keys[] = {"n_layer", "d_model", "n_head", "n_kv_head", "qk_gain", NULL};
    LA_TRY(check_keys(m, keys, where, "\"model\""));
    LA_TRY(get_int(m, "n_layer", "model.n_layer", 1, 256, 0, where, &s->n_layer));
    LA_TRY(get_int(m, "d_model", "model.d_model", 2, 1 << 16, 0, where, &s->d_model));
    LA_TRY(get_int(m, "n_head", "model.n_head", 1, 1024, 0, where, &s->n_head));
    s->n_kv_head = s->n_head;
    LA_TRY(get_int(m, "n_kv_head", "model.n_kv_head", 1, 1024, 0, where, &s->n_kv_head));
    LA_TRY(get_num(m, "qk_gain", "model.qk_gain", 0, 100, 0, where, &s->qk_gain));
    if (s->d_model % s->n_head)
        return BAD("%s: key \"model.d_model\" (%d) must be a multiple of model.n_head (%d)", where, s->d_model, s->n_head);
    if ((s->d_model / s->n_head) % 2)
        return BAD("%s: key \"model.d_model\": the head size d_model/n_head = %d must be even (RoPE rotates pairs)",
                   where, s->d_model / s->n_head);
    if (s->n_head % s->n_kv_head)
        return BAD("%s: key \"model.n_kv_head\" (%d) must divide model.n_head (%d)", where, s->n_kv_head, s->n_head);
    return LA_OK;
}

static la_status parse_passkey(const cJSON *p, const char *where, la_study *s, int *lens_given) {
    if (!cJSON_IsObject(p))
        return BAD("%s: key \"passkey\" must be an object, e.g. {\"finetune_steps\": 100, \"lens\": [128, 512], "
                   "\"depths\": [0, 0.5, 1], \"trials\": 10}", where);
    static const char *const keys[] = {"finetune_steps", "finetune_lr", "lens", "depths", "trials", "pretrain_mix",
                                       "pretrain_targets", NULL};
    LA_TRY(check_keys(p, keys, where, "\"passkey\""));
    LA_TRY(get_int(p, "finetune_steps", "passkey.finetune_steps", 0, 10000000, 0, where, &s->pk_steps));
    LA_TRY(get_num(p, "finetune_lr", "passkey.finetune_lr", 0, 1, 0, where, &s->pk_lr));
    LA_TRY(get_int(p, "trials", "passkey.trials", 0, 1000000, 0, where, &s->pk_trials));
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(p, "pretrain_mix");
    if (mx) {
        if (!cJSON_IsNumber(mx) || !(mx->valuedouble >= 0 && mx->valuedouble <= 1))
            return BAD("%s: key \"passkey.pretrain_mix\" must be a fraction in [0, 1] of every pre-training "
                       "batch given to passkey examples, e.g. 0.25", where);
        s->pk_mix = mx->valuedouble;
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(p, "pretrain_targets");
    if (pt) {
        if (!cJSON_IsString(pt) || (strcmp(pt->valuestring, "answer") && strcmp(pt->valuestring, "all")))
            return BAD("%s: key \"passkey.pretrain_targets\" must be \"answer\" (the passkey rows of pre-training "
                       "are scored on the five answer digits) or \"all\" (on every byte)", where);
        s->pk_mix_all = !strcmp(pt->valuestring, "all");
    }
    LA_TRY(get_lens(p, "lens", "passkey.lens", 1, where, s->pk_lens, &s->n_pk_lens, lens_given));
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "depths");
    if (d) {
        int m = cJSON_GetArraySize(d);
        if (!cJSON_IsArray(d) || m < 1 || m > LA_STUDY_MAX_DEPTHS)
            return BAD("%s: key \"passkey.depths\" must be a list of 1 to %d fractions in [0, 1], e.g. "
                       "[0, 0.25, 0.5, 0.75, 1]", where, LA_STUDY_MAX_DEPTHS);
        int i = 0;
        for (const cJSON *e = d->child; e; e = e->next, i++) {
            if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble <= 1))
                return BAD("%s: key \"passkey.depths\": entry %d must be a fraction in [0, 1] (0 = needle at "
                           "the start, 1 = just before the question)", where, i + 1);
            s->pk_depths[i] = e->valuedouble;
            if (i > 0 && s->pk_depths[i] <= s->pk_depths[i - 1])
                return BAD("%s: key \"passkey.depths\": depths must be strictly increasing (%g comes after %g)",
                           where, s->pk_depths[i], s->pk_depths[i - 1]);
        }
        s->n_pk_depths = m;
    }
    return LA_OK;
}

static la_status parse_specs(const cJSON *sp, const char *where, la_study *s) {
    int m = cJSON_GetArraySize(sp);
    if (!cJSON_IsArray(sp) || m < 1 || m > LA_STUDY_MAX_SPECS)
        return BAD("%s: key \"specs\" must be a list of 1 to %d attention spec strings, e.g. "
                   "[\"softmax+rope\", \"softmax+sinv(tau=10)+prope(p=0.5)\"]", where, LA_STUDY_MAX_SPECS);
    char canon[LA_STUDY_MAX_SPECS][512]; /* canonical forms, to find repeats */
    int i = 0;
    for (const cJSON *e = sp->child; e; e = e->next, i++) {
        if (!cJSON_IsString(e) || !e->valuestring[0])
            return BAD("%s: key \"specs\": entry %d must be a non-empty string such as \"softmax+rope\"", where, i + 1);
        if (strlen(e->valuestring) >= sizeof s->specs[0])
            return BAD("%s: key \"specs\": entry %d is longer than %zu characters", where, i + 1, sizeof s->specs[0] - 1);
        la_spec parsed;
        la_status st = la_spec_parse(e->valuestring, &parsed);
        if (st == LA_OK) st = la_spec_validate(&parsed);
        if (st != LA_OK) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", la_errmsg());
            return la_fail(LA_ESPEC, "%s: key \"specs\": entry %d \"%s\" is not a valid attention spec: %s",
                           where, i + 1, e->valuestring, msg);
        }
        la_spec_format(&parsed, canon[i], sizeof canon[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(canon[j], canon[i]))
                return BAD("%s: key \"specs\": entries %d (\"%s\") and %d (\"%s\") are the same attention; "
                           "list each variant once", where, j + 1, s->specs[j], i + 1, e->valuestring);
        snprintf(s->specs[i], sizeof s->specs[i], "%s", e->valuestring);
    }
    s->n_specs = m;
    return LA_OK;
}

/* The study of the object root (every key checked) into *out. */
static la_status parse_root(const cJSON *root, const char *where, la_study *out) {
    la_study s;
    memset(&s, 0, sizeof s);
    int eval_given = 0, pk_lens_given = 0;
    static const char *const keys[] = {"name", "data", "model", "steps", "batch", "seq_len", "lr", "warmup",
                                       "seed", "seeds", "eval_lens", "eval_windows", "val_every", "passkey", "specs",
                                       "accum", "ranks_per_variant", "seq_parallel", "precision", NULL};
    if (!cJSON_IsObject(root)) return BAD("%s: the study file must be one JSON object {...}", where);
    LA_TRY(check_keys(root, keys, where, NULL));

    /* defaults that do not depend on other keys */
    s.n_layer = 4;
    s.d_model = 128;
    s.n_head = 4;
    s.n_kv_head = 4;
    s.seed = 1337;
    s.n_seeds = 1;
    s.eval_windows = 8;
    s.pk_trials = 10;
    s.qk_gain = 1.0;
    s.pk_mix = 0.0;
    s.pk_steps = -1;
    s.pk_lr = -1;
    s.accum = 1;
    s.ranks_per_variant = 1;
    s.warmup = -1;
    s.val_every = -1;
    static const double depths[] = {0, 0.25, 0.5, 0.75, 1};
    s.n_pk_depths = 5;
    memcpy(s.pk_depths, depths, sizeof depths);

    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (it) {
        if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof s.name)
            return BAD("%s: key \"name\" must be a string of at most %zu characters", where, sizeof s.name - 1);
        snprintf(s.name, sizeof s.name, "%s", it->valuestring);
    } else {
        const char *b = strrchr(where, '/');
        b = b ? b + 1 : where;
        snprintf(s.name, sizeof s.name, "%.*s", (int)(strcspn(b, ".") ? strcspn(b, ".") : strlen(b)), b);
    }
    it = cJSON_GetObjectItemCaseSensitive(root, "data");
    if (!it || !cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) >= sizeof s.data)
        return BAD("%s: key \"data\" %s; give the folder that holds train/ and val/, e.g. \"data\": \"data/pydoc\"",
                   where, it ? "must be a non-empty string" : "is missing");
    snprintf(s.data, sizeof s.data, "%s", it->valuestring);
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "model"))) LA_TRY(parse_model(it, where, &s));
    LA_TRY(get_int(root, "steps", "steps", 1, 100000000, 1, where, &s.steps));
    LA_TRY(get_int(root, "batch", "batch", 1, 1 << 20, 1, where, &s.batch));
    LA_TRY(get_int(root, "seq_len", "seq_len", 1, 1 << 24, 1, where, &s.seq_len));
    LA_TRY(get_int(root, "accum", "accum", 1, s.batch, 0, where, &s.accum));
    if (s.batch % s.accum)
        return BAD("%s: key \"accum\" (%d) must divide \"batch\" (%d): every step is accum micro-batches of "
                   "batch/accum rows; use a divisor of %d", where, s.accum, s.batch, s.batch);
    LA_TRY(get_int(root, "ranks_per_variant", "ranks_per_variant", 1, 1 << 16, 0, where, &s.ranks_per_variant));
    s.seq_parallel = 1;
    LA_TRY(get_int(root, "seq_parallel", "seq_parallel", 1, 1 << 16, 0, where, &s.seq_parallel));
    if (!cJSON_GetObjectItemCaseSensitive(root, "ranks_per_variant")) s.ranks_per_variant = s.seq_parallel;
    if (s.ranks_per_variant % s.seq_parallel)
        return BAD("%s: key \"seq_parallel\" (%d) must divide \"ranks_per_variant\" (%d): the ranks sharing a sequence "
                   "are part of one variant's group; use a ranks_per_variant that is a multiple of %d", where,
                   s.seq_parallel, s.ranks_per_variant, s.seq_parallel);
    if (s.seq_parallel > 1 && s.seq_len < 64 * (2 * s.seq_parallel - 1) + 1)
        return BAD("%s: key \"seq_parallel\" (%d): \"seq_len\" (%d) is too short to split over %d ranks (each holds 2 "
                   "of its 2 x %d pieces of whole 64-token tiles); use seq_len >= %d", where, s.seq_parallel,
                   s.seq_len, s.seq_parallel, s.seq_parallel, 64 * (2 * s.seq_parallel - 1) + 1);
    LA_TRY(get_num(root, "lr", "lr", 0, 1, 1, where, &s.lr));
    s.precision = LA_DTYPE_F32;
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "precision"))) {
        la_dtype t;
        if (!cJSON_IsString(it) || la_dtype_parse(it->valuestring, &t) != LA_OK ||
            (t != LA_DTYPE_F32 && t != LA_DTYPE_BF16))
            return BAD("%s: key \"precision\" must be \"f32\" or \"bf16\" (bf16 products with float32 "
                       "accumulation and master weights)", where);
        s.precision = t;
    }
    LA_TRY(get_int(root, "warmup", "warmup", 0, s.steps, 0, where, &s.warmup));
    it = cJSON_GetObjectItemCaseSensitive(root, "seed");
    if (it) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble > 9007199254740992.0)
            return BAD("%s: key \"seed\" must be a whole number between 0 and 2^53", where);
        s.seed = (uint64_t)it->valuedouble;
    }
    LA_TRY(get_int(root, "seeds", "seeds", 1, LA_STUDY_MAX_SEEDS, 0, where, &s.n_seeds));
    LA_TRY(get_lens(root, "eval_lens", "eval_lens", 1, where, s.eval_lens, &s.n_eval_lens, &eval_given));
    LA_TRY(get_int(root, "eval_windows", "eval_windows", 1, 1000000, 0, where, &s.eval_windows));
    LA_TRY(get_int(root, "val_every", "val_every", 1, 100000000, 0, where, &s.val_every));
    if ((it = cJSON_GetObjectItemCaseSensitive(root, "passkey"))) LA_TRY(parse_passkey(it, where, &s, &pk_lens_given));
    if (!(it = cJSON_GetObjectItemCaseSensitive(root, "specs")))
        return BAD("%s: key \"specs\" is missing; list the attention variants to compare, e.g. "
                   "\"specs\": [\"softmax+rope\", \"softmax+sinv(tau=10)+prope(p=0.5)\"]", where);
    LA_TRY(parse_specs(it, where, &s));

    /* defaults that depend on other keys */
    if (!eval_given) {
        int L = s.seq_len;
        s.n_eval_lens = 0;
        s.eval_lens[s.n_eval_lens++] = L;
        if ((int64_t)L * 4 <= (1 << 24)) s.eval_lens[s.n_eval_lens++] = 4 * L;
        if ((int64_t)L * 16 <= (1 << 24)) s.eval_lens[s.n_eval_lens++] = 16 * L;
    }
    if (s.warmup < 0) s.warmup = s.steps / 10;
    if (s.val_every < 0) s.val_every = s.steps / 4 > 0 ? s.steps / 4 : 1;
    if (s.pk_steps < 0) s.pk_steps = s.steps / 4;
    if (s.pk_lr < 0) s.pk_lr = s.lr / 3;
    if (!pk_lens_given) {
        s.n_pk_lens = s.n_eval_lens;
        memcpy(s.pk_lens, s.eval_lens, sizeof s.pk_lens);
    }
    if (s.pk_trials > 0) {
        int min_len = la_passkey_min_len();
        if (s.pk_lens[0] < min_len)
            return BAD("%s: key \"%s\": passkey length %d is too short for the needle, question and answer; "
                       "use lengths >= %d or set passkey.trials to 0", where,
                       pk_lens_given ? "passkey.lens" : "eval_lens (the default passkey.lens)", s.pk_lens[0], min_len);
        if (s.seq_len < min_len)
            return BAD("%s: key \"seq_len\" (%d) is shorter than a passkey example (%d); the passkey fine-tune runs "
                       "at the training length: raise seq_len or set passkey.trials to 0", where, s.seq_len, min_len);
    }
    if (s.pk_mix > 0 && s.seq_len < la_passkey_min_len())
        return BAD("%s: key \"passkey.pretrain_mix\": seq_len %d is shorter than a passkey example (%d); raise "
                   "seq_len or set pretrain_mix to 0", where, s.seq_len, la_passkey_min_len());
    *out = s;
    return LA_OK;
}

la_status la_study_parse(const char *text, const char *where, la_study *out) {
    if (!text || !out) return la_fail(LA_EINVAL, "la_study_parse: NULL argument");
    if (!where) where = "study file";
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        int line, col;
        line_col(text, end ? end : text, &line, &col);
        return BAD("%s:%d:%d: not valid JSON near here; a study file is one JSON object such as "
                   "{\"data\": \"data/pydoc\", \"steps\": 400, ...} (no comments, no trailing commas)", where, line, col);
    }
    la_status st = parse_root(root, where, out);
    cJSON_Delete(root);
    return st;
}

la_status la_study_load(const char *path, la_study *out) {
    if (!path || !out) return la_fail(LA_EINVAL, "la_study_load: NULL argument");
    char *buf;
    size_t n;
    la_status st = la_read_file(path, 1u << 24, &buf, &n);
    if (st == LA_EINVAL) return BAD("%s: larger than 16 MiB; is this really a study file?", path);
    if (st == LA_EIO)
        return la_fail(st, "study file: %s (the default ones are studies/default.json and studies/quick.json)",
                       la_errmsg());
    if (st != LA_OK) return st;
    if (strlen(buf) != n) st = BAD("%s: contains a NUL byte; a study file is JSON text", path);
    else st = la_study_parse(buf, path, out);
    free(buf);
    return st;
}
