/* room_access: the follower admission rule and the peer credentials it
 * reads (see room_access.h). */
/* struct ucred and SO_PEERCRED are Linux extensions. */
#define _GNU_SOURCE
#include "room_access.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kv_util.h"
#include "room_path.h"

int room_access_allowed(uid_t owner, gid_t group, const room_peer *peer)
{
    if (peer->uid == owner)
        return 1;
    if (group == ROOM_NO_GROUP)
        return 0;
    if (peer->gid == group)
        return 1;
    int n = peer->ngroups < 0 ? 0 : peer->ngroups > ROOM_MAX_PEER_GROUPS ? ROOM_MAX_PEER_GROUPS : peer->ngroups;
    for (int i = 0; i < n; i++)
        if (peer->groups[i] == group)
            return 1;
    return 0;
}

/* "Groups:\t4 24 27\n" of /proc/<pid>/status. Returns the count or -1. */
static int proc_groups(pid_t pid, gid_t *out, int max)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Groups:", 7))
            continue;
        n = 0;
        char *p = line + 7, *end;
        for (;;) {
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p < '0' || *p > '9')
                break;
            unsigned long g = strtoul(p, &end, 10);
            if (end == p)
                break;
            if (n < max)
                out[n++] = (gid_t)g;
            p = end;
        }
        break;
    }
    fclose(f);
    return n;
}

int room_peer_get(int fd, room_peer *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct ucred cr;
    socklen_t l = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || l != sizeof cr)
        return kv_errf(err, errlen, -1, "cannot read the follower's credentials: %s", strerror(errno));
    out->pid = cr.pid;
    out->uid = cr.uid;
    out->gid = cr.gid;
    int n = cr.pid > 0 ? proc_groups(cr.pid, out->groups, ROOM_MAX_PEER_GROUPS) : -1;
    if (n < 0) {
        /* No /proc (or the process is gone): the group database instead. */
        struct passwd pw, *res = NULL;
        char buf[4096];
        n = 0;
        if (getpwuid_r(cr.uid, &pw, buf, sizeof buf, &res) == 0 && res) {
            int ng = ROOM_MAX_PEER_GROUPS;
            if (getgrouplist(res->pw_name, res->pw_gid, out->groups, &ng) >= 0)
                n = ng;
        }
    }
    out->ngroups = n;
    return 0;
}

void room_access_refusal(char *out, size_t len, const char *room, uid_t owner, gid_t group, uid_t peer_uid)
{
    char o[ROOM_NAME_MAX], p[ROOM_NAME_MAX];
    room_user_name(owner, o, sizeof o);
    room_user_name(peer_uid, p, sizeof p);
    if (group == ROOM_NO_GROUP) {
        snprintf(out, len, "room '%s' is open to %s only; you (%s) may not follow it (the presenter can add "
                           "--allow-group GROUP)",
                 room, o, p);
        return;
    }
    char g[ROOM_NAME_MAX];
    struct group gr, *res = NULL;
    char buf[8192];
    if (getgrgid_r(group, &gr, buf, sizeof buf, &res) == 0 && res)
        snprintf(g, sizeof g, "%s", res->gr_name);
    else
        snprintf(g, sizeof g, "%u", (unsigned)group);
    snprintf(out, len, "room '%s' is open to %s and group %s only; you (%s) are not in group %s", room, o, g, p, g);
}

int room_group_lookup(const char *name, gid_t *gid, char *err, size_t errlen)
{
    struct group gr, *res = NULL;
    char buf[16384];
    if (!name || !*name)
        return kv_errf(err, errlen, -1, "--allow-group needs a group name");
    int rc = getgrnam_r(name, &gr, buf, sizeof buf, &res);
    if (!res) {
        char *end;
        unsigned long g = strtoul(name, &end, 10);
        if (*name >= '0' && *name <= '9' && !*end && g < 0xfffffffful)
            rc = getgrgid_r((gid_t)g, &gr, buf, sizeof buf, &res);
    }
    if (!res)
        return kv_errf(err, errlen, -1, "there is no group '%s' on this machine%s (see getent group)", name,
                       rc ? " (or the group database could not be read)" : "");
    *gid = res->gr_gid;
    if (geteuid() == 0 || getegid() == res->gr_gid)
        return 0;
    gid_t mine[ROOM_MAX_PEER_GROUPS];
    int n = getgroups(ROOM_MAX_PEER_GROUPS, mine);
    for (int i = 0; i < n; i++)
        if (mine[i] == res->gr_gid)
            return 0;
    return kv_errf(err, errlen, -1,
                   "you are not in group '%s', so the room cannot be given to it (add yourself with "
                   "usermod -aG %s $USER, then log in again)",
                   name, name);
}
