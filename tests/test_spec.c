/* test_spec.c -- attention spec strings (src/attn/spec.c, SPEC section 6): defaults, the
 * documented examples, canonical round trips over many random specs, and one test per
 * error class with checks on the message (it must name the bad token and the choices). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "core/internal.h"
#include "longattn.h"

/* Field-by-field equality, doubles compared bit for bit (padding is not compared). */
static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static void assert_spec_equal(const la_spec *a, const la_spec *b) {
    assert_int_equal(a->norm, b->norm);
    assert_true(same_double(a->alpha, b->alpha));
    assert_true(same_double(a->as_delta, b->as_delta));
    assert_true(same_double(a->as_gamma_range, b->as_gamma_range));
    assert_int_equal(a->pos, b->pos);
    assert_true(same_double(a->theta, b->theta));
    assert_true(same_double(a->rope_p, b->rope_p));
    assert_true(same_double(a->pos_scale, b->pos_scale));
    assert_int_equal(a->train_len, b->train_len);
    assert_true(same_double(a->beta_fast, b->beta_fast));
    assert_true(same_double(a->beta_slow, b->beta_slow));
    assert_int_equal(a->xform, b->xform);
    assert_true(same_double(a->logn_s, b->logn_s));
    assert_true(same_double(a->tau, b->tau));
    assert_true(same_double(a->gamma, b->gamma));
    assert_true(same_double(a->temp, b->temp));
    assert_int_equal(a->pattern, b->pattern);
    assert_int_equal(a->window, b->window);
    assert_int_equal(a->sinks, b->sinks);
    assert_int_equal(a->global, b->global);
}

static la_spec parse_ok(const char *text) {
    la_spec s;
    la_status st = la_spec_parse(text, &s);
    if (st != LA_OK) fail_msg("'%s' did not parse: %s", text, la_errmsg());
    assert_int_equal(la_spec_validate(&s), LA_OK);
    return s;
}

/* Parse must fail with LA_ESPEC, leave *out untouched, and the message must contain every
 * given fragment. */
static void parse_fails(const char *text, const char *frag1, const char *frag2, const char *frag3) {
    la_spec s = la_spec_default();
    s.window = 777; /* sentinel: must survive a failed parse */
    la_status st = la_spec_parse(text, &s);
    if (st != LA_ESPEC) fail_msg("'%s' should fail with LA_ESPEC, got %s", text, la_status_name(st));
    assert_int_equal(s.window, 777);
    const char *m = la_errmsg();
    const char *frags[3] = {frag1, frag2, frag3};
    for (int i = 0; i < 3; i++)
        if (frags[i] && !strstr(m, frags[i])) fail_msg("message for '%s' lacks '%s': %s", text, frags[i], m);
}

static void test_defaults(void **state) {
    (void)state;
    la_spec d = la_spec_default();
    assert_int_equal(d.norm, LA_NORM_SOFTMAX);
    assert_int_equal(d.pos, LA_POS_NOPE);
    assert_int_equal(d.xform, LA_XF_NONE);
    assert_int_equal(d.pattern, LA_PAT_CAUSAL);
    assert_true(d.alpha == 1.5 && d.as_delta == 1 && d.as_gamma_range == 2);
    assert_true(d.theta == 10000 && d.rope_p == 0.5 && d.pos_scale == 1 && d.train_len == 0);
    assert_true(d.beta_fast == 32 && d.beta_slow == 1);
    assert_true(d.logn_s == 0 && d.tau == 10 && d.gamma == 1 && d.temp == 1);
    assert_true(d.window == 0 && d.sinks == 0 && d.global == 0);
    assert_int_equal(la_spec_validate(&d), LA_OK);
    char buf[256];
    assert_int_equal(la_spec_format(&d, buf, sizeof buf), (int)strlen("softmax+nope+causal"));
    assert_string_equal(buf, "softmax+nope+causal");
    /* every category missing -> defaults; one given -> the others default */
    la_spec s = parse_ok("softmax");
    assert_spec_equal(&s, &d);
    s = parse_ok("causal");
    assert_spec_equal(&s, &d);
    s = parse_ok("  nope  ");
    assert_spec_equal(&s, &d);
    s = parse_ok("none+softmax");
    assert_spec_equal(&s, &d);
}

