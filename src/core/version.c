/* version.c -- la_version(): the version the library binary was built as. */
#include "longattn/core.h"

const char *la_version(void) { return LA_VERSION_STRING; }
