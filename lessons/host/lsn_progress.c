#include "lsn_progress.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kv_util.h"

#define FORMAT_VERSION 1

static void set_bases(lsn_progress *p);

void lsn_progress_init(lsn_progress *p)
{
    memset(p, 0, sizeof *p);
}

static void clear_lesson(lsn_lesson_progress *l)
{
    for (int i = 0; i < l->ninputs; i++) {
        free(l->inputs[i].name);
        free(l->inputs[i].value);
    }
    free(l->inputs);
    memset(l, 0, sizeof *l);
}

void lsn_progress_clear(lsn_progress *p)
{
    for (int n = 0; n <= LSN_MAX_LESSONS; n++) {
        clear_lesson(&p->lessons[n]);
        free(p->base[n]);
        p->base[n] = NULL;
    }
    p->current = 0;
    p->vllm_version[0] = p->accounting[0] = '\0';
}

int lsn_progress_path(const char *state_dir, char *buf, size_t buflen)
{
    if (state_dir && state_dir[0]) {
        snprintf(buf, buflen, "%s/progress.json", state_dir);
        return 0;
    }
    const char *xdg = getenv("XDG_STATE_HOME");
    /* The spec says a relative XDG path is invalid and must be ignored. */
    if (xdg && xdg[0] == '/') {
        snprintf(buf, buflen, "%s/kvlab/progress.json", xdg);
        return 0;
    }
    const char *home = getenv("HOME");
    if (home && home[0]) {
        snprintf(buf, buflen, "%s/.local/state/kvlab/progress.json", home);
        return 0;
    }
    return -1;
}

int lsn_progress_add_input(lsn_progress *p, int n, int wait, lsn_input_kind kind,
                           const char *name, const char *value)
{
    if (n < 1 || n > LSN_MAX_LESSONS)
        return -1;
    lsn_lesson_progress *l = &p->lessons[n];
    if (l->ninputs == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        lsn_input *ni = realloc(l->inputs, (size_t)cap * sizeof *ni);
        if (!ni)
            return -1;
        l->inputs = ni;
        l->cap = cap;
    }
    lsn_input *in = &l->inputs[l->ninputs];
    in->wait = wait;
    in->kind = kind;
    in->name = name ? strdup(name) : NULL;
    in->value = value ? strdup(value) : NULL;
    if ((name && !in->name) || (value && !in->value)) {
        free(in->name);
        free(in->value);
        return -1;
    }
    l->ninputs++;
    return 0;
}

void lsn_progress_truncate(lsn_progress *p, int n, int from_wait)
{
    if (n < 1 || n > LSN_MAX_LESSONS)
        return;
    lsn_lesson_progress *l = &p->lessons[n];
    int k = 0;
    for (int i = 0; i < l->ninputs; i++) {
        if (l->inputs[i].wait < from_wait) {
            l->inputs[k++] = l->inputs[i];
        } else {
            free(l->inputs[i].name);
            free(l->inputs[i].value);
        }
    }
    l->ninputs = k;
}

/* A whole number in [lo, hi] (no 2147483647 for 1e300, no 2 for 2.5). */
static int whole(const cJSON *j, double lo, double hi, int *out)
{
    if (!cJSON_IsNumber(j))
        return 0;
    double v = j->valuedouble;
    if (!(v >= lo && v <= hi) || v != (double)(long long)v)
        return 0;
    *out = (int)v;
    return 1;
}

/* A string of at most max bytes. */
static int text_at_most(const cJSON *j, size_t max)
{
    return cJSON_IsString(j) && strlen(j->valuestring) <= max;
}

/* Parse the JSON text; returns NULL on success or a reason. Every value is
 * range-checked: what this program could not have written is a reason. */
