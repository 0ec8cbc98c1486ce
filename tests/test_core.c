/* test_core.c -- atomic file writes and the deterministic RNG. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <math.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/internal.h"
#include "core/dist.h"

static void test_atomic_write_replaces_whole(void **state) {
    (void)state;
    char dir[] = "/tmp/la_core_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/f.txt", dir);
    la_afile af;
    assert_int_equal(la_afile_open(&af, path), LA_OK);
    fputs("first", af.f);
    assert_int_equal(la_afile_commit(&af), LA_OK);
    /* an aborted second write leaves the first file intact and no temp file behind */
    assert_int_equal(la_afile_open(&af, path), LA_OK);
    fputs("second, never committed", af.f);
    la_afile_abort(&af);
    assert_int_not_equal(access(af.tmp_path, F_OK), 0);
    FILE *f = fopen(path, "rb");
    char buf[64] = {0};
    assert_non_null(f);
    assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    assert_string_equal(buf, "first");
    unlink(path);
    rmdir(dir);
}

static void test_atomic_write_missing_dir_is_clear_error(void **state) {
    (void)state;
    la_afile af;
    assert_int_equal(la_afile_open(&af, "/nonexistent_dir_la/x"), LA_EIO);
    assert_non_null(strstr(la_errmsg(), "/nonexistent_dir_la/x"));
}

/* number of temp files ("*.tmp.*") left in dir */
static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

/* A link is followed (the file it names is replaced, the link stays); a pipe is written in
 * place, not replaced by a regular file (the same path as a device such as /dev/null, which
 * a test run as root must not risk replacing); a folder is refused by name. */
static void test_atomic_write_links_pipes_folders(void **state) {
    (void)state;
    char dir[] = "/tmp/la_core_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char real[256], link[256], fifo[256], buf[64] = {0};
    snprintf(real, sizeof real, "%s/real.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    FILE *f = fopen(real, "wb");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    assert_int_equal(symlink("real.txt", link), 0);
    la_afile af;
    assert_int_equal(la_afile_open(&af, link), LA_OK);
    fputs("new", af.f);
    assert_int_equal(la_afile_commit(&af), LA_OK);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    f = fopen(real, "rb");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof buf - 1, f), 3);
    fclose(f);
    assert_string_equal(buf, "new");

    assert_int_equal(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader, so that opening for writing does not block */
    assert_true(rd >= 0);
    assert_int_equal(la_afile_open(&af, fifo), LA_OK);
    fputs("piped", af.f);
    assert_int_equal(la_afile_commit(&af), LA_OK);
    memset(buf, 0, sizeof buf);
    assert_int_equal(read(rd, buf, sizeof buf - 1), 5);
    assert_string_equal(buf, "piped");
    close(rd);
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));

    assert_int_equal(la_afile_open(&af, dir), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "folder"));

    /* "--out /dev/stdout" with stdout sent to a file (>>): appended in place, the file kept
     * (the rename replaced it, losing what it held) */
    char log[256];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "kept\n", 5), 5);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    la_status st1 = la_afile_open(&af, "/dev/stdout");
    if (st1 == LA_OK) {
        fputs("new", af.f);
        st1 = la_afile_commit(&af);
    }
    dup2(saved, 1);
    close(saved);
    close(fd);
    assert_int_equal(st1, LA_OK);
    f = fopen(log, "rb");
    assert_non_null(f);
    memset(buf, 0, sizeof buf);
    assert_int_equal(fread(buf, 1, sizeof buf - 1, f), 8);
    fclose(f);
    assert_string_equal(buf, "kept\nnew");

    /* a 254-byte name: the temp name beside it would pass the 255-byte limit, so it is short */
    char lng[600];
    int n = snprintf(lng, sizeof lng, "%s/", dir);
    memset(lng + n, 'a', 250);
    strcpy(lng + n + 250, ".npy");
    assert_int_equal(la_afile_open(&af, lng), LA_OK);
    fputs("long", af.f);
    assert_int_equal(la_afile_commit(&af), LA_OK);
    assert_int_equal(access(lng, F_OK), 0);
    unlink(lng);
    unlink(log);
    assert_int_equal(count_tmp(dir), 0);
    unlink(fifo);
    unlink(link);
    unlink(real);
    rmdir(dir);
}


/* Issue 17: each step of an atomic write (create the temp file, write, fsync, close, rename)
 * fails in turn through la_afile_fail_at: the call reports LA_EIO naming the path, the
 * previous file is intact, no temp file is left, and the hook disarms after one failure. */