static void test_documented_examples(void **state) {
    (void)state;
    char buf[512];
    la_spec s = parse_ok("softmax+sinv(tau=10)+prope(p=0.5)+causal");
    assert_int_equal(s.xform, LA_XF_SINV);
    assert_true(s.tau == 10);
    assert_int_equal(s.pos, LA_POS_PROPE);
    assert_true(s.rope_p == 0.5 && s.theta == 10000);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+sinv(tau=10)+prope(p=0.5,theta=10000)+causal");

    s = parse_ok("entmax(alpha=1.5)+nape+window(512)");
    assert_int_equal(s.norm, LA_NORM_ENTMAX);
    assert_true(s.alpha == 1.5);
    assert_int_equal(s.pos, LA_POS_NAPE);
    assert_int_equal(s.pattern, LA_PAT_WINDOW);
    assert_int_equal(s.window, 512);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "entmax(alpha=1.5)+nape+window(w=512)");

    /* logn without s and train: accepted with s = 0, train = 0 (filled in by the trainer) */
    s = parse_ok("logn+prope");
    assert_int_equal(s.xform, LA_XF_LOGN);
    assert_true(s.logn_s == 0 && s.train_len == 0);
    assert_int_equal(s.pos, LA_POS_PROPE);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+logn(s=0,train=0)+prope(p=0.5,theta=10000)+causal");

    s = parse_ok("sinv+prope");
    assert_int_equal(s.xform, LA_XF_SINV);
    assert_true(s.tau == 10);

    /* positional arguments in documented order, whitespace everywhere */
    s = parse_ok(" yarn( 4 , 2048 ,16, 2, 500000 ) + qwen-logn ( train = 2048 ) + sinks(4, 256) ");
    assert_int_equal(s.pos, LA_POS_YARN);
    assert_true(s.pos_scale == 4 && s.train_len == 2048 && s.beta_fast == 16 && s.beta_slow == 2 &&
                s.theta == 500000);
    assert_int_equal(s.xform, LA_XF_QWEN_LOGN);
    assert_int_equal(s.pattern, LA_PAT_SINKS);
    assert_true(s.sinks == 4 && s.window == 256);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+qwen-logn(train=2048)+yarn(s=4,train=2048,beta_fast=16,beta_slow=2,"
                             "theta=500000)+sinks(n=4,w=256)");

    /* global(g) combines with window(w) in either order */
    s = parse_ok("window(8)+global(2)");
    assert_int_equal(s.pattern, LA_PAT_GLOBAL);
    assert_true(s.global == 2 && s.window == 8);
    la_spec t = parse_ok("global(g=2)+window(w=8)");
    assert_spec_equal(&s, &t);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+nope+global(g=2)+window(w=8)");

    s = parse_ok("sparsemax+alibi+full");
    assert_int_equal(s.norm, LA_NORM_SPARSEMAX);
    assert_true(s.alpha == 2);
    s = parse_ok("asentmax+nape");
    assert_true(s.alpha == 1.5 && s.as_delta == 1 && s.as_gamma_range == 2);
    s = parse_ok("asentmax(1.25, gamma_range=3)");
    assert_true(s.alpha == 1.25 && s.as_delta == 1 && s.as_gamma_range == 3);
    s = parse_ok("dynamic-ntk(s=2,train=32)+critical(0.5)");
    assert_true(s.pos == LA_POS_DYNAMIC_NTK && s.pos_scale == 2 && s.train_len == 32);
    assert_true(s.xform == LA_XF_CRITICAL && s.gamma == 0.5);
    s = parse_ok("pi(4)+critical(1)");
    assert_true(s.pos == LA_POS_PI && s.pos_scale == 4 && s.theta == 10000 && s.xform == LA_XF_CRITICAL);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+critical(gamma=1)+pi(s=4,theta=10000)+causal");
    s = parse_ok("pi(theta=500000, s=2.5)+sinks(4,64)");
    assert_true(s.pos == LA_POS_PI && s.pos_scale == 2.5 && s.theta == 500000 && s.pattern == LA_PAT_SINKS);
    s = parse_ok("ntk(8)+temp(x=0.7)");
    assert_true(s.pos == LA_POS_NTK && s.pos_scale == 8 && s.xform == LA_XF_TEMP && s.temp == 0.7);
    /* a shared train given to the position and the transform must agree; 0 means unset */
    s = parse_ok("logn(s=0.25)+yarn(s=2,train=64)");
    assert_true(s.train_len == 64 && s.logn_s == 0.25);
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+logn(s=0.25,train=64)+yarn(s=2,train=64,beta_fast=32,beta_slow=1,"
                             "theta=10000)+causal");
    s = parse_ok("yarn(s=2,train=64)+logn(s=0,train=0)");
    assert_int_equal(s.train_len, 64);
}