static const char *parse(lsn_progress *p, const char *text)
{
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return "it is not valid JSON";
    const char *why = NULL;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "format_version");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(root, "current");
    const cJSON *lessons = cJSON_GetObjectItemCaseSensitive(root, "lessons");
    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(root, "vllm_version");
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(root, "accounting");
    int v = 0;
    if (!cJSON_IsObject(root)) {
        why = "it is not a JSON object";
    } else if (!whole(ver, FORMAT_VERSION, FORMAT_VERSION, &v)) {
        why = "it has no format_version 1";
    } else if (cur && !cJSON_IsNumber(cur)) {
        why = "\"current\" is not a number";
    } else if (cur && !whole(cur, 0, LSN_MAX_LESSONS, &p->current)) {
        why = "\"current\" is not a lesson number";
    } else if (lessons && !cJSON_IsObject(lessons)) {
        why = "\"lessons\" is not an object";
    } else if (rel && !text_at_most(rel, LSN_RELEASE_TEXT - 1)) {
        why = "\"vllm_version\" is not a release";
    } else if (acc && !(cJSON_IsString(acc) && (!strcmp(acc->valuestring, "release") ||
                                                 !strcmp(acc->valuestring, "textbook")))) {
        why = "\"accounting\" is not release or textbook";
    }
    if (!why && rel)
        snprintf(p->vllm_version, sizeof p->vllm_version, "%s", rel->valuestring);
    if (!why && acc)
        snprintf(p->accounting, sizeof p->accounting, "%s", acc->valuestring);
    const cJSON *les;
    if (!why && lessons) {
        cJSON_ArrayForEach(les, lessons) {
            char *end;
            long n = strtol(les->string, &end, 10);
            if (*end || n < 1 || n > LSN_MAX_LESSONS || !cJSON_IsObject(les)) {
                why = "a lesson entry is malformed";
                break;
            }
            const cJSON *step = cJSON_GetObjectItemCaseSensitive(les, "step");
            const cJSON *done = cJSON_GetObjectItemCaseSensitive(les, "done");
            const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(les, "inputs");
            if ((step && !cJSON_IsNumber(step)) || (done && !cJSON_IsBool(done)) || (inputs && !cJSON_IsArray(inputs))) {
                why = "a lesson entry has fields of the wrong type";
                break;
            }
            lsn_lesson_progress *l = &p->lessons[n];
            if (step && !whole(step, 0, LSN_MAX_STEPS, &l->step)) {
                why = "a lesson's step is out of range";
                break;
            }
            l->done = cJSON_IsTrue(done);
            if (cJSON_GetArraySize(inputs) > LSN_MAX_INPUTS) {
                why = "a lesson has more inputs than kvlab keeps";
                break;
            }
            const cJSON *scores = cJSON_GetObjectItemCaseSensitive(les, "scores");
            if (scores && (!cJSON_IsObject(scores) || cJSON_GetArraySize(scores) > LSN_MAX_SCORES)) {
                why = "a lesson's scores are malformed";
                break;
            }
            const cJSON *sc;
            cJSON_ArrayForEach(sc, scores) {
                const cJSON *ch = cJSON_GetObjectItemCaseSensitive(sc, "changes");
                const cJSON *rk = cJSON_GetObjectItemCaseSensitive(sc, "rank");
                const cJSON *lv = cJSON_GetObjectItemCaseSensitive(sc, "lever");
                const cJSON *co = cJSON_GetObjectItemCaseSensitive(sc, "cost");
                lsn_score s;
                memset(&s, 0, sizeof s);
                if (!cJSON_IsObject(sc) || strlen(sc->string) >= LSN_SCORE_KEY || !sc->string[0] ||
                    !whole(ch, 0, LSN_MAX_STEPS, &s.changes) || !whole(rk, 0, 100, &s.rank) ||
                    !text_at_most(lv, LSN_SCORE_TEXT - 1) || !text_at_most(co, LSN_SCORE_TEXT - 1)) {
                    why = "a score is malformed (changes, rank, lever, cost)";
                    break;
                }
                snprintf(s.key, sizeof s.key, "%s", sc->string);
                snprintf(s.lever, sizeof s.lever, "%s", lv->valuestring);
                snprintf(s.cost, sizeof s.cost, "%s", co->valuestring);
                l->scores[l->nscores++] = s;
            }
            if (why)
                break;
            const cJSON *in;
            cJSON_ArrayForEach(in, inputs) {
                const cJSON *wait = cJSON_GetObjectItemCaseSensitive(in, "wait");
                const cJSON *ans = cJSON_GetObjectItemCaseSensitive(in, "answer");
                const cJSON *flag = cJSON_GetObjectItemCaseSensitive(in, "flag");
                const cJSON *val = cJSON_GetObjectItemCaseSensitive(in, "value");
                const cJSON *rev = cJSON_GetObjectItemCaseSensitive(in, "reveal");
                int w = 0;
                if (!cJSON_IsNumber(wait)) {
                    why = "an input has no wait number";
                    break;
                }
                if (!whole(wait, 0, LSN_MAX_STEPS, &w)) {
                    why = "an input's wait is out of range";
                    break;
                }
                int rc;
                if (cJSON_IsString(ans) && text_at_most(ans, LSN_MAX_INPUT_TEXT))
                    rc = lsn_progress_add_input(p, (int)n, w, LSN_IN_ANSWER, NULL, ans->valuestring);
                else if (text_at_most(flag, 64) && text_at_most(val, LSN_MAX_INPUT_TEXT))
                    rc = lsn_progress_add_input(p, (int)n, w, LSN_IN_FLAG, flag->valuestring, val->valuestring);
                else if (cJSON_IsTrue(rev))
                    rc = lsn_progress_add_input(p, (int)n, w, LSN_IN_REVEAL, NULL, NULL);
                else {
                    why = "an input is neither an answer, a flag nor a reveal (or is too long)";
                    break;
                }
                if (rc < 0) {
                    why = "out of memory";
                    break;
                }
            }
            if (why)
                break;
        }
    }
    cJSON_Delete(root);
    return why;
}

