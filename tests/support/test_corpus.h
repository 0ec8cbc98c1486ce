/* test_corpus.h -- tiny generated text corpora for tests (no setup, no real corpus). */
#ifndef LA_TEST_CORPUS_H
#define LA_TEST_CORPUS_H

#include <stdint.h>

/* Write n_docs text files doc_000.txt ... into dir (which must exist): document i has
 * exactly sizes[i] bytes of seeded pseudo-English (words, commas, full stops, newlines,
 * and now and then a 5-digit number), so a byte model can learn something from it.
 * Returns 0 on success, -1 if a file cannot be written. */
int la_test_write_corpus(const char *dir, int n_docs, const int *sizes, uint64_t seed);

/* Make a fresh directory "/tmp/<prefix>XXXXXX" into buf (size n); 0 on success. */
int la_test_mkdtemp(const char *prefix, char *buf, int n);

/* Remove a directory tree made by the tests (rm -rf equivalent, no shell). */
void la_test_rmtree(const char *dir);

#endif