static void test_format_buffer_like_snprintf(void **state) {
    (void)state;
    la_spec s = parse_ok("entmax(alpha=1.5)+nape+window(512)");
    char full[256];
    int n = la_spec_format(&s, full, sizeof full);
    assert_int_equal(n, (int)strlen(full));
    assert_int_equal(la_spec_format(&s, NULL, 0), n);
    char small[10];
    memset(small, 'x', sizeof small);
    assert_int_equal(la_spec_format(&s, small, sizeof small), n);
    assert_int_equal(small[9], '\0');
    assert_memory_equal(small, full, 9);
}

/* Random valid specs over every kind with awkward doubles (0.1, 1/3, 1e-7, 12345.678...),
 * formatted, parsed back and compared bit for bit; the text is a fixed point. */
static double awkward(la_rng *r, double lo, double hi) {
    switch (la_rng_below(r, 4)) {
    case 0: return lo + (hi - lo) * la_rng_uniform(r);  /* 17 significant digits needed */
    case 1: return lo + (double)la_rng_below(r, 1000) / 1000.0 * (hi - lo);
    case 2: return nextafter(lo + (hi - lo) / 3.0, hi);
    default: return lo + (hi - lo) * 0.5;
    }
}

static void test_round_trip_random(void **state) {
    (void)state;
    la_rng r;
    la_rng_seed(&r, 20261130);
    char buf[512], buf2[512];
    for (int it = 0; it < 5000; it++) {
        la_spec s = la_spec_default();
        s.norm = (la_norm)la_rng_below(&r, 4);
        if (s.norm == LA_NORM_SPARSEMAX) s.alpha = 2;
        if (s.norm == LA_NORM_ENTMAX || s.norm == LA_NORM_ASENTMAX) s.alpha = awkward(&r, LA_ENTMAX_ALPHA_MIN, 4);
        if (s.norm == LA_NORM_ASENTMAX) {
            s.as_delta = awkward(&r, 0, 3);
            s.as_gamma_range = awkward(&r, 0, 5);
        }
        s.pos = (la_pos)la_rng_below(&r, 9);
        s.xform = (la_xform)la_rng_below(&r, 6);
        int train = 2 + (int)la_rng_below(&r, 100000);
        if (s.pos == LA_POS_ROPE || s.pos == LA_POS_PROPE || s.pos == LA_POS_NTK || s.pos == LA_POS_DYNAMIC_NTK ||
            s.pos == LA_POS_YARN || s.pos == LA_POS_PI)
            s.theta = awkward(&r, 1.5, 1e7);
        if (s.pos == LA_POS_PROPE) s.rope_p = la_rng_below(&r, 5) == 0 ? (double)la_rng_below(&r, 2) : awkward(&r, 0, 1);
        if ((s.pos >= LA_POS_NTK && s.pos <= LA_POS_YARN) || s.pos == LA_POS_PI) s.pos_scale = awkward(&r, 1, 64);
        if (s.pos == LA_POS_DYNAMIC_NTK || s.pos == LA_POS_YARN) s.train_len = train;
        if (s.pos == LA_POS_YARN) {
            s.beta_slow = awkward(&r, 0.01, 4);
            s.beta_fast = s.beta_slow + awkward(&r, 0.01, 64);
        }
        switch (s.xform) {
        case LA_XF_LOGN:
            s.logn_s = la_rng_below(&r, 2) ? 0 : awkward(&r, 0, 2);
            if (la_rng_below(&r, 2)) s.train_len = train;
            break;
        case LA_XF_QWEN_LOGN: s.train_len = train; break;
        case LA_XF_SINV: s.tau = awkward(&r, 1e-7, 1e5); break;
        case LA_XF_CRITICAL: s.gamma = awkward(&r, 1e-3, 10); break;
        case LA_XF_TEMP: s.temp = awkward(&r, 1e-3, 10); break;
        default: break;
        }
        s.pattern = (la_pattern)la_rng_below(&r, 5);
        if (s.pattern == LA_PAT_WINDOW || s.pattern == LA_PAT_SINKS || s.pattern == LA_PAT_GLOBAL)
            s.window = 1 + (int)la_rng_below(&r, 1 << 20);
        if (s.pattern == LA_PAT_SINKS) s.sinks = 1 + (int)la_rng_below(&r, 64);
        if (s.pattern == LA_PAT_GLOBAL) s.global = 1 + (int)la_rng_below(&r, 64);
        assert_int_equal(la_spec_validate(&s), LA_OK);

        int n = la_spec_format(&s, buf, sizeof buf);
        assert_true(n > 0 && n < (int)sizeof buf);
        la_spec back;
        if (la_spec_parse(buf, &back) != LA_OK) fail_msg("canonical '%s' did not parse: %s", buf, la_errmsg());
        assert_spec_equal(&s, &back);
        la_spec_format(&back, buf2, sizeof buf2);
        assert_string_equal(buf, buf2);
    }
}

