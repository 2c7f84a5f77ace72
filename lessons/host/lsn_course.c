#include "lsn_course.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kv_util.h"
#include "lsn_stage.h"


void lsn_course_free(lsn_course *c)
{
    for (int i = 0; i < c->nlessons; i++) {
        free((char *)c->lessons[i].title);
        free((char *)c->lessons[i].file);
    }
    free(c->lessons);
    for (int i = 0; i < c->nchapters; i++)
        free(c->chapter_titles[i]);
    free(c->chapter_titles);
    memset(c, 0, sizeof *c);
}

/* "NN-slug.lua" with NN == number, slug of [a-z0-9-]. */
static int good_name(const char *f, int number)
{
    if (!isdigit((unsigned char)f[0]) || !isdigit((unsigned char)f[1]) || f[2] != '-')
        return 0;
    if ((f[0] - '0') * 10 + (f[1] - '0') != number)
        return 0;
    size_t n = strlen(f);
    if (n < 8 || strcmp(f + n - 4, ".lua"))
        return 0;
    for (size_t i = 3; i < n - 4; i++)
        if (!(islower((unsigned char)f[i]) || isdigit((unsigned char)f[i]) || f[i] == '-'))
            return 0;
    return 1;
}

int lsn_course_load(lsn_course *c, const char *dir, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    /* kv_read_file: a FIFO or a device as manifest.json is refused, never waited on */
    char *text = NULL, why[4400];
    size_t len = 0;
    if (kv_read_file(path, 1u << 20, &text, &len, why, sizeof why) < 0) {
        if (strstr(why, "no such file") || strstr(why, "ermission") || strstr(why, "ot a directory"))
            snprintf(err, errlen, "cannot read %s (is the lessons folder right? set KVLAB_LESSONS_DIR or --lessons "
                     "DIR)", path);
        else
            snprintf(err, errlen, "cannot read %s", why);
        return -1;
    }
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        snprintf(err, errlen, "%s is not valid JSON (near: %.30s)", path, at && *at ? at : "the end");
        free(text);
        return -1;
    }
    free(text);
    int rc = -1;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "format_version");
    const cJSON *chapters = cJSON_GetObjectItemCaseSensitive(root, "chapters");
    const cJSON *lessons = cJSON_GetObjectItemCaseSensitive(root, "lessons");
    if (!cJSON_IsNumber(ver) || ver->valueint != 1) {
        snprintf(err, errlen, "%s: format_version must be 1", path);
        goto out;
    }
    if (!cJSON_IsArray(chapters) || !cJSON_IsArray(lessons) || cJSON_GetArraySize(lessons) < 1) {
        snprintf(err, errlen, "%s: needs a \"chapters\" array and a non-empty \"lessons\" array", path);
        goto out;
    }
    c->nchapters = cJSON_GetArraySize(chapters);
    c->chapter_titles = calloc((size_t)c->nchapters, sizeof *c->chapter_titles);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, chapters) {
        const cJSON *num = cJSON_GetObjectItemCaseSensitive(e, "number");
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(e, "title");
        if (!cJSON_IsNumber(num) || num->valueint != i + 1 || !cJSON_IsString(title)) {
            snprintf(err, errlen, "%s: chapter %d must be {\"number\": %d, \"title\": \"...\"}", path, i + 1, i + 1);
            goto out;
        }
        if ((c->chapter_titles[i] = strdup(title->valuestring)))
            lsn_text_clean(c->chapter_titles[i], strlen(c->chapter_titles[i]), 0);
        i++;
    }
    int n = cJSON_GetArraySize(lessons);
    if (n > 99) {
        snprintf(err, errlen, "%s: at most 99 lessons", path);
        goto out;
    }
    c->lessons = calloc((size_t)n, sizeof *c->lessons);
    i = 0;
    cJSON_ArrayForEach(e, lessons) {
        const cJSON *num = cJSON_GetObjectItemCaseSensitive(e, "number");
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(e, "chapter");
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(e, "title");
        if (!cJSON_IsNumber(num) || num->valueint != i + 1) {
            snprintf(err, errlen, "%s: lesson entry %d must have \"number\": %d (numbers run 1..N in order)", path,
                     i + 1, i + 1);
            goto out;
        }
        if (!cJSON_IsNumber(ch) || ch->valueint < 1 || ch->valueint > c->nchapters) {
            snprintf(err, errlen, "%s: lesson %d: \"chapter\" must be 1..%d", path, i + 1, c->nchapters);
            goto out;
        }
        if (!cJSON_IsString(file) || !good_name(file->valuestring, i + 1)) {
            snprintf(err, errlen, "%s: lesson %d: \"file\" must be named \"%02d-slug.lua\" (slug of a-z, 0-9, -)",
                     path, i + 1, i + 1);
            goto out;
        }
        if (!cJSON_IsString(title) || !title->valuestring[0]) {
            snprintf(err, errlen, "%s: lesson %d needs a non-empty \"title\"", path, i + 1);
            goto out;
        }
        lsn_info *l = &c->lessons[i];
        l->number = i + 1;
        l->chapter = ch->valueint;
        l->chapter_title = c->chapter_titles[ch->valueint - 1];
        char *t = strdup(title->valuestring);
        if (t) /* a title's escape sequences never reach the terminal (kvlab lessons, the app's list) */
            lsn_text_clean(t, strlen(t), 0);
        l->title = t;
        l->file = strdup(file->valuestring);
        char fp[4400];
        snprintf(fp, sizeof fp, "%s/%s", dir, l->file);
        struct stat st;
        l->available = stat(fp, &st) == 0 && S_ISREG(st.st_mode);
        c->nlessons = ++i;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    if (rc < 0)
        lsn_course_free(c);
    return rc;
}

int lsn_course_unlisted(const lsn_course *c, char *report, size_t reportlen)
{
    if (report && reportlen)
        report[0] = '\0';
    DIR *d = opendir(c->dir);
    if (!d)
        return 0;
    int count = 0;
    size_t used = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *f = de->d_name;
        size_t n = strlen(f);
        if (n < 8 || !isdigit((unsigned char)f[0]) || !isdigit((unsigned char)f[1]) || f[2] != '-' ||
            strcmp(f + n - 4, ".lua"))
            continue;
        int listed = 0;
        for (int i = 0; i < c->nlessons; i++)
            if (!strcmp(c->lessons[i].file, f))
                listed = 1;
        if (listed)
            continue;
        count++;
        if (report && used < reportlen) {
            int w = snprintf(report + used, reportlen - used,
                             "%s/%s is not listed in manifest.json (add it, or rename it to match its entry)\n",
                             c->dir, f);
            if (w > 0)
                used += (size_t)w;
        }
    }
    closedir(d);
    return count;
}

int lsn_course_path(const lsn_course *c, int number, char *buf, size_t buflen)
{
    if (number < 1 || number > c->nlessons)
        return -1;
    snprintf(buf, buflen, "%s/%s", c->dir, c->lessons[number - 1].file);
    return 0;
}
