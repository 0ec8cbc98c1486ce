/* tokenize.c -- `longattn tokenize`: the tokenizer of a GGUF model file on a text.
 *   longattn tokenize --model FILE.gguf (--text FILE | --prompt TEXT) [--ids]
 *                     [--add-special] [--no-parse-special]
 *   longattn tokenize --model FILE.gguf --decode "ID ID ..." [--skip-special] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/internal.h"
#include "longattn.h"

static const cli_doc DOC = {
    "longattn tokenize --model FILE.gguf (--text FILE | --prompt TEXT) [--ids]\n"
    "                  [--add-special] [--no-parse-special]\n"
    "longattn tokenize --model FILE.gguf --decode \"ID ID ...\" [--skip-special]",
    "Tokenize with the tokenizer stored in the GGUF file (tokenizer.ggml.*: byte-level BPE\n"
    "or SentencePiece BPE). Prints one token a line: id and its text (escaped), then the\n"
    "count.",
    NULL,
    0,
};

static void print_escaped(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c == '\r') printf("\\r");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
}

static int run_decode(la_tokenizer *t, const char *list, int flags) {
    /* every id takes at least one character of the list */
    la_token_buf b = {malloc(sizeof(int32_t) * (strlen(list) + 1)), 0, 0};
    const char *p = list;
    int rc = 0;
    if (!b.ids) return 1;
    while (*p) {
        if (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t') { p++; continue; }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= la_tokenizer_n_vocab(t)) {
            fprintf(stderr, "longattn tokenize: --decode: \"%.*s\" is not a token id of this vocabulary [0, %d)\n",
                    (int)(end > p ? end - p : (long)strcspn(p, " ,\n\t")), p, la_tokenizer_n_vocab(t));
            la_token_buf_free(&b);
            return 2;
        }
        b.ids[b.n++] = (int32_t)v;
        p = end;
    }
    if (!b.n) {
        fprintf(stderr, "longattn tokenize: --decode '%s' names no token id\n", list);
        la_token_buf_free(&b);
        return 2;
    }
    char *text;
    size_t len;
    if (la_tokenizer_decode(t, b.ids, b.n, flags, &text, &len) != LA_OK) {
        fprintf(stderr, "longattn tokenize: %s\n", la_errmsg());
        rc = 1;
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
        free(text);
    }
    la_token_buf_free(&b);
    return rc;
}

int cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *text_path = NULL, *prompt = NULL, *decode = NULL;
    int ids_only = 0, add_special = 0, no_parse_special = 0, skip_special = 0;
    cli_arg args[] = {
        CLI_A_STR("--model FILE.gguf", "the GGUF file whose tokenizer is used", &model),
        CLI_A_STR("--text FILE", "tokenize this file", &text_path),
        CLI_A_STR("--prompt TEXT", "tokenize this text", &prompt),
        CLI_A_FLAG("--ids", "print only the ids, space-separated, on one line", &ids_only),
        CLI_A_FLAG("--add-special", "add BOS/EOS as the file asks (tokenizer.ggml.add_bos_token, ...)", &add_special),
        CLI_A_FLAG("--no-parse-special", "control tokens written in the text (<|im_start|>) are plain text\n"
                                         "(default: they become their ids, as Hugging Face tokenizers do)",
                   &no_parse_special),
        CLI_A_STR("--decode IDS", "print the text of the ids instead", &decode),
        CLI_A_FLAG("--skip-special", "with --decode: leave control tokens out", &skip_special),
        CLI_A_END,
    };
    int prc = cli_parse("tokenize", &DOC, args, argc, argv);
    if (prc >= 0) return prc;
    const int flags = (add_special ? LA_TOK_ADD_SPECIAL : 0) | (no_parse_special ? 0 : LA_TOK_PARSE_SPECIAL);
    const int dflags = skip_special ? LA_TOK_SKIP_SPECIAL : 0;
    if (!model) return cli_usage_error("tokenize", "--model FILE.gguf is required");
    if (!!text_path + !!prompt + !!decode != 1)
        return cli_usage_error("tokenize", "give exactly one of --text FILE, --prompt TEXT, --decode IDS");
    la_gguf *g;
    la_tokenizer *t;
    if (la_gguf_open(model, &g) != LA_OK) {
        fprintf(stderr, "longattn tokenize: %s\n", la_errmsg());
        return 1;
    }
    la_status s = la_tokenizer_from_gguf(g, &t);
    la_gguf_close(g);
    if (s != LA_OK) {
        fprintf(stderr, "longattn tokenize: %s: %s\n", model, la_errmsg());
        return 1;
    }
    if (decode) {
        int rc = run_decode(t, decode, dflags);
        la_tokenizer_free(t);
        return rc;
    }
    size_t len = prompt ? strlen(prompt) : 0;
    char *owned = NULL;
    if (!prompt && la_read_file(text_path, 0, &owned, &len) != LA_OK) {
        fprintf(stderr, "longattn tokenize: %s\n", la_errmsg());
        la_tokenizer_free(t);
        return 1;
    }
    const char *text = prompt ? prompt : owned;
    la_token_buf b = {0};
    int rc = 0;
    if (la_tokenizer_encode(t, text, len, flags, &b) != LA_OK) {
        fprintf(stderr, "longattn tokenize: %s\n", la_errmsg());
        rc = 1;
    } else if (ids_only) {
        for (int64_t i = 0; i < b.n; i++) printf(i ? " %d" : "%d", b.ids[i]);
        putchar('\n');
    } else {
        for (int64_t i = 0; i < b.n && rc == 0; i++) {
            char *piece;
            size_t plen;
            if (la_tokenizer_decode(t, &b.ids[i], 1, LA_TOK_KEEP_SPACE, &piece, &plen) != LA_OK) {
                fprintf(stderr, "longattn tokenize: %s\n", la_errmsg());
                rc = 1;
                break;
            }
            printf("%6d  ", b.ids[i]);
            print_escaped(piece, plen);
            putchar('\n');
            free(piece);
        }
        printf("%lld tokens, %zu bytes\n", (long long)b.n, len);
    }
    la_token_buf_free(&b);
    free(owned);
    la_tokenizer_free(t);
    return rc;
}