static void test_numbers_use_shortest_exact_text(void **state) {
    (void)state;
    char buf[256];
    la_spec s = parse_ok("sinv(tau=0.1)");
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+sinv(tau=0.1)+nope+causal");
    s.tau = 1.0 / 3.0;
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+sinv(tau=0.3333333333333333)+nope+causal");
    s = parse_ok("temp(1e-5)+rope(5e5)");
    la_spec_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "softmax+temp(x=1e-05)+rope(theta=500000)+causal");
    s = parse_ok("sinv(tau=1e+20)");
    assert_true(s.tau == 1e20);
}

/* ---- error classes ---- */

static void test_error_unknown_word(void **state) {
    (void)state;
    parse_fails("softmax+ropee", "unknown position 'ropee'", "did you mean 'rope'", "valid positions: nope, rope");
    parse_fails("softmax+ropee", "softmax+ropee", "prope(p,theta)", "yarn(s,train,beta_fast,beta_slow,theta)");
    parse_fails("softmaxx+rope", "unknown normaliser 'softmaxx'", "entmax(alpha)", "asentmax(alpha,delta,gamma_range)");
    parse_fails("rope+casual", "unknown pattern 'casual'", "did you mean 'causal'", "sinks(n,w)");
    parse_fails("flash+rope", "unknown word 'flash'", "valid normalisers: softmax", "patterns: causal");
    parse_fails("sinv+prope+xyzzy", "'xyzzy'", "transforms: none, logn(s,train), qwen-logn(train)", NULL);
    parse_fails("Softmax", "unknown normaliser 'Softmax'", "did you mean 'softmax'", NULL);
    /* a number or short garbage is named whole, with every valid word, and no far-fetched
     * suggestion ('1.5' used to be "unknown position '1' (did you mean 'pi'?)") */
    const char *junk[5][2] = {{"1.5", "token '1.5' does not start with a name"},
                              {"softmax+5", "token '5' does not start with a name"},
                              {"x", "unknown word 'x'"},
                              {"foo.bar", "unknown word 'foo.bar'"},
                              {"-", "token '-' does not start with a name"}};
    for (int i = 0; i < 5; i++) {
        parse_fails(junk[i][0], junk[i][1], "valid normalisers: softmax", "patterns: causal");
        assert_null(strstr(la_errmsg(), "did you mean"));
    }
}

