/* kvlab rooms: the classroom rooms on this machine, who presents which
 * lesson, how many follow, and whether you may join. Every room is probed
 * at once (room_probe_many), each with a short deadline, so silent rooms
 * and left-over sockets cost one deadline in all, not one each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "room_follow.h"
#include "room_path.h"

#define PROBE_MS 300  /* a live presenter answers at its next loop turn (tens of ms) */

int cmd_rooms(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kvlab rooms   the classroom rooms on this machine (kvlab --present / --follow)\n");
            return 0;
        }
        fprintf(stderr, "kvlab rooms: unexpected argument '%s' (usage: kvlab rooms)\n", argv[i]);
        return 2;
    }
    room_entry *rooms = calloc(ROOM_SCAN_MAX, sizeof *rooms);
    room_probe_result *res = calloc(ROOM_SCAN_MAX, sizeof *res);
    const char **paths = calloc(ROOM_SCAN_MAX, sizeof *paths);
    if (!rooms || !res || !paths) {
        fprintf(stderr, "kvlab rooms: out of memory\n");
        free(rooms);
        free(res);
        free(paths);
        return 1;
    }
    int unsafe = 0;
    int n = room_scan(rooms, ROOM_SCAN_MAX, &unsafe);
    for (int i = 0; i < n; i++)
        paths[i] = rooms[i].sock;
    room_probe_many(paths, n, PROBE_MS, res);
    int live = 0, wn = 4, wp = 9, wl = 6;
    char lesson[ROOM_TITLE_MAX + 16], shown[ROOM_NAME_MAX + ROOM_ROOMNAME_MAX + 2];
    for (int i = 0; i < n; i++) {
        const room_entry *e = &rooms[i];
        int l;
        snprintf(shown, sizeof shown, "%s/%s", e->owner, e->name);
        if (res[i].rc == 0 && res[i].lesson > 0)
            snprintf(lesson, sizeof lesson, "%d %s", res[i].lesson, res[i].lesson_title);
        else
            snprintf(lesson, sizeof lesson, "-");
        live += res[i].rc == 0;
        if ((l = (int)strlen(shown)) > wn) wn = l;
        if ((l = (int)strlen(e->owner)) > wp) wp = l;
        if ((l = (int)strlen(lesson)) > wl) wl = l;
    }
    char closed[512];
    int nclosed = room_closed_owners(closed, sizeof closed);
    if (n == 0 && !nclosed) {
        printf("No rooms on this machine. Start one with: kvlab --present [ROOM] [--allow-group GROUP]\n");
    } else if (n == 0) {
        printf("No room here is open to you.\n");
    } else {
        if (wl > 40) wl = 40;
        printf("%-*s  %-*s  %-*s  %-9s  %s\n", wn, "ROOM", wp, "PRESENTER", wl, "LESSON", "FOLLOWING", "JOIN");
        for (int i = 0; i < n; i++) {
            const room_entry *e = &rooms[i];
            const room_probe_result *r = &res[i];
            char follow[16], join[ROOM_TEXT_MAX + 280];
            snprintf(shown, sizeof shown, "%s/%s", e->owner, e->name);
            if (r->rc == 0 && r->lesson > 0)
                snprintf(lesson, sizeof lesson, "%d %s", r->lesson, r->lesson_title);
            else
                snprintf(lesson, sizeof lesson, "-");
            if (r->rc == 0) {
                snprintf(follow, sizeof follow, "%d", r->followers);
                if (r->group[0])
                    snprintf(join, sizeof join, "yes (open to group %s)", r->group);
                else
                    snprintf(join, sizeof join, "yes");
            } else {
                snprintf(follow, sizeof follow, "-");
                snprintf(join, sizeof join, "no: %s", r->rc == 1 ? r->text : r->err);
            }
            printf("%-*s  %-*s  %-*.*s  %-9s  %s\n", wn, shown, wp, e->owner, wl, wl, lesson, follow, join);
        }
        printf("%d room%s, %d with a presenter. Follow one with: kvlab --follow USER/ROOM\n", n, n == 1 ? "" : "s",
               live);
    }
    if (nclosed)
        printf("Not open to you: the rooms of %s (a presenter opens a room to a group with --allow-group GROUP).\n",
               closed);
    if (unsafe)
        printf("(%d room folder%s skipped: not safe to use, see kvlab --present for why)\n", unsafe,
               unsafe == 1 ? "" : "s");
    free(rooms);
    free(res);
    free(paths);
    return 0;
}