/* "<name>.tmp-<pid>" beside path, left by a save that was killed before its
 * rename: remove those whose process is gone (never another live kvlab's). */
static void clean_stale_temps(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    char prefix[NAME_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s.tmp-", base);
    size_t pl = strlen(prefix);
    DIR *d = opendir(slash && !dir[0] ? "/" : dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, prefix, pl) || !de->d_name[pl])
            continue;
        char *end;
        long pid = strtol(de->d_name + pl, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to ask about): its save may still finish */
        char full[PATH_MAX + NAME_MAX + 2];
        snprintf(full, sizeof full, "%s/%s", slash && !dir[0] ? "" : dir, de->d_name);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode))
            unlink(full);
    }
    closedir(d);
}

int lsn_progress_load(lsn_progress *p, const char *path, char *notice, size_t noticelen)
{
    lsn_progress_clear(p);
    if (notice && noticelen)
        notice[0] = '\0';
    clean_stale_temps(path);
    struct stat st;
    int have = stat(path, &st) == 0;
    if (!have && (errno == ENOENT || errno == ENOTDIR)) /* none yet (saving says if its folder cannot be made) */
        return 0;
    char *buf = NULL, err[PATH_MAX + 128];
    size_t len = 0;
    const char *why = NULL;
    if (kv_read_file(path, LSN_PROGRESS_MAX_BYTES, &buf, &len, err, sizeof err) < 0) {
        if (!have || !S_ISREG(st.st_mode) || st.st_size <= (off_t)LSN_PROGRESS_MAX_BYTES) {
            snprintf(notice, noticelen, "Could not read your progress (%s); progress will not be saved.", err);
            return -1;
        }
        why = "it is far too large";
    } else if (strlen(buf) != len) {
        why = "it holds a NUL byte";
    } else {
        why = parse(p, buf);
    }
    free(buf);
    if (!why) {
        set_bases(p);
        return 0;
    }
    lsn_progress_clear(p);
    char aside[PATH_MAX + 64];
    snprintf(aside, sizeof aside, "%s.corrupt-%lld", path, (long long)time(NULL));
    for (int k = 2; access(aside, F_OK) == 0 && k < 1000; k++)
        snprintf(aside, sizeof aside, "%s.corrupt-%lld-%d", path, (long long)time(NULL), k);
    if (rename(path, aside) == 0)
        snprintf(notice, noticelen, "Your progress file could not be used (%s); moved it to %s and starting fresh.",
                 why, aside);
    else
        snprintf(notice, noticelen, "Your progress file could not be used (%s) nor moved aside (%s); starting fresh.",
                 why, strerror(errno));
    return 1;
}

