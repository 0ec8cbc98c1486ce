/* chat_template.c -- the chat prompt of one user turn for the template families that
 * GGUF files name in tokenizer.chat_template (recognised by their marker tokens; there is
 * no Jinja engine):
 *   ChatML  (SmolLM2, Qwen):  <|im_start|>system\n{sys}<|im_end|>\n<|im_start|>user\n{msg}<|im_end|>\n<|im_start|>assistant\n
 *   Llama 3:  <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{sys}<|eot_id|>
 *             <|start_header_id|>user<|end_header_id|>\n\n{msg}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
 *   Llama 2:  [INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{msg} [/INST]   (BOS comes from the tokenizer)
 * The default system message is the one the template itself writes when the conversation
 * has none (SmolLM2's "You are a helpful AI assistant named SmolLM, ..."), taken from the
 * template text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "longattn/llama.h"
#include "longattn/tokenizer.h"

la_status la_chat_family_of(const char *tpl, la_chat_family *out) {
    if (!out) return la_fail(LA_EINVAL, "la_chat_family_of: out is NULL");
    if (!tpl) return la_fail(LA_EINVAL, "the model file has no chat template (tokenizer.chat_template); run without --chat");
    if (strstr(tpl, "<|im_start|>")) *out = LA_CHAT_CHATML;
    else if (strstr(tpl, "<|start_header_id|>")) *out = LA_CHAT_LLAMA3;
    else if (strstr(tpl, "[INST]")) *out = LA_CHAT_LLAMA2;
    else {
        char head[81];
        snprintf(head, sizeof head, "%s", tpl);
        for (char *c = head; *c; c++)
            if (*c == '\n') *c = ' ';
        return la_fail(LA_EUNSUPPORTED, "chat template not recognised: \"%s%s\" (recognised families: ChatML "
                       "<|im_start|>, Llama 3 <|start_header_id|>, Llama 2 [INST]); run without --chat",
                       head, strlen(tpl) > 80 ? "..." : "");
    }
    return LA_OK;
}

/* the template's literal default system message: the text after `marker` up to `end`,
 * when it contains no template syntax; NULL otherwise (malloc'ed) */
static char *default_system(const char *tpl, const char *marker, const char *end) {
    const char *p = strstr(tpl, marker);
    if (!p) return NULL;
    p += strlen(marker);
    const char *e = strstr(p, end);
    if (!e || e == p) return NULL;
    for (const char *c = p; c < e; c++)
        if (*c == '{' || *c == '}' || *c == '\'' || *c == '"') return NULL;
    char *s = la_malloc((size_t)(e - p) + 1);
    if (!s) return NULL;
    memcpy(s, p, (size_t)(e - p));
    s[e - p] = 0;
    return s;
}

la_status la_chat_apply(const char *tpl, const char *system, const char *user, char **out, const char **stop) {
    if (!out || !user) return la_fail(LA_EINVAL, "la_chat_apply: NULL user message or out");
    *out = NULL;
    la_chat_family fam;
    LA_TRY(la_chat_family_of(tpl, &fam));
    char *dflt = NULL;
    if (!system && fam == LA_CHAT_CHATML) dflt = default_system(tpl, "<|im_start|>system\\n", "<|im_end|>");
    if (!system && fam == LA_CHAT_CHATML && !dflt) dflt = default_system(tpl, "<|im_start|>system\n", "<|im_end|>");
    const char *sys = system ? system : dflt;
    size_t n = strlen(user) + (sys ? strlen(sys) : 0) + 256;
    char *s = la_malloc(n);
    if (!s) {
        free(dflt);
        return la_fail(LA_ENOMEM, "la_chat_apply: out of memory");
    }
    const char *st = "";
    switch (fam) {
    case LA_CHAT_CHATML:
        snprintf(s, n, "%s%s%s<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", sys ? "<|im_start|>system\n" : "",
                 sys ? sys : "", sys ? "<|im_end|>\n" : "", user);
        st = "<|im_end|>";
        break;
    case LA_CHAT_LLAMA3:
        snprintf(s, n, "<|begin_of_text|>%s%s%s<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n",
                 sys ? "<|start_header_id|>system<|end_header_id|>\n\n" : "", sys ? sys : "", sys ? "<|eot_id|>" : "", user);
        st = "<|eot_id|>";
        break;
    case LA_CHAT_LLAMA2:
        snprintf(s, n, "[INST] %s%s%s%s [/INST]", sys ? "<<SYS>>\n" : "", sys ? sys : "", sys ? "\n<</SYS>>\n\n" : "", user);
        st = "</s>";
        break;
    }
    free(dflt);
    *out = s;
    if (stop) *stop = st;
    return LA_OK;
}
