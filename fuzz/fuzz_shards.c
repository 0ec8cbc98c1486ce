/* fuzz_shards.c -- llm.c token shards: the input is written as <tmp>/s/fuzz_val_000.bin or
 * <tmp>/s/fuzz_train_000.bin (by the parity of its size: both naming rules get exercised)
 * and read with la_data_open (file and folder) and la_docs_load (folder). On success the
 * samplers run and every token must lie inside the vocabulary. */
#include "fuzz_util.h"
#include "longattn.h"

static void exercise(la_data *d) {
    int32_t buf[3 * 9];
    int V = la_data_vocab(d);
    if (la_data_sample(d, 3, 8, buf) == LA_OK)
        for (int i = 0; i < 27; i++) FZ_CHECK(buf[i] >= 0 && buf[i] < V, "sampled token %d", buf[i]);
    if (la_data_val_batch(d, 1, 3, 8, buf) == LA_OK)
        for (int i = 0; i < 27; i++) FZ_CHECK(buf[i] >= 0 && buf[i] < V, "val token %d", buf[i]);
    for (int s = 0; s < 2; s++) {
        int nd = la_data_num_docs(d, (la_split)s);
        for (int i = 0; i < nd && i < 4; i++) {
            int64_t len = la_data_doc_len(d, (la_split)s, i);
            FZ_CHECK(len >= 0, "doc %d has length %lld", i, (long long)len);
            if (len > 0 && len <= 9) FZ_CHECK(la_data_read(d, (la_split)s, i, 0, len, buf) == LA_OK, "read doc");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/s", fz_tmpdir());
    fz_rmtree(dir);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/%s", dir, size % 2 ? "fuzz_val_000.bin" : "fuzz_train_000.bin");
    fz_write(path, data, size);
    la_data_config cfg = la_data_config_default();
    la_data *d = NULL;
    if (la_data_open(path, &cfg, &d) == LA_OK) {
        exercise(d);
        la_data_free(d);
    }
    if (la_data_open(dir, &cfg, &d) == LA_OK) {
        exercise(d);
        la_data_free(d);
    }
    la_docs docs;
    if (la_docs_load(dir, &docs) == LA_OK) {
        FZ_CHECK(docs.n_docs >= 1 && docs.offset[docs.n_docs] == docs.n_tokens, "docs offsets");
        for (int64_t i = 0; i < docs.n_tokens; i++)
            FZ_CHECK(docs.tokens[i] >= 0 && docs.tokens[i] < docs.vocab, "docs token %d", docs.tokens[i]);
        (void)la_docs_longest(&docs);
        la_docs_free(&docs);
    }
    return 0;
}
