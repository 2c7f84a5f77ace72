#include "kv_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
