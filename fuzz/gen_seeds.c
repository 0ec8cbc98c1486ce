/* gen_seeds.c -- writes the checkpoint seeds of fuzz/corpus/checkpoint and
 * fuzz/corpus/trainer_state with the library's own writers (tiny models so the files stay
 * a few KB). Usage: gen_seeds <corpus-dir>. Run by `make fuzz-corpus`. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "longattn.h"

static int save(const char *spec, int n_kv, int muon, const char *dir, const char *name) {
    la_model_config c = la_model_config_default();
    c.n_layer = 1, c.n_head = 2, c.n_kv_head = n_kv, c.d_model = 8, c.d_ff = 8, c.vocab = 16, c.train_len = 8;
    snprintf(c.spec, sizeof c.spec, "%s", spec);
    la_model *m = NULL;
    la_trainer *tr = NULL;
    la_train_config tc = la_train_config_default();
    tc.B = 1, tc.T = 4, tc.steps = 4;
    tc.optimizer = muon ? LA_OPT_MUON : LA_OPT_ADAMW;
    char path[1024], ck[1024], st[1100];
    snprintf(ck, sizeof ck, "/tmp/la_gen_seeds_%d", (int)getpid());
    if (la_model_new(&c, 3, &m) != LA_OK || la_trainer_new(m, NULL, &tc, &tr) != LA_OK) goto fail;
    if (la_trainer_save(tr, ck) != LA_OK) goto fail;
    snprintf(path, sizeof path, "%s/checkpoint/%s", dir, name);
    if (rename(ck, path) != 0) goto fail;
    snprintf(st, sizeof st, "%s.state", ck);
    snprintf(path, sizeof path, "%s/trainer_state/%s", dir, name);
    /* fuzz_trainer_state's trainer is softmax_rope's model (same config and seed, AdamW) */
    if (rename(st, path) != 0) goto fail;
    remove(st);
    la_trainer_free(tr);
    la_model_free(m);
    return 0;
fail:
    fprintf(stderr, "gen_seeds: %s: %s\n", name, la_errmsg());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seeds <corpus-dir>\n");
        return 2;
    }
    char d[1024];
    snprintf(d, sizeof d, "%s/checkpoint", argv[1]);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/trainer_state", argv[1]);
    mkdir(d, 0755);
    int bad = 0;
    bad |= save("softmax+rope+causal", 2, 0, argv[1], "softmax_rope");
    bad |= save("entmax(alpha=1.5)+nape+window(4)", 1, 1, argv[1], "entmax_gqa_muon");
    bad |= save("asentmax+nape", 2, 1, argv[1], "asentmax_muon");
    bad |= save("softmax+logn(s=0.25,train=8)+prope(p=0.5)+sinks(n=1,w=2)", 2, 0, argv[1], "logn_sinks");
    return bad;
}
