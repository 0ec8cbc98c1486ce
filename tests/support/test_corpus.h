/* test_corpus.h -- tiny generated text corpora for tests (no setup, no real corpus). */
#ifndef LA_TEST_CORPUS_H
#define LA_TEST_CORPUS_H

#include <stddef.h>
#include <stdint.h>

/* Write n_docs text files doc_000.txt ... into dir (which must exist): document i has
 * exactly sizes[i] bytes of seeded pseudo-English (words, commas, full stops, newlines,
 * and now and then a 5-digit number), so a byte model can learn something from it.
 * Returns 0 on success, -1 if a file cannot be written. */
int la_test_write_corpus(const char *dir, int n_docs, const int *sizes, uint64_t seed);

/* Make root/data/train and root/data/val (root must exist) and fill them with
 * la_test_write_corpus: the layout `longattn study` reads as its two splits. Train
 * document i has train_base + train_step * i bytes; val_sizes gives the validation ones.
 * Returns 0 on success, -1 if a folder or file cannot be made. */
int la_test_write_split_corpus(const char *root, int n_train, int train_base, int train_step, uint64_t train_seed,
                               int n_val, const int *val_sizes, uint64_t val_seed);

/* Write dir/name holding the sentence "the quick brown fox jumps over the lazy dog. "
 * repeated reps times: a small repeated text a byte model learns quickly. 0 on success. */
int la_test_write_repeated(const char *dir, const char *name, int reps);

/* The whole file at path, NUL-terminated (malloc'd; free it), its length in *len (may be
 * NULL); NULL when it cannot be opened or read. */
char *la_test_read_file(const char *path, size_t *len);

/* Make a fresh directory "/tmp/<prefix>XXXXXX" into buf (size n); 0 on success. */
int la_test_mkdtemp(const char *prefix, char *buf, int n);

/* Remove a directory tree made by the tests (rm -rf equivalent, no shell). */
void la_test_rmtree(const char *dir);

#endif
