/* fuzz_textdir.c -- text-directory loading. The first input byte picks the layout (bit 0:
 * study layout with train/ and val/ folders, bit 1: also a hidden file, bits 2-3: the
 * validation fraction 0, 0.1, 0.5, 0.9); the rest is split at every 0xFF byte into up to
 * 8 files (f0, f1, ...; in the study layout the odd ones go to val/). The folder is read
 * with la_data_open and la_docs_load, then sampled. */
#include "fuzz_util.h"
#include "longattn.h"

static void exercise(la_data *d) {
    int32_t buf[2 * 17];
    if (la_data_sample(d, 2, 16, buf) == LA_OK)
        for (int i = 0; i < 34; i++) FZ_CHECK(buf[i] >= 0 && buf[i] < 256, "sampled token %d", buf[i]);
    if (la_data_val_batch(d, 3, 2, 16, buf) == LA_OK)
        for (int i = 0; i < 34; i++) FZ_CHECK(buf[i] >= 0 && buf[i] < 256, "val token %d", buf[i]);
    int64_t total = 0;
    for (int s = 0; s < 2; s++) {
        int nd = la_data_num_docs(d, (la_split)s);
        int64_t sum = 0;
        for (int i = 0; i < nd; i++) sum += la_data_doc_len(d, (la_split)s, i);
        FZ_CHECK(sum == la_data_num_tokens(d, (la_split)s), "split %d: doc lengths do not add up", s);
        total += sum;
    }
    FZ_CHECK(total > 0, "opened data without tokens");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++, size--;
    char dir[512], sub[600], path[700];
    snprintf(dir, sizeof dir, "%s/t", fz_tmpdir());
    fz_rmtree(dir);
    mkdir(dir, 0700);
    int study = mode & 1;
    if (study) {
        snprintf(sub, sizeof sub, "%s/train", dir);
        mkdir(sub, 0700);
        snprintf(sub, sizeof sub, "%s/val", dir);
        mkdir(sub, 0700);
    }
    size_t start = 0;
    int nf = 0;
    for (size_t i = 0; i <= size && nf < 8; i++) {
        if (i < size && data[i] != 0xFF) continue;
        const char *where = study ? (nf % 2 ? "/val" : "/train") : "";
        snprintf(path, sizeof path, "%s%s/f%d", dir, where, nf);
        fz_write(path, data + start, i - start);
        nf++;
        start = i + 1;
    }
    if (mode & 2) {
        snprintf(path, sizeof path, "%s%s/.hidden", dir, study ? "/train" : "");
        fz_write(path, (const uint8_t *)"hidden", 6);
    }
    static const double fracs[4] = {0, 0.1, 0.5, 0.9};
    la_data_config cfg = la_data_config_default();
    cfg.val_fraction = fracs[(mode >> 2) & 3];
    la_data *d = NULL;
    if (la_data_open(dir, &cfg, &d) == LA_OK) {
        exercise(d);
        la_data_free(d);
    }
    la_docs docs;
    const char *ddir = dir;
    if (study) {
        snprintf(sub, sizeof sub, "%s/train", dir);
        ddir = sub;
    }
    if (la_docs_load(ddir, &docs) == LA_OK) {
        FZ_CHECK(docs.n_docs >= 1 && docs.offset[docs.n_docs] == docs.n_tokens, "docs offsets");
        for (int64_t i = 0; i < docs.n_tokens; i++)
            FZ_CHECK(docs.tokens[i] >= 0 && docs.tokens[i] < 256, "docs token %d", docs.tokens[i]);
        la_docs_free(&docs);
    }
    return 0;
}