static int write_file(const lsn_progress *p, const char *path, char *err, size_t errlen);

static int mkdirs(const char *dir)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *s = tmp + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int lesson_empty(const lsn_lesson_progress *l)
{
    return !l->step && !l->done && !l->ninputs && !l->nscores;
}

static void lesson_json(cJSON *o, const lsn_lesson_progress *l);

static cJSON *to_json(const lsn_progress *p)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "format_version", FORMAT_VERSION);
    cJSON_AddNumberToObject(root, "current", p->current);
    if (p->vllm_version[0])
        cJSON_AddStringToObject(root, "vllm_version", p->vllm_version);
    if (p->accounting[0])
        cJSON_AddStringToObject(root, "accounting", p->accounting);
    cJSON *lessons = cJSON_AddObjectToObject(root, "lessons");
    for (int n = 1; n <= LSN_MAX_LESSONS; n++) {
        const lsn_lesson_progress *l = &p->lessons[n];
        if (lesson_empty(l))
            continue;
        char key[8];
        snprintf(key, sizeof key, "%d", n);
        lesson_json(cJSON_AddObjectToObject(lessons, key), l);
    }
    return root;
}

/* Lesson l as JSON text (NULL when it holds nothing, or out of memory). */
static char *lesson_text(const lsn_lesson_progress *l)
{
    if (lesson_empty(l))
        return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    lesson_json(o, l);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return t;
}

static int same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void lesson_json(cJSON *o, const lsn_lesson_progress *l)
{
    {
        cJSON_AddNumberToObject(o, "step", l->step);
        cJSON_AddBoolToObject(o, "done", l->done);
        cJSON *arr = cJSON_AddArrayToObject(o, "inputs");
        for (int i = 0; i < l->ninputs; i++) {
            const lsn_input *in = &l->inputs[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "wait", in->wait);
            if (in->kind == LSN_IN_ANSWER) {
                cJSON_AddStringToObject(e, "answer", in->value ? in->value : "");
            } else if (in->kind == LSN_IN_FLAG) {
                cJSON_AddStringToObject(e, "flag", in->name ? in->name : "");
                cJSON_AddStringToObject(e, "value", in->value ? in->value : "");
            } else {
                cJSON_AddBoolToObject(e, "reveal", 1);
            }
            cJSON_AddItemToArray(arr, e);
        }
        if (l->nscores) {
            cJSON *sc = cJSON_AddObjectToObject(o, "scores");
            for (int i = 0; i < l->nscores; i++) {
                const lsn_score *s = &l->scores[i];
                cJSON *e = cJSON_AddObjectToObject(sc, s->key);
                cJSON_AddNumberToObject(e, "changes", s->changes);
                cJSON_AddNumberToObject(e, "rank", s->rank);
                cJSON_AddStringToObject(e, "lever", s->lever);
                cJSON_AddStringToObject(e, "cost", s->cost);
            }
        }
    }
}

/* Record what each lesson is now as the base of the next merge. */
static void set_bases(lsn_progress *p)
{
    for (int n = 1; n <= LSN_MAX_LESSONS; n++) {
        free(p->base[n]);
        p->base[n] = lesson_text(&p->lessons[n]);
    }
}

