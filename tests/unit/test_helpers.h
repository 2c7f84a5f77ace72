/* Shared helpers for kvlab unit tests (header-only). */
#ifndef KVLAB_TEST_HELPERS_H
#define KVLAB_TEST_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* $KVLAB_SOURCE_DIR (set by ctest), else the compiled-in source dir. */
static inline const char *test_source_dir(void)
{
    const char *s = getenv("KVLAB_SOURCE_DIR");
#ifdef KVLAB_SOURCE_DIR
    if (!s || !*s)
        s = KVLAB_SOURCE_DIR;
#endif
    return s && *s ? s : ".";
}

static inline const char *test_assets_dir(void)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/assets", test_source_dir());
    return buf;
}

/* Read a whole file under the source dir; NULL if missing. Caller frees. */
static inline char *test_read_file(const char *rel, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_source_dir(), rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return b;
}

#endif
