/* kv_util: small helpers shared by engine modules. */
#ifndef KV_UTIL_H
#define KV_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) calls these too */
#endif

#define KV_GIB (1024.0 * 1024.0 * 1024.0)

/* Format one error line into err[errlen] (if err is non-NULL); returns rc so
 * callers can write `return kv_errf(err, n, -1, "...")`. */
int kv_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Levenshtein distance between a and b (single-byte edits, case-sensitive;
 * normalise first if case should not count). Strings longer than 255 bytes
 * score 999. Used for "did you mean" suggestions (flags, GPUs, models). */
int kv_edit_distance(const char *a, const char *b);

/* Bytes <-> GiB (2^30), as vLLM prints memory. */
static inline double kv_gib(double bytes) { return bytes / KV_GIB; }
static inline double kv_bytes_of_gib(double gib) { return gib * KV_GIB; }

/* v with thousands separators ("23,184"), as vLLM prints token counts
 * (f"{n:,}"); writes at most len bytes including the NUL; returns buf. */
char *kv_fmt_thousands(char *buf, size_t len, long long v);

/* Read a whole regular file into a NUL-terminated heap buffer (*out, length
 * *len, free() it). Refuses what is not a regular file (a FIFO, a device such
 * as /dev/zero, a folder) without blocking on it, and a file larger than
 * max_bytes, each with a one-line message naming the path. Returns 0, or -1
 * with the message in err (errno-style text for open/read failures; ENOENT
 * reads "no such file"). */
int kv_read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t errlen);

/* Open an output file for writing (mode "w": truncated, "a": appended),
 * the one way kvlab opens what it writes: a FIFO, a device or a folder is
 * refused without blocking (opened O_NONBLOCK, then fstat), and so is a
 * path that is one of the inputs[0..ninputs) (the same file by st_dev and
 * st_ino, whatever the names: simulate --events naming its --trace), before
 * anything is truncated. Returns the stream, or NULL with one line in err. */
FILE *kv_open_output(const char *path, const char *mode, const char *const *inputs, int ninputs, char *err,
                     size_t errlen);

/* ceil(a / b) for positive integers (vLLM's cdiv). */
static inline int64_t kv_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

#ifdef __cplusplus
}
#endif

#endif