static void test_atomic_write_injected_failures(void **state) {
    (void)state;
    char dir[] = "/tmp/la_core_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/f.txt", dir);
    static const char *names[] = {"", "open", "write", "fsync", "close", "rename"};
    for (int step = LA_AFILE_STEP_OPEN; step <= LA_AFILE_STEP_RENAME; step++) {
        la_afile af;
        assert_int_equal(la_afile_open(&af, path), LA_OK);
        fputs("first", af.f);
        assert_int_equal(la_afile_commit(&af), LA_OK);
        la_afile_fail_at((la_afile_step)step, 1);
        la_status st = la_afile_open(&af, path);
        if (st == LA_OK) {
            fputs("second, must not land", af.f);
            st = la_afile_commit(&af);
        }
        if (st != LA_EIO) fail_msg("step %s: status %s", names[step], la_status_name(st));
        if (!strstr(la_errmsg(), path)) fail_msg("step %s: message does not name the path: %s", names[step], la_errmsg());
        assert_int_equal(count_tmp(dir), 0);
        FILE *f = fopen(path, "rb");
        char buf[64] = {0};
        assert_non_null(f);
        assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
        fclose(f);
        if (strcmp(buf, "first")) fail_msg("step %s: file holds '%s'", names[step], buf);
        /* disarmed: the next write goes through */
        assert_int_equal(la_afile_open(&af, path), LA_OK);
        fputs("third", af.f);
        assert_int_equal(la_afile_commit(&af), LA_OK);
    }
    /* the second occurrence: first write passes, second fails */
    la_afile_fail_at(LA_AFILE_STEP_FSYNC, 2);
    la_afile a1, a2;
    assert_int_equal(la_afile_open(&a1, path), LA_OK);
    assert_int_equal(la_afile_commit(&a1), LA_OK);
    assert_int_equal(la_afile_open(&a2, path), LA_OK);
    assert_int_equal(la_afile_commit(&a2), LA_EIO);
    unlink(path);
    rmdir(dir);
}

static void test_rng_reproducible_and_uniform(void **state) {
    (void)state;
    la_rng a, b;
    la_rng_seed(&a, 42);
    la_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) assert_true(la_rng_u64(&a) == la_rng_u64(&b));
    double sum = 0, sq = 0;
    int counts[7] = {0};
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double z = la_rng_normal(&a);
        sum += z;
        sq += z * z;
        counts[la_rng_below(&a, 7)]++;
    }
    /* mean and variance of N(0,1) within ~5 standard errors */
    assert_true(fabs(sum / n) < 5.0 / sqrt(n));
    assert_true(fabs(sq / n - 1.0) < 5.0 * sqrt(2.0 / n));
    for (int c = 0; c < 7; c++) assert_true(abs(counts[c] - n / 7) < 5 * 150);
}

/* la_dist_assign: longest processing time first, the same answer on every rank. It must
 * not depend on the heap: an allocation failing on one rank only would give that rank
 * another assignment (the allocation walk of issue #17 hit a round-robin fallback). */
static void test_dist_assign_lpt_without_heap(void **state) {
    (void)state;
    const double cost[6] = {1, 5, 3, 5, 2, 4};
    /* by hand (item: cost -> rank, loads after): i1: 5 -> r0 (5,0); i3: 5 -> r1 (5,5);
     * i5: 4 -> r0 on the tie (9,5); i2: 3 -> r1 (9,8); i4: 2 -> r1 (9,10); i0: 1 -> r0 */
    const int want[6] = {0, 0, 1, 1, 1, 0};
    int owner[6];
    la_alloc_fail_at(1); /* any allocation inside would fail */
    la_dist_assign(cost, 6, 2, owner);
    assert_int_equal(la_alloc_count(), 0);
    la_alloc_fail_at(0);
    for (int i = 0; i < 6; i++) assert_int_equal(owner[i], want[i]);
    /* more ranks than items: one item each, on ranks 0..n-1 by decreasing cost */
    int o3[3];
    const double c3[3] = {2, 7, 4};
    la_dist_assign(c3, 3, 8, o3);
    assert_int_equal(o3[1], 0);
    assert_int_equal(o3[2], 1);
    assert_int_equal(o3[0], 2);
}

/* la_dist_ring_start on one process (no launcher: the ring is the process itself): the send
 * blocks' bytes, in order, land in the receive blocks however both lists cut them (empty
 * blocks skipped); different byte counts are refused, naming both. The MPI path (a derived
 * datatype over the same blocks) is checked by tests/mpi.sh's ring cases. */
static void test_dist_ring_blocks_one_process(void **state) {
    (void)state;
    char src[16], dst[16];
    for (int i = 0; i < 16; i++) src[i] = (char)(i + 1);
    memset(dst, 0, sizeof dst);
    la_dist_block snd[3] = {{src + 10, 5}, {src, 0}, {src, 9}}; /* 14 bytes: 11..15 then 1..9 */
    la_dist_block rcv[3] = {{dst + 8, 3}, {dst + 2, 0}, {dst, 8}}; /* 3 then 8: 11 bytes */
    assert_int_equal(la_dist_ring_start(1, snd, 3, rcv, 3), LA_EINVAL);
    assert_non_null(strstr(la_errmsg(), "14 bytes sent, 11 expected"));
    rcv[1] = (la_dist_block){dst + 13, 3};
    assert_int_equal(la_dist_ring_start(1, snd, 3, rcv, 3), LA_OK);
    int done = 0;
    assert_int_equal(la_dist_ring_test(&done), LA_OK);
    assert_int_equal(done, 1);
    assert_int_equal(la_dist_ring_wait(), LA_OK);
    const char want[16] = {2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 0, 0, 14, 15, 1};
    assert_memory_equal(dst, want, 16);
    assert_int_equal(la_dist_ring_start(1, NULL, 0, NULL, 0), LA_OK); /* nothing to move */
}

