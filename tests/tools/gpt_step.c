/* gpt_step.c -- one forward and backward of the GPT (src/model) on given tokens, for
 * tests/python/test_bench_torch_train.py, which checks that bench/torch_train.py (the
 * PyTorch model `longattn bench train --python` compares against) is the same model.
 *
 *   gpt_step OUT.safetensors LAYERS D_MODEL HEADS T B < tokens
 *
 * Creates the model (seed 1, spec softmax+rope+causal, train_len T), saves its weights to
 * OUT.safetensors, reads B*T input tokens then B*T targets (whitespace-separated integers)
 * from stdin, and prints "loss L" (mean cross-entropy) and one line "grad NAME NORM" per
 * tensor (the L2 norm of its gradient, in double). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "longattn.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: gpt_step OUT.safetensors LAYERS D_MODEL HEADS T B < tokens\n");
        return 2;
    }
    la_model_config c = la_model_config_default();
    c.n_layer = atoi(argv[2]);
    c.d_model = atoi(argv[3]);
    c.n_head = atoi(argv[4]);
    int T = atoi(argv[5]), B = atoi(argv[6]);
    c.train_len = T;
    la_model *m = NULL;
    if (la_model_new(&c, 1, &m) != LA_OK || la_model_save(m, argv[1]) != LA_OK) {
        fprintf(stderr, "gpt_step: %s\n", la_errmsg());
        return 1;
    }
    int N = B * T;
    int32_t *tok = malloc(sizeof(int32_t) * 2 * (size_t)N);
    for (int i = 0; i < 2 * N; i++)
        if (scanf("%d", &tok[i]) != 1) {
            fprintf(stderr, "gpt_step: expected %d integers on stdin\n", 2 * N);
            return 2;
        }
    float loss;
    la_model_zero_grad(m);
    if (la_model_forward(m, tok, tok + N, B, T, &loss, NULL) != LA_OK || la_model_backward(m) != LA_OK) {
        fprintf(stderr, "gpt_step: %s\n", la_errmsg());
        return 1;
    }
    printf("loss %.9g\n", loss);
    const float *g = la_model_grads(m);
    for (int i = 0; i < la_model_num_tensors(m); i++) {
        la_tensor_info t;
        la_model_get_tensor(m, i, &t);
        double ss = 0;
        for (size_t j = 0; j < t.numel; j++) ss += (double)g[t.offset + j] * g[t.offset + j];
        printf("grad %s %.9g\n", t.name, sqrt(ss));
    }
    free(tok);
    la_model_free(m);
    return 0;
}