static void test_error_unknown_key(void **state) {
    (void)state;
    parse_fails("rope(thta=500000)", "unknown parameter 'thta' of 'rope'", "valid: theta", NULL);
    parse_fails("yarn(s=4,train=32,beta=3)", "unknown parameter 'beta'", "beta_fast, beta_slow", NULL);
    parse_fails("softmax(x=1)", "'softmax' takes no parameters", NULL, NULL);
    parse_fails("causal(4)", "'causal' takes no parameters", NULL, NULL);
    parse_fails("sinv(10, 3)", "too many arguments", "'sinv' takes 1 (tau)", NULL);
    parse_fails("window(w=4, w=5)", "parameter 'w' given twice", NULL, NULL);
    parse_fails("sinks(w=8, 2)", "positional argument '2' after a key=value", NULL, NULL);
    parse_fails("sinks(2,8,)", "empty argument", "sinks(n,w)", NULL);
}

static void test_error_duplicate_category(void **state) {
    (void)state;
    parse_fails("softmax+rope+alibi", "second position token 'alibi' after 'rope'", "nope, rope(theta)", NULL);
    parse_fails("softmax+entmax(1.5)", "second normaliser token", NULL, NULL);
    parse_fails("logn+sinv", "second transform token 'sinv' after 'logn'", NULL, NULL);
    parse_fails("causal+window(8)", "second pattern token 'window(8)' after 'causal'", "only global(g) and window(w)",
                NULL);
    parse_fails("window(8)+window(9)", "second pattern token", NULL, NULL);
    parse_fails("global(2)+window(8)+global(3)", "second pattern token", NULL, NULL);
    parse_fails("global(2)+full", "second pattern token", NULL, NULL);
    parse_fails("qwen-logn(train=32)+yarn(s=2,train=64)", "train = 64", "conflicts with train = 32", "qwen-logn");
}

