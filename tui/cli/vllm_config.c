/* vllm_config: vLLM's --config FILE.yaml (vllm_config.h). */
#include "vllm_config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_args.h"
#include "kv_util.h"
#include "kv_vllm_flags.h"

#ifdef KVLAB_HAVE_YAML
#include <yaml.h>
#endif

#define CONFIG_MAX_BYTES (1u << 20)

typedef struct strv {
    char **v;
    int n, cap;
} strv;

static int strv_push(strv *s, const char *x)
{
    if (s->n + 1 >= s->cap) {
        int cap = s->cap ? s->cap * 2 : 32;
        char **nv = realloc(s->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        s->v = nv;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(x)))
        return -1;
    s->n++;
    s->v[s->n] = NULL;
    return 0;
}

void kvlab_vllm_config_free(char **argv, int argc)
{
    for (int i = 0; argv && i < argc; i++)
        free(argv[i]);
    free(argv);
}

#ifdef KVLAB_HAVE_YAML
/* PyYAML's SafeLoader (YAML 1.1) reads these plain scalars as booleans. */
static int yaml_bool(const yaml_node_t *n, int *b)
{
    static const char *const t[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
    static const char *const f[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = (const char *)n->data.scalar.value;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!strcmp(s, t[i])) {
            *b = 1;
            return 1;
        }
        if (!strcmp(s, f[i])) {
            *b = 0;
            return 1;
        }
    }
    return 0;
}

static int yaml_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = (const char *)n->data.scalar.value;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* A plain scalar that reads as a number: json.dumps writes it as one. */
static int yaml_number(const yaml_node_t *n, double *d)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = (const char *)n->data.scalar.value;
    char *end;
    *d = strtod(s, &end);
    return *s && !*end && strspn(s, "+-0123456789.eE") == strlen(s);
}

/* The node as json.dumps writes what yaml.safe_load made of it. */
static cJSON *yaml_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
    if (!n || depth > 32)
        return cJSON_CreateNull();
    int b;
    double d;
    switch (n->type) {
    case YAML_SCALAR_NODE:
        if (yaml_bool(n, &b))
            return cJSON_CreateBool(b);
        if (yaml_null(n))
            return cJSON_CreateNull();
        if (yaml_number(n, &d))
            return cJSON_CreateNumber(d);
        return cJSON_CreateString((const char *)n->data.scalar.value);
    case YAML_SEQUENCE_NODE: {
        cJSON *a = cJSON_CreateArray();
        for (yaml_node_item_t *it = n->data.sequence.items.start; a && it < n->data.sequence.items.top; it++)
            cJSON_AddItemToArray(a, yaml_to_json(doc, yaml_document_get_node(doc, *it), depth + 1));
        return a;
    }
    case YAML_MAPPING_NODE: {
        cJSON *o = cJSON_CreateObject();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            if (k && k->type == YAML_SCALAR_NODE)
                cJSON_AddItemToObject(o, (const char *)k->data.scalar.value,
                                      yaml_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1));
        }
        return o;
    }
    default:
        return cJSON_CreateNull();
    }
}

/* Does --no-<key> exist (kvlab's switches, or a BooleanOptionalAction of vLLM's)? */
/* Whether release index ri's parser has a --no- form of key (a kvlab flag's
 * own --no-X otherwise): load_config_file turns "key: false" into --no-key
 * where it exists and drops it where the option is a plain store_true
 * switch (0.6.4's enable-prefix-caching). */
static int has_no_form(const char *key, int ri)
{
    char no[160];
    snprintf(no, sizeof no, "no-%s", key);
    int neg = 0, nargs = 0;
    const kv_vllm_flag *vf = kv_vllm_flag_find(no, &neg);
    if (vf && neg)
        return !kv_vllm_flag_shape(vf, ri, &nargs, &neg) || neg;
    return kv_args_flag_find(no) != NULL;
}