/* Move lesson `from` into `to` (the inputs change owner). */
static void take_lesson(lsn_lesson_progress *to, lsn_lesson_progress *from)
{
    clear_lesson(to);
    *to = *from;
    memset(from, 0, sizeof *from);
}

/* The file a save writes: path itself, or where the symlink(s) at path lead
 * (the target may not exist yet; its folder must). Returns 0, or -1 with
 * errno set (a loop, a folder that is not there). */
static int follow_link(const char *path, char *out, size_t outl)
{
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0; hops < 16; hops++) {
        struct stat lst;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode)) {
            if (!hops) { /* not a link: as it is */
                snprintf(out, outl, "%s", cur);
                return 0;
            }
            /* the link's end: its folder resolved, its name kept */
            char dir[PATH_MAX], real[PATH_MAX];
            snprintf(dir, sizeof dir, "%s", cur);
            char *slash = strrchr(dir, '/');
            const char *base = slash ? slash + 1 : cur;
            if (slash == dir)
                snprintf(dir, sizeof dir, "/");
            else if (slash)
                *slash = '\0';
            else
                snprintf(dir, sizeof dir, ".");
            if (!realpath(dir, real))
                return -1;
            if ((size_t)snprintf(out, outl, "%s/%s", strcmp(real, "/") ? real : "", base) >= outl) {
                errno = ENAMETOOLONG;
                return -1;
            }
            return 0;
        }
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return -1;
        link[n] = '\0';
        if (link[0] == '/') {
            snprintf(cur, sizeof cur, "%s", link);
        } else { /* relative to the link's folder */
            char *slash = strrchr(cur, '/');
            char next[PATH_MAX];
            if ((size_t)snprintf(next, sizeof next, "%.*s%s", slash ? (int)(slash - cur + 1) : 0, cur, link) >=
                sizeof next) {
                errno = ENAMETOOLONG;
                return -1;
            }
            snprintf(cur, sizeof cur, "%s", next);
        }
    }
    errno = ELOOP;
    return -1;
}

/* The file's progress into *disk (empty when there is none or it cannot be
 * used: a load reports that, a save does not stop for it). */
static void read_disk(lsn_progress *disk, const char *path)
{
    lsn_progress_clear(disk);
    char *buf = NULL, err[64];
    size_t len = 0;
    if (kv_read_file(path, LSN_PROGRESS_MAX_BYTES, &buf, &len, err, sizeof err) < 0)
        return;
    if (strlen(buf) != len || parse(disk, buf))
        lsn_progress_clear(disk);
    free(buf);
}

/* Better of two scores of one challenge (lsn_progress_score's order). */
static int score_better(const lsn_score *a, const lsn_score *b)
{
    if (a->changes != b->changes)
        return a->changes < b->changes;
    return a->rank > 0 && (b->rank == 0 || a->rank < b->rank);
}

/* Merge the file's progress (disk) into *p per lesson against p->base:
 * see lsn_progress.h. Lessons taken from disk move out of it. */
static void merge(lsn_progress *p, lsn_progress *disk)
{
    for (int n = 1; n <= LSN_MAX_LESSONS; n++) {
        lsn_lesson_progress *mine = &p->lessons[n], *theirs = &disk->lessons[n];
        char *tm = lesson_text(mine), *tt = lesson_text(theirs);
        int i_changed = !same_text(tm, p->base[n]), they_changed = !same_text(tt, p->base[n]);
        free(tm);
        free(tt);
        if (!they_changed)
            continue; /* the file has what we last saw: ours stands */
        lsn_score best[LSN_MAX_SCORES];
        int nbest = 0;
        for (int k = 0; k < 2; k++) { /* the best score of every challenge either side solved */
            const lsn_lesson_progress *l = k ? theirs : mine;
            for (int i = 0; i < l->nscores; i++) {
                int j = 0;
                while (j < nbest && strcmp(best[j].key, l->scores[i].key))
                    j++;
                if (j == nbest && nbest < LSN_MAX_SCORES)
                    best[nbest++] = l->scores[i];
                else if (j < nbest && score_better(&l->scores[i], &best[j]))
                    best[j] = l->scores[i];
            }
        }
        int done = mine->done || theirs->done;
        if (!i_changed || theirs->step > mine->step)
            take_lesson(mine, theirs); /* only they changed it, or they got further */
        mine->done = done;
        memcpy(mine->scores, best, sizeof best[0] * (size_t)nbest);
        mine->nscores = nbest;
    }
}