static void test_error_bad_numbers(void **state) {
    (void)state;
    parse_fails("entmax(alpha=1.5x)", "bad number '1.5x' for alpha", "entmax(alpha=1.5x)", NULL);
    parse_fails("entmax(alpha=nan)", "bad number 'nan'", NULL, NULL);
    parse_fails("sinv(tau=inf)", "bad number 'inf'", NULL, NULL);
    parse_fails("rope(theta=0x10)", "bad number '0x10'", NULL, NULL);
    parse_fails("sinv(tau=1e999)", "bad number '1e999'", NULL, NULL);
    parse_fails("window(5.0)", "bad integer '5.0' for w", NULL, NULL);
    parse_fails("window(99999999999)", "bad integer", NULL, NULL);
    parse_fails("window(w=)", "bad integer '' for w", NULL, NULL);
    parse_fails("window(-3)", "bad pattern 'window'", "window w must be >= 1 (got -3)", "valid patterns");
    parse_fails("window(0)", "window w must be >= 1", NULL, NULL);
    parse_fails("sinks(0,8)", "sinks needs n >= 1", NULL, NULL);
    parse_fails("entmax(alpha=1)", "bad normaliser 'entmax'", "alpha must be a number in [1.000001, 4] (got 1", NULL);
    parse_fails("entmax(alpha=1e308)", "alpha must be a number in [1.000001, 4] (got 1e+308", NULL, NULL);
    parse_fails("asentmax(alpha=4.5)", "alpha must be a number in [1.000001, 4]", NULL, NULL);
    /* issue 17: so close to 1 that tau is not representable (|sum p - 1| ~ 5.5e-17/(alpha-1)) */
    parse_fails("entmax(alpha=1.0000001)", "alpha must be a number in [1.000001, 4] (got 1.0000001", NULL, NULL);
    parse_fails("asentmax(alpha=1.0000009)", "alpha must be a number in [1.000001, 4]", NULL, NULL);
    parse_fails("entmax(0.5)", "alpha must be", NULL, NULL);
    parse_fails("asentmax(delta=-1)", "delta must be", NULL, NULL);
    parse_fails("prope(p=1.5)", "bad position 'prope'", "p must lie in [0, 1] (got 1.5)", NULL);
    parse_fails("prope(p=-0.1)", "p must lie in [0, 1]", NULL, NULL);
    parse_fails("rope(theta=1)", "theta must be a finite number > 1", NULL, NULL);
    parse_fails("ntk(s=0.5)", "s (the context extension factor) must be", NULL, NULL);
    parse_fails("yarn(s=4,train=32,beta_fast=1,beta_slow=2)", "beta_fast > beta_slow > 0", NULL, NULL);
    parse_fails("sinv(tau=0)", "tau must be a finite number > 0", NULL, NULL);
    parse_fails("sinv(-1)", "tau must be", NULL, NULL);
    parse_fails("critical(gamma=0)", "gamma must be", NULL, NULL);
    parse_fails("temp(x=-2)", "x must be", NULL, NULL);
    parse_fails("logn(s=-1)", "bad transform 'logn'", "s must be a finite number >= 0", NULL);
    parse_fails("logn(s=0,train=1)", "needs train >= 2", NULL, NULL);
    parse_fails("logn(train=-4)", "train must be >= 0", NULL, NULL);
    /* a bad train is charged to the token that set it (not to the default position) */
    parse_fails("sigmoid(b=1,train=-1)", "bad normaliser 'sigmoid'", "train must be >= 0 (got -1)", NULL);
    parse_fails("yarn(s=2,train=-1)", "bad position 'yarn'", "train must be >= 0", NULL);
    /* a valid decimal has no length limit (64+ characters used to be a "bad number") */
    char longnum[160] = "rope(theta=500.";
    memset(longnum + strlen(longnum), '0', 100);
    strcpy(longnum + 115, "1)");
    assert_true(parse_ok(longnum).theta == 500.0);
}

static void test_error_missing_required(void **state) {
    (void)state;
    parse_fails("window", "'window' needs its parameter 'w'", "window(w)", NULL);
    parse_fails("window()", "'window' needs its parameter 'w'", NULL, NULL);
    parse_fails("sinks(4)", "'sinks' needs its parameter 'w'", NULL, NULL);
    parse_fails("yarn(s=4)", "'yarn' needs its parameter 'train'", "yarn(s,train,beta_fast,beta_slow,theta)", NULL);
    parse_fails("yarn(train=64)", "'yarn' needs its parameter 's'", NULL, NULL);
    parse_fails("dynamic-ntk(2)", "'dynamic-ntk' needs its parameter 'train'", NULL, NULL);
    parse_fails("ntk", "'ntk' needs its parameter 's'", NULL, NULL);
    parse_fails("pi", "'pi' needs its parameter 's'", "pi(s,theta)", NULL);
    parse_fails("pi(0.5)", "bad position 'pi'", "s (the context extension factor) must be", NULL);
    parse_fails("pi(s=2,train=8)", "unknown parameter 'train' of 'pi'", "valid: s, theta", NULL);
    parse_fails("pi(2)+ntk(2)", "second position token 'ntk(2)' after 'pi'", NULL, NULL);
    parse_fails("qwen-logn", "'qwen-logn' needs its parameter 'train'", NULL, NULL);
    parse_fails("temp", "'temp' needs its parameter 'x'", NULL, NULL);
    parse_fails("global(2)", "global(g) must be combined with window(w)", NULL, NULL);
    parse_fails("global", "'global' needs its parameter 'g'", NULL, NULL);
}

