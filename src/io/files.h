/* files.h -- folders and file lists (io layer, internal to the library and the CLI). */
#ifndef LA_IO_FILES_H
#define LA_IO_FILES_H

#include "longattn/io.h"

/* Creates the folder dir and its missing parents (mode 0777 before umask); an existing
 * folder is fine. Errors: LA_EINVAL (path longer than 4095 bytes), LA_EIO naming the part
 * that could not be created, or dir existing as something other than a folder. */
la_status la_mkdir_p(const char *dir);

/* The regular, non-hidden files of the folder path in name order, or path itself when it
 * is a file. *paths is a malloc'ed array of n malloc'ed "path/name" strings (free with
 * la_free_paths). Errors: LA_EIO (path cannot be opened; the message names it and
 * strerror), LA_ENOMEM. */
la_status la_list_files(const char *path, char ***paths, int *n);
void la_free_paths(char **paths, int n);

#endif
