/* lsn_course: the course manifest (lessons/manifest.json, read with cJSON)
 * and the checks that keep it honest (numbers 1..N in order, file names
 * "NN-slug.lua" matching the number, chapters that exist, no lesson file in
 * the folder that the manifest does not list). */
#ifndef LSN_COURSE_H
#define LSN_COURSE_H

#include <stddef.h>

#include "lsn.h"

typedef struct lsn_course {
    char dir[4096];            /* the lessons folder */
    int nlessons;
    lsn_info *lessons;         /* in course order; number == index + 1 */
    int nchapters;
    char **chapter_titles;     /* [chapter - 1] */
} lsn_course;

/* Read <dir>/manifest.json into *c and mark which files exist. Returns 0, or
 * -1 with one line in err (missing or invalid manifest, bad entry: the
 * message names the entry and what to fix). */
int lsn_course_load(lsn_course *c, const char *dir, char *err, size_t errlen);
void lsn_course_free(lsn_course *c);

/* Files named like lessons ("NN-*.lua") in the folder but not in the manifest,
 * as one line each into report. Returns how many. */
int lsn_course_unlisted(const lsn_course *c, char *report, size_t reportlen);

/* Path of lesson number's file into buf. Returns 0, or -1 if no such lesson. */
int lsn_course_path(const lsn_course *c, int number, char *buf, size_t buflen);

#endif