static void test_error_syntax(void **state) {
    (void)state;
    parse_fails("", "empty attention spec", NULL, NULL);
    parse_fails("   ", "empty attention spec", NULL, NULL);
    parse_fails("softmax++rope", "empty token", NULL, NULL);
    parse_fails("softmax+rope+", "empty token", NULL, NULL);
    parse_fails("+rope", "empty token", NULL, NULL);
    parse_fails("rope(theta=5", "unbalanced '('", NULL, NULL);
    parse_fails("rope)", "unbalanced ')'", NULL, NULL);
    parse_fails("rope((1))", "nested parentheses", NULL, NULL);
    parse_fails("rope(1)x", "not of the form name or name(args)", "rope(theta)", NULL);
    parse_fails("rope 1", "not of the form", NULL, NULL);
    parse_fails("(1)", "does not start with a name", NULL, NULL);
    parse_fails("softmax,rope", "not of the form", NULL, NULL);
    /* NULL arguments */
    la_spec s;
    assert_int_equal(la_spec_parse(NULL, &s), LA_EINVAL);
    assert_int_equal(la_spec_parse("softmax", NULL), LA_EINVAL);
    /* long input is shortened in the message, not overflowed */
    char longtxt[3000];
    memset(longtxt, 'a', sizeof longtxt - 1);
    longtxt[sizeof longtxt - 1] = '\0';
    assert_int_equal(la_spec_parse(longtxt, &s), LA_ESPEC);
    assert_true(strlen(la_errmsg()) < 1024);
}

static void test_validate_hand_built(void **state) {
    (void)state;
    la_spec s = la_spec_default();
    s.norm = LA_NORM_ENTMAX;
    s.alpha = 0.9;
    assert_int_equal(la_spec_validate(&s), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "alpha must be"));
    assert_non_null(strstr(la_errmsg(), "entmax(alpha=0.9"));
    s = la_spec_default();
    s.norm = LA_NORM_SPARSEMAX; /* alpha left at 1.5: inconsistent */
    assert_int_equal(la_spec_validate(&s), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "sparsemax has alpha = 2"));
    s = la_spec_default();
    s.pattern = LA_PAT_WINDOW; /* window left at 0 */
    assert_int_equal(la_spec_validate(&s), LA_ESPEC);
    s = la_spec_default();
    s.pos = (la_pos)42;
    assert_int_equal(la_spec_validate(&s), LA_ESPEC);
    assert_non_null(strstr(la_errmsg(), "unknown position value 42"));
    s = la_spec_default();
    s.pos = LA_POS_YARN;
    s.pos_scale = 4;
    assert_int_equal(la_spec_validate(&s), LA_ESPEC); /* train_len unset */
    assert_non_null(strstr(la_errmsg(), "train"));
    s.train_len = 64;
    assert_int_equal(la_spec_validate(&s), LA_OK);
    s.theta = NAN;
    assert_int_equal(la_spec_validate(&s), LA_ESPEC);
    assert_int_equal(la_spec_validate(NULL), LA_EINVAL);
    /* logn with s = 0 and train = 0 is valid (s_h supplied per head or train set later) */
    s = la_spec_default();
    s.xform = LA_XF_LOGN;
    assert_int_equal(la_spec_validate(&s), LA_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_documented_examples),
        cmocka_unit_test(test_format_buffer_like_snprintf),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_numbers_use_shortest_exact_text),
        cmocka_unit_test(test_error_unknown_word),
        cmocka_unit_test(test_error_unknown_key),
        cmocka_unit_test(test_error_duplicate_category),
        cmocka_unit_test(test_error_bad_numbers),
        cmocka_unit_test(test_error_missing_required),
        cmocka_unit_test(test_error_syntax),
        cmocka_unit_test(test_validate_hand_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
