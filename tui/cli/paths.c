#include "paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KVLAB_SOURCE_DIR
#define KVLAB_SOURCE_DIR "."
#endif
#ifndef KVLAB_DATADIR
#define KVLAB_DATADIR "/usr/local/share/kvlab"
#endif

static char data_dir[PATH_MAX + 64];
static char assets_dir[PATH_MAX + 96];
static char lessons_dir[PATH_MAX + 96];

static int has_assets(const char *dir)
{
    char p[PATH_MAX + 128];
    struct stat st;
    snprintf(p, sizeof p, "%s/assets/gpus.json", dir);
    return stat(p, &st) == 0;
}

const char *kvlab_data_dir(void)
{
    if (data_dir[0])
        return data_dir;
    const char *env = getenv("KVLAB_DATA_DIR");
    if (env && *env) {
        snprintf(data_dir, sizeof data_dir, "%s", env);
        return data_dir;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX + 32];
            snprintf(cand, sizeof cand, "%s/../share/kvlab", exe);
            if (has_assets(cand)) {
                snprintf(data_dir, sizeof data_dir, "%s", cand);
                return data_dir;
            }
        }
    }
    if (has_assets(KVLAB_SOURCE_DIR))
        snprintf(data_dir, sizeof data_dir, "%s", KVLAB_SOURCE_DIR);
    else
        snprintf(data_dir, sizeof data_dir, "%s", KVLAB_DATADIR);
    return data_dir;
}

const char *kvlab_assets_dir(void)
{
    if (!assets_dir[0])
        snprintf(assets_dir, sizeof assets_dir, "%s/assets", kvlab_data_dir());
    return assets_dir;
}

const char *kvlab_lessons_dir(void)
{
    if (!lessons_dir[0])
        snprintf(lessons_dir, sizeof lessons_dir, "%s/lessons", kvlab_data_dir());
    return lessons_dir;
}

const char *kvlab_lessons_dir_for(const char *given)
{
    if (given)
        return given;
    const char *env = getenv("KVLAB_LESSONS_DIR");
    return env && env[0] ? env : kvlab_lessons_dir();
}
