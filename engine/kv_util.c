#include "kv_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kv_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int kv_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 255 || lb > 255)
        return 999;
    int row[256];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int c = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < c)
                c = up + 1;
            if (row[j - 1] + 1 < c)
                c = row[j - 1] + 1;
            row[j] = c;
            diag = up;
        }
    }
    return row[lb];
}

char *kv_fmt_thousands(char *buf, size_t len, long long v)
{
    char tmp[32];
    /* magnitude without overflowing on LLONG_MIN */
    unsigned long long u = v < 0 ? (unsigned long long)(-(v + 1)) + 1 : (unsigned long long)v;
    int k = 0, digits = 0;
    do {
        if (digits && digits % 3 == 0)
            tmp[k++] = ',';
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
        digits++;
    } while (u && k < 30);
    if (v < 0)
        tmp[k++] = '-';
    size_t j = 0;
    while (k > 0 && j + 1 < len)
        buf[j++] = tmp[--k];
    if (len)
        buf[j] = '\0';
    return buf;
}

static const char *why_open(int e)
{
    return e == ENOENT ? "no such file" : strerror(e);
}

int kv_read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading must not wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return kv_errf(err, errlen, -1, "%s: %s", path, why_open(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kv_errf(err, errlen, -1, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        const char *kind = S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a pipe (FIFO)"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket"
                         : "not a regular file";
        return kv_errf(err, errlen, -1, "%s: is %s, not a regular file", path, kind);
    }
    if ((unsigned long long)st.st_size > (unsigned long long)max_bytes) {
        close(fd);
        return kv_errf(err, errlen, -1, "%s: %lld bytes, larger than the %zu-byte limit", path,
                       (long long)st.st_size, max_bytes);
    }
    /* the file may grow between fstat and read: read at most max_bytes + 1 */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return kv_errf(err, errlen, -1, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            if (cap > max_bytes) {
                free(buf);
                close(fd);
                return kv_errf(err, errlen, -1, "%s: larger than the %zu-byte limit", path, max_bytes);
            }
            size_t ncap = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                close(fd);
                return kv_errf(err, errlen, -1, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return kv_errf(err, errlen, -1, "%s: %s", path, strerror(e));
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (n > max_bytes) {
        free(buf);
        return kv_errf(err, errlen, -1, "%s: larger than the %zu-byte limit", path, max_bytes);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

FILE *kv_open_output(const char *path, const char *mode, const char *const *inputs, int ninputs, char *err,
                     size_t errlen)
{
    int append = mode && mode[0] == 'a';
    /* O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of waiting for one */
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
    if (fd < 0) {
        kv_errf(err, errlen, -1, "%s: %s", path,
                errno == ENXIO ? "is a pipe (FIFO), not a regular file" : why_open(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int isdev = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode);
        close(fd);
        kv_errf(err, errlen, -1, "%s: is %s, not a regular file", path,
                S_ISFIFO(st.st_mode) ? "a pipe (FIFO)" : isdev ? "a device" : "not a regular file");
        return NULL;
    }
    for (int i = 0; i < ninputs; i++) {
        struct stat in;
        if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
            close(fd);
            kv_errf(err, errlen, -1, "%s: is the input %s: writing it would destroy what is being read", path,
                    inputs[i]);
            return NULL;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if ((fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) || (!append && ftruncate(fd, 0) < 0)) {
        int e = errno;
        close(fd);
        kv_errf(err, errlen, -1, "%s: %s", path, strerror(e));
        return NULL;
    }
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) {
        int e = errno;
        close(fd);
        kv_errf(err, errlen, -1, "%s: %s", path, strerror(e));
    }
    return f;
}