/* Stop points (test_point.c): a child with LA_TEST_STOP_AT=NAME:N stops at the N-th pass
 * of la_test_point(NAME), not at other names (nor at names that merely start with NAME),
 * and runs on after SIGCONT; without the variable it never stops. The child writes one byte
 * to a pipe after each pass, so the bytes there at the stop say which pass it stopped at. */
static int stop_child(const char *env, int *done_at_stop) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        if (env) setenv("LA_TEST_STOP_AT", env, 1);
        else unsetenv("LA_TEST_STOP_AT");
        for (int i = 0; i < 5; i++) {
            la_test_point("unit-pointx"); /* a longer name: never matches "unit-point" */
            la_test_point("other");
            la_test_point("unit-point");
            if (write(fd[1], "x", 1) != 1) _exit(2);
        }
        _exit(0);
    }
    close(fd[1]);
    int st;
    *done_at_stop = -1;
    if (waitpid(pid, &st, WUNTRACED) != pid) return -1;
    int stopped = WIFSTOPPED(st);
    if (stopped) {
        char buf[8];
        fcntl(fd[0], F_SETFL, O_NONBLOCK); /* none written yet must not block */
        ssize_t n = read(fd[0], buf, sizeof buf); /* the bytes written before the stop */
        *done_at_stop = n > 0 ? (int)n : 0;
        kill(pid, SIGCONT);
        if (waitpid(pid, &st, 0) != pid) return -1;
    }
    close(fd[0]);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? stopped : -1;
}

static void test_stop_points(void **state) {
    (void)state;
    int done;
    assert_int_equal(stop_child(NULL, &done), 0);
    assert_int_equal(stop_child("unit-point", &done), 1); /* the 1st pass by default */
    assert_int_equal(done, 0);
    assert_int_equal(stop_child("unit-point:3", &done), 1);
    assert_int_equal(done, 2);
    assert_int_equal(stop_child("unit-point:9", &done), 0); /* only 5 passes */
    assert_int_equal(stop_child("unit-poin", &done), 0);    /* a prefix is not the name */
}

/* la_read_file: the whole file NUL-terminated (also through a pipe, which has no size),
 * the size limit, a missing file's message with errno kept; la_now_s never goes back. */
static void test_read_file_and_clock(void **state) {
    (void)state;
    char dir[] = "/tmp/la_core_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/f.bin", dir);
    size_t n = 40000; /* past the first 16 KiB buffer: two doublings */
    char *want = malloc(n);
    for (size_t i = 0; i < n; i++) want[i] = (char)(i * 7 + (i >> 9)); /* NUL bytes included */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(want, 1, n, f), n);
    fclose(f);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(la_read_file(path, 0, &got, &len), LA_OK);
    assert_int_equal(len, n);
    assert_memory_equal(got, want, n);
    assert_int_equal(got[n], '\0');
    free(got);
    assert_int_equal(la_read_file(path, n - 1, &got, &len), LA_EINVAL);
    assert_null(got);
    assert_non_null(strstr(la_errmsg(), "is larger than"));
    assert_int_equal(la_read_file(path, n, &got, NULL), LA_OK); /* exactly the limit is allowed */
    free(got);
    /* an empty file: an empty string */
    f = fopen(path, "wb");
    fclose(f);
    assert_int_equal(la_read_file(path, 0, &got, &len), LA_OK);
    assert_int_equal(len, 0);
    assert_string_equal(got, "");
    free(got);
    /* a pipe */
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    assert_int_equal(write(fd[1], "through a pipe", 14), 14);
    close(fd[1]);
    char pp[64];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd[0]);
    assert_int_equal(la_read_file(pp, 0, &got, &len), LA_OK);
    assert_int_equal(len, 14);
    assert_string_equal(got, "through a pipe");
    free(got);
    close(fd[0]);
    remove(path);
    assert_int_equal(la_read_file(path, 0, &got, &len), LA_EIO);
    assert_int_equal(errno, ENOENT);
    assert_null(got);
    assert_non_null(strstr(la_errmsg(), "cannot open"));
    assert_non_null(strstr(la_errmsg(), path));
    rmdir(dir);
    free(want);
    double t0 = la_now_s(), t1 = la_now_s();
    assert_true(t0 > 0 && t1 >= t0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_write_replaces_whole),
        cmocka_unit_test(test_stop_points),
        cmocka_unit_test(test_read_file_and_clock),
        cmocka_unit_test(test_atomic_write_missing_dir_is_clear_error),
        cmocka_unit_test(test_atomic_write_links_pipes_folders),
        cmocka_unit_test(test_atomic_write_injected_failures),
        cmocka_unit_test(test_rng_reproducible_and_uniform),
        cmocka_unit_test(test_dist_assign_lpt_without_heap),
        cmocka_unit_test(test_dist_ring_blocks_one_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