/* The file's arguments, in load_config_file's order. */
static int load_config(const char *path, int ri, strv *out, char *err, size_t errlen)
{
    const char *dot = strrchr(path, '.');
    const char *ext = dot ? dot + 1 : path;
    if (strcmp(ext, "yaml") && strcmp(ext, "yml"))
        return kv_errf(err, errlen, -1, "ValueError: Config file must be of a yaml/yml type. %s supplied", ext);
    char *text = NULL;
    size_t len = 0;
    char e2[300];
    if (kv_read_file(path, CONFIG_MAX_BYTES, &text, &len, e2, sizeof e2) != 0)
        return kv_errf(err, errlen, -1, "--config: %s", e2);
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = -1;
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return kv_errf(err, errlen, -1, "--config %s: out of memory", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = kv_errf(err, errlen, -1, "--config %s: not YAML: %s at line %zu", path,
                     parser.problem ? parser.problem : "parse error", parser.problem_mark.line + 1);
        yaml_parser_delete(&parser);
        free(text);
        return rc;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || root->type != YAML_MAPPING_NODE) {
        rc = kv_errf(err, errlen, -1, "--config %s: the file must be a YAML mapping of flag names to values "
                                      "(port: 8000)", path);
        goto done;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&doc, p->value);
        if (!k || k->type != YAML_SCALAR_NODE || !v) {
            rc = kv_errf(err, errlen, -1, "--config %s: every key must be a flag name", path);
            goto done;
        }
        const char *key = (const char *)k->data.scalar.value;
        char flag[160];
        snprintf(flag, sizeof flag, "--%s", key);
        int b;
        if (yaml_bool(v, &b)) {
            if (b && strv_push(out, flag))
                goto oom;
            if (!b && has_no_form(key, ri)) {
                snprintf(flag, sizeof flag, "--no-%s", key);
                if (strv_push(out, flag))
                    goto oom;
            }
        } else if (v->type == YAML_SEQUENCE_NODE) {
            if (v->data.sequence.items.top == v->data.sequence.items.start)
                continue;
            if (strv_push(out, flag))
                goto oom;
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *x = yaml_document_get_node(&doc, *it);
                cJSON *j = x && x->type != YAML_SCALAR_NODE ? yaml_to_json(&doc, x, 0) : NULL;
                char *js = j ? cJSON_PrintUnformatted(j) : NULL;
                int bad = strv_push(out, js ? js : x ? (const char *)x->data.scalar.value : "");
                cJSON_free(js);
                cJSON_Delete(j);
                if (bad)
                    goto oom;
            }
        } else if (v->type == YAML_MAPPING_NODE) {
            cJSON *j = yaml_to_json(&doc, v, 0);
            char *js = j ? cJSON_PrintUnformatted(j) : NULL;
            int bad = !js || strv_push(out, flag) || strv_push(out, js);
            cJSON_free(js);
            cJSON_Delete(j);
            if (bad)
                goto oom;
        } else {
            if (strv_push(out, flag) || strv_push(out, yaml_null(v) ? "None" : (const char *)v->data.scalar.value))
                goto oom;
        }
    }
    rc = 0;
    goto done;
oom:
    rc = kv_errf(err, errlen, -1, "--config %s: out of memory", path);
done:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
    return rc;
}
#endif

/* The read release the line's --vllm-version names (kv_vllm_release_index;
 * the newest without one). */
static int release_of(int argc, char **argv)
{
    const char *v = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "--vllm-version=", 15) || !strncmp(argv[i], "--vllm_version=", 15))
            v = argv[i] + 15;
        else if ((!strcmp(argv[i], "--vllm-version") || !strcmp(argv[i], "--vllm_version")) && i + 1 < argc)
            v = argv[i + 1];
    }
    int ri = kv_vllm_release_index(v);
    return ri < 0 ? kv_vllm_num_releases - 1 : ri;
}

int kvlab_vllm_config_expand(int argc, char **argv, char ***out, char *err, size_t errlen)
{
    strv s = {0};
    *out = NULL;
    int at = -1, count = 0;
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) {
            count++;
            at = i;
            path = i + 1 < argc ? argv[i + 1] : NULL;
        } else if (!strncmp(argv[i], "--config=", 9)) {
            count++;
            at = i;
            path = argv[i] + 9;
        }
    }
    if (count > 1)
        return kv_errf(err, errlen, -1, "AssertionError: More than one config file specified!");
    if (count == 1 && (!path || !*path))
        return kv_errf(err, errlen, -1, "ValueError: No config file specified! Please check your command-line "
                                        "arguments.");
    int skip = count ? (strchr(argv[at], '=') ? 1 : 2) : 0;
    /* the subcommand (a pasted "vllm serve") and a positional model stay first */
    int head = 0;
    if (argc >= 2 && !strcmp(argv[0], "vllm") && !strcmp(argv[1], "serve"))
        head = 2;
    if (head < argc && head != at && argv[head][0] != '-')
        head++;
    for (int i = 0; i < head; i++)
        if (strv_push(&s, argv[i]))
            goto oom;
    if (count) {
#ifdef KVLAB_HAVE_YAML
        if (load_config(path, release_of(argc, argv), &s, err, errlen) != 0) {
            kvlab_vllm_config_free(s.v, s.n);
            return -1;
        }
#else
        kvlab_vllm_config_free(s.v, s.n);
        return kv_errf(err, errlen, -1, "--config %s: this kvlab was built without libyaml (apt-get install "
                                        "libyaml-dev and rebuild); put the file's flags on the line", path);
#endif
    }
    for (int i = head; i < argc; i++) {
        if (count && i >= at && i < at + skip)
            continue;
        if (strv_push(&s, argv[i]))
            goto oom;
    }
    if (!s.v && strv_push(&s, "") == 0) { /* an empty line: one empty slot, argc 0 */
        free(s.v[0]);
        s.n = 0;
        s.v[0] = NULL;
    }
    *out = s.v;
    return s.n;