int lsn_progress_save(lsn_progress *p, const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (mkdirs(dir) < 0) {
            snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    /* A symlink is followed: the file it names is written (rename onto the
     * link would replace the link with a file). */
    char target[PATH_MAX];
    if (follow_link(path, target, sizeof target) < 0) {
        snprintf(err, errlen, "%s is a symlink to nothing usable (%s): kvlab will not replace it with a file", path,
                 strerror(errno));
        return -1;
    }
    /* Another kvlab of this user may save too: one at a time, each merging the other's lessons. */
    char lockp[PATH_MAX + 8];
    snprintf(lockp, sizeof lockp, "%s.lock", path);
    int lk = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (lk < 0) {
        snprintf(err, errlen, "cannot open the lock %s: %s", lockp, strerror(errno));
        return -1;
    }
    struct stat lkst;
    if (fstat(lk, &lkst) < 0 || !S_ISREG(lkst.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file: kvlab will not lock it", lockp);
        close(lk);
        return -1;
    }
    while (flock(lk, LOCK_EX) < 0) {
        if (errno != EINTR) {
            snprintf(err, errlen, "cannot lock %s: %s", lockp, strerror(errno));
            close(lk);
            return -1;
        }
    }
    lsn_progress *disk = calloc(1, sizeof *disk);
    if (!disk) {
        close(lk);
        snprintf(err, errlen, "out of memory saving progress");
        return -1;
    }
    read_disk(disk, target);
    merge(p, disk);
    lsn_progress_clear(disk);
    free(disk);
    int rc = write_file(p, target, err, errlen);
    if (rc == 0)
        set_bases(p);
    close(lk); /* unlocks */
    return rc;
}

static int write_file(const lsn_progress *p, const char *path, char *err, size_t errlen)
{
    cJSON *root = to_json(p);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        snprintf(err, errlen, "out of memory writing progress");
        return -1;
    }
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        free(text);
        return -1;
    }
    size_t len = strlen(text), off = 0;
    int ok = 1;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            ok = 0;
            break;
        }
        off += (size_t)w;
    }
    if (ok && write(fd, "\n", 1) != 1)
        ok = 0;
    if (ok && fsync(fd) < 0)
        ok = 0;
    int saved = errno;
    if (close(fd) < 0 && ok) {
        ok = 0;
        saved = errno;
    }
    free(text);
    if (!ok || rename(tmp, path) < 0) {
        if (ok)
            saved = errno;
        unlink(tmp);
        snprintf(err, errlen, "cannot save progress to %s: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}

int lsn_progress_score(lsn_progress *p, int n, const lsn_score *s, lsn_score *before)
{
    if (before)
        memset(before, 0, sizeof *before);
    if (n < 1 || n > LSN_MAX_LESSONS || !s->key[0] || s->changes < 0 || s->changes > LSN_MAX_STEPS ||
        s->rank < 0 || s->rank > 100)
        return -1;
    lsn_lesson_progress *l = &p->lessons[n];
    for (int i = 0; i < l->nscores; i++) {
        lsn_score *k = &l->scores[i];
        if (strcmp(k->key, s->key))
            continue;
        if (before)
            *before = *k;
        int better = s->changes < k->changes ||
                     (s->changes == k->changes && s->rank > 0 && (k->rank == 0 || s->rank < k->rank));
        if (better)
            *k = *s;
        return better;
    }
    if (l->nscores == LSN_MAX_SCORES)
        return -1;
    l->scores[l->nscores++] = *s;
    return 1;
}
