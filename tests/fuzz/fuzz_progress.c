/* libFuzzer target for the progress file (lessons/host/lsn_progress.c):
 * whatever bytes are in progress.json, loading either gives progress whose
 * every value is in range and which saves and loads back the same, or moves
 * the file aside with a notice; it never crashes or leaks. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lsn_progress.h"

static char dir[] = "/tmp/kvlab-fuzz-progress-XXXXXX";
static char path[256], again[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof path, "%s/progress.json", dir);
    snprintf(again, sizeof again, "%s/again.json", dir);
    return 0;
}

static void same(const lsn_progress *a, const lsn_progress *b)
{
    if (a->current != b->current)
        abort();
    for (int n = 0; n <= LSN_MAX_LESSONS; n++) {
        const lsn_lesson_progress *x = &a->lessons[n], *y = &b->lessons[n];
        if (x->step != y->step || x->done != y->done || x->ninputs != y->ninputs)
            abort();
        for (int i = 0; i < x->ninputs; i++) {
            const lsn_input *p = &x->inputs[i], *q = &y->inputs[i];
            if (p->wait != q->wait || p->kind != q->kind || (p->name == NULL) != (q->name == NULL) ||
                (p->value == NULL) != (q->value == NULL) || (p->name && strcmp(p->name, q->name)) ||
                (p->value && strcmp(p->value, q->value)))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    fwrite(data, 1, size, f);
    fclose(f);
    static lsn_progress p, q;
    char notice[4096], err[4096];
    int rc = lsn_progress_load(&p, path, notice, sizeof notice);
    if (rc == 0) {
        if (p.current < 0 || p.current > LSN_MAX_LESSONS)
            abort();
        for (int n = 0; n <= LSN_MAX_LESSONS; n++)
            if (p.lessons[n].step < 0 || p.lessons[n].step > LSN_MAX_STEPS)
                abort();
        if (lsn_progress_save(&p, again, err, sizeof err) < 0)
            abort();
        if (lsn_progress_load(&q, again, notice, sizeof notice) != 0)
            abort();
        same(&p, &q);
    } else if (rc == 1) {
        if (!notice[0] || access(path, F_OK) == 0)
            abort(); /* a corrupt file is moved aside, with a notice */
        /* drop what was moved aside, so the folder does not fill up */
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (!strncmp(de->d_name, "progress.json.corrupt-", 22)) {
                char f2[600];
                snprintf(f2, sizeof f2, "%s/%s", dir, de->d_name);
                unlink(f2);
            }
        }
        if (d)
            closedir(d);
    } else {
        abort(); /* a regular file the fuzzer wrote is always readable */
    }
    lsn_progress_clear(&p);
    lsn_progress_clear(&q);
    return 0;
}
