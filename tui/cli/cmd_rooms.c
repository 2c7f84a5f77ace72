/* kvlab rooms: the classroom rooms on this machine, who presents which
 * lesson, how many follow, and whether you may join. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "room_follow.h"
#include "room_path.h"

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
    static room_entry rooms[ROOM_SCAN_MAX];
    int unsafe = 0;
    int n = room_scan(rooms, ROOM_SCAN_MAX, &unsafe);
    static char lesson[ROOM_SCAN_MAX][ROOM_TITLE_MAX + 16], follow[ROOM_SCAN_MAX][16], join[ROOM_SCAN_MAX][ROOM_TEXT_MAX + 16];
    static char shown[ROOM_SCAN_MAX][ROOM_NAME_MAX + ROOM_ROOMNAME_MAX + 2];
    int live = 0, wn = 4, wp = 9, wl = 6;
    static room_msg w;
    for (int i = 0; i < n; i++) {
        const room_entry *e = &rooms[i];
        snprintf(shown[i], sizeof shown[i], "%s/%s", e->owner, e->name);
        char err[256];
        int rc = room_probe(e->sock, 500, &w, err, sizeof err);
        if (rc == 0) {
            live++;
            if (w.st.lesson > 0)
                snprintf(lesson[i], sizeof lesson[i], "%d %s", w.st.lesson, w.st.lesson_title);
            else
                snprintf(lesson[i], sizeof lesson[i], "-");
            snprintf(follow[i], sizeof follow[i], "%d", w.st.followers);
            if (w.group[0])
                snprintf(join[i], sizeof join[i], "yes (open to group %s)", w.group);
            else
                snprintf(join[i], sizeof join[i], "yes");
        } else {
            snprintf(lesson[i], sizeof lesson[i], "-");
            snprintf(follow[i], sizeof follow[i], "-");
            if (rc == 1)
                snprintf(join[i], sizeof join[i], "no: %s", w.text);
            else
                snprintf(join[i], sizeof join[i], "no: %s", err);
        }
        int l;
        if ((l = (int)strlen(shown[i])) > wn) wn = l;
        if ((l = (int)strlen(e->owner)) > wp) wp = l;
        if ((l = (int)strlen(lesson[i])) > wl) wl = l;
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
        for (int i = 0; i < n; i++)
            printf("%-*s  %-*s  %-*.*s  %-9s  %s\n", wn, shown[i], wp, rooms[i].owner, wl, wl, lesson[i], follow[i],
                   join[i]);
        printf("%d room%s, %d with a presenter. Follow one with: kvlab --follow USER/ROOM\n", n, n == 1 ? "" : "s",
               live);
    }
    if (nclosed)
        printf("Not open to you: the rooms of %s (a presenter opens a room to a group with --allow-group GROUP).\n",
               closed);
    if (unsafe)
        printf("(%d room folder%s skipped: not safe to use, see kvlab --present for why)\n", unsafe,
               unsafe == 1 ? "" : "s");
    return 0;
}