oom:
    kvlab_vllm_config_free(s.v, s.n);
    return kv_errf(err, errlen, -1, "out of memory");
}

static void add_line(char *notes, size_t n, const char *line)
{
    size_t l = notes ? strlen(notes) : 0;
    if (notes && l + 1 < n)
        snprintf(notes + l, n - l, "%s\n", line);
}

/* vllm/envs.py's readings of the variables kvlab models. */
static int env_flag_true_1(const char *v) /* .strip().lower() in ("1", "true") */
{
    char b[16];
    size_t j = 0;
    while (*v == ' ' || *v == '\t' || *v == '\n')
        v++;
    for (; *v && j + 1 < sizeof b; v++)
        b[j++] = (char)(*v >= 'A' && *v <= 'Z' ? *v - 'A' + 'a' : *v);
    while (j && (b[j - 1] == ' ' || b[j - 1] == '\t' || b[j - 1] == '\n'))
        j--;
    b[j] = '\0';
    return !strcmp(b, "1") || !strcmp(b, "true");
}

int kvlab_vllm_env_apply(kv_args *a, char *notes, size_t noteslen, char *err, size_t errlen)
{
    char line[300];
    const char *v = getenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN");
    if (v && env_flag_true_1(v)) {
        a->allow_long_max_model_len = 1;
        add_line(notes, noteslen, "note: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 from the environment: a --max-model-len "
                                  "above the model's maximum is a warning, as in vLLM");
    }
    /* bool(int(os.environ["VLLM_USE_FLASHINFER_SAMPLER"])): the sampler the
     * profile runs, unless --flashinfer-sampler says otherwise */
    v = getenv("VLLM_USE_FLASHINFER_SAMPLER");
    if (v && !kv_args_is_set(a, "flashinfer-sampler")) {
        char *end;
        long x = strtol(v, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (!*v || *end)
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "VLLM_USE_FLASHINFER_SAMPLER: ValueError: invalid literal for int() with base 10: '%.40s'",
                           v);
        if (kv_args_set(a, "flashinfer-sampler", x ? "true" : "false", err, errlen) < 0)
            return KV_ARGS_EVALUE;
        snprintf(line, sizeof line, "note: VLLM_USE_FLASHINFER_SAMPLER=%.20s from the environment: the profile run "
                                    "samples with %s", v, x ? "FlashInfer's top-k/top-p kernel" : "the native sampler");
        add_line(notes, noteslen, line);
    }
    /* bool(int(...)) in envs.py: the model runner and whether the CUDA-graph
     * estimate is subtracted (the engine applies them where the release reads
     * the variable, kv_release_reads_env). */
    static const struct {
        const char *name;
        const char *on, *off;
    } levers[] = {
        {"VLLM_USE_V2_MODEL_RUNNER", "model runner V2 for every model", "model runner V1 for every model"},
        {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "the CUDA-graph estimate is subtracted before the pool is sized",
         "the CUDA-graph estimate is not subtracted (graphs are captured after the pool)"},
        {"VLLM_USE_V1", "the V1 engine", "the V0 engine (0.8.0-0.10.1.x; other releases have one engine)"},
    };
    for (size_t i = 0; i < sizeof levers / sizeof levers[0]; i++) {
        v = getenv(levers[i].name);
        if (!v)
            continue;
        char *end;
        long x = strtol(v, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (!*v || *end)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "%s: ValueError: invalid literal for int() with base 10: '%.40s'",
                           levers[i].name, v);
        if (i == 0)
            a->use_v2_model_runner = x != 0;
        else if (i == 1)
            a->estimate_cudagraphs = x != 0;
        else
            a->use_v1 = x != 0;
        snprintf(line, sizeof line, "note: %s=%.20s from the environment: %s, where the release reads it",
                 levers[i].name, v, x ? levers[i].on : levers[i].off);
        add_line(notes, noteslen, line);
    }
    return 0;
}

int kvlab_vllm_args_parse(kv_args *a, int argc, char **argv, char *notes, size_t noteslen, char *err, size_t errlen)
{
    char **full = NULL;
    int n = kvlab_vllm_config_expand(argc, argv, &full, err, errlen);
    if (n < 0)
        return KV_ARGS_EVALUE;
    int rc = kv_args_parse(a, n, full, notes, noteslen, err, errlen);
    kvlab_vllm_config_free(full, n);
    if (rc < 0)
        return rc;
    size_t l = notes ? strlen(notes) : 0;
    int e = kvlab_vllm_env_apply(a, notes ? notes + l : NULL, notes ? noteslen - l : 0, err, errlen);
    return e < 0 ? e : rc;
}
