/* kv_model: HF config.json -> model shape and derived parameter counts. */
#include "kv_model.h"
#include "kv_util.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CONFIG_BYTES (8u << 20)

/* ---------------------------------------------------------------- reading */

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ------------------------------------------------------------ JSON fields */

typedef struct ctx {
    const cJSON *text;     /* text_config when nested, else root */
    const cJSON *root;
    const cJSON *defaults; /* the text model class's defaults (NULL: none known) */
    const char *root_type; /* the root model_type ("llava", "mistral3", ...; "" if none) */
    const char *path;
    char *err;
    size_t errlen;
} ctx;

/* A key of an object; when a key appears twice the last one counts, as
 * Python's json.load keeps it. */
static const cJSON *get_last(const cJSON *o, const char *key)
{
    const cJSON *found = NULL, *e;
    if (!cJSON_IsObject(o))
        return NULL;
    cJSON_ArrayForEach(e, o)
        if (e->string && !strcmp(e->string, key))
            found = e;
    return found;
}

/* Find a key as transformers sees it: in text_config (or the root of a
 * plain config), else the class default of the text model type
 * (CONFIG_MAPPING[model_type](**text_config)), else the root. */
static const cJSON *field(const ctx *c, const char *key)
{
    const cJSON *v = get_last(c->text, key);
    if (!v && c->defaults)
        v = get_last(c->defaults, key);
    if (!v && c->text != c->root)
        v = get_last(c->root, key);
    return v;
}

/* ------------------------------------------------------- class defaults */

/* The defaults a sparse config leaves to the model class
 * (transformers/models/<type>/configuration_<type>.py, 4.57): -1 = none
 * (the field must be given), kv_heads 0 = as many as attention heads. */
typedef struct class_defaults {
    const char *type;
    int32_t vocab, hidden, inter, layers, heads, kv_heads, head_dim;
    int64_t max_pos;
    int tie;          /* tie_word_embeddings */
    int32_t sliding;  /* sliding_window (0: none) */
} class_defaults;

static const class_defaults CLASS_DEFAULTS[] = {
    {"llama", 32000, 4096, 11008, 32, 32, 0, -1, 2048, 0, 0},
    {"mistral", 32000, 4096, 14336, 32, 32, 8, -1, 4096 * 32, 0, 4096},
    {"mixtral", 32000, 4096, 14336, 32, 32, 8, -1, 4096 * 32, 0, 0},
    {"qwen2", 151936, 4096, 22016, 32, 32, 32, -1, 32768, 0, 0},
    {"qwen3", 151936, 4096, 22016, 32, 32, 32, 128, 32768, 0, 0},
    {"qwen2_moe", 151936, 2048, -1, 24, -1, -1, -1, 32768, 0, 0},
    {"qwen3_moe", 151936, 2048, -1, 24, -1, -1, -1, 32768, 0, 0},
    {"gemma", 256000, 3072, 24576, 28, 16, 16, 256, 8192, 1, 0},
    {"gemma2", 256000, 2304, 9216, 26, 8, 4, 256, 8192, 1, 4096},
    {"gemma3_text", 262208, 2304, 9216, 26, 8, 4, 256, 131072, 1, 4096},
    {"phi3", 32064, 3072, 8192, 32, 32, 0, -1, 4096, 0, 0},
    {"gpt_oss", -1, -1, -1, -1, -1, -1, -1, 131072, 0, 0},
    {"deepseek_v2", 32000, 4096, -1, 32, -1, -1, -1, 2048, 0, 0},
    {"deepseek_v3", 129280, 7168, -1, 61, -1, -1, -1, 4096, 0, 0},
};

/* Multimodal wrappers: the text model type their text_config defaults to
 * (LlavaConfig, Mistral3Config, Gemma3Config). */
static const struct {
    const char *type, *text_type;
} WRAPPERS[] = {{"llava", "llama"}, {"llava_next", "llama"}, {"mistral3", "mistral"}, {"gemma3", "gemma3_text"}};

static const class_defaults *find_defaults(const char *type)
{
    for (size_t i = 0; type && i < sizeof CLASS_DEFAULTS / sizeof CLASS_DEFAULTS[0]; i++)
        if (!strcmp(CLASS_DEFAULTS[i].type, type))
            return &CLASS_DEFAULTS[i];
    return NULL;
}

static cJSON *defaults_object(const class_defaults *d)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !d)
        return o;
    const struct {
        const char *k;
        double v;
    } f[] = {{"vocab_size", d->vocab},         {"hidden_size", d->hidden}, {"intermediate_size", d->inter},
             {"num_hidden_layers", d->layers}, {"num_attention_heads", d->heads},
             {"num_key_value_heads", d->kv_heads > 0 ? d->kv_heads : -1}, {"head_dim", d->head_dim},
             {"max_position_embeddings", (double)d->max_pos}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v > 0)
            cJSON_AddNumberToObject(o, f[i].k, f[i].v);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", d->tie);
    if (d->sliding > 0)
        cJSON_AddNumberToObject(o, "sliding_window", d->sliding);
    return o;
}

/* Read an integer field. Returns 1 if present and valid, 0 if absent or
 * null, -1 (err set) if present with a bad value. */
static int get_int(const ctx *c, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v = field(c, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble)) {
        kv_errf(c->err, c->errlen, -1, "%s: field \"%s\" must be a whole number", c->path, key);
        return -1;
    }
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        kv_errf(c->err, c->errlen, -1, "%s: field \"%s\" = %.17g is out of range [%lld, %lld]",
                c->path, key, v->valuedouble, (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int64_t)v->valuedouble;
    return 1;
}

static int get_int32(const ctx *c, const char *key, int64_t lo, int64_t hi, int32_t *out)
{
    int64_t v = 0;
    int r = get_int(c, key, lo, hi, &v);
    if (r == 1)
        *out = (int32_t)v;
    return r;
}

static int need_int32(const ctx *c, const char *key, int64_t lo, int64_t hi, int32_t *out)
{
    int r = get_int32(c, key, lo, hi, out);
    if (r == 0) {
        const cJSON *mt = get_last(c->text, "model_type");
        if (c->text != c->root && !c->defaults)
            kv_errf(c->err, c->errlen, -1,
                    "%s: text_config leaves out \"%s\" and its model_type '%s' has no class defaults kvlab knows "
                    "(give the field in text_config)",
                    c->path, key, cJSON_IsString(mt) ? mt->valuestring : "");
        else
            kv_errf(c->err, c->errlen, -1, "%s: required field \"%s\" is missing", c->path, key);
    }
    return r == 1 ? 1 : -1;
}

static int get_bool(const ctx *c, const char *key, int dflt, int32_t *out)
{
    const cJSON *v = field(c, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(v)) {
        kv_errf(c->err, c->errlen, -1, "%s: field \"%s\" must be true or false", c->path, key);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 1;
}

static const char *get_str(const ctx *c, const char *key)
{
    const cJSON *v = field(c, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A text field that, when present, must be a string (or null). */
static int check_str(const ctx *c, const char *key)
{
    const cJSON *v = field(c, key);
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return kv_errf(c->err, c->errlen, -1, "%s: field \"%s\" must be a string", c->path, key);
    return 0;
}

/* ---------------------------------------------------------- vision tower */

/* Parameters of a multimodal checkpoint's vision tower, as vLLM builds it
 * (model_executor/models/llava.py init_vision_tower_for_llava keeps the
 * layers up to vision_feature_layer; clip.py, siglip.py, pixtral.py), and of
 * its projector (llava.py LlavaMultiModalProjector, mistral3.py
 * Mistral3MultiModalProjector with its patch merger, gemma3_mm.py
 * Gemma3MultiModalProjector). 0 for a text-only config. */
/* Vision towers whose encoder profile kvlab models, by the checkpoint's
 * root model_type: the image processor's max_pixels and the dummy video's
 * frame cap as vLLM profiles them (model_executor/models/qwen2_vl.py
 * get_image_size_with_most_features, _MAX_FRAMES_PER_VIDEO = 14; Qwen2.5-VL's
 * preprocessor_config.json max_pixels 12845056), and the tower's config
 * defaults (transformers Qwen2_5_VLVisionConfig). */
static const struct mm_tower {
    const char *root_type;
    int64_t max_pixels;
    int32_t max_frames;
    int32_t depth, hidden, intermediate, heads, patch, temporal_patch, merge, in_chans, out_hidden;
} MM_TOWERS[] = {
    {"qwen2_5_vl", 12845056, 14, 32, 3584, 3420, 16, 14, 2, 2, 3, 3584},
};

/* Qwen2.5-VL's tower as vLLM builds it (model_executor/models/qwen2_5_vl.py
 * Qwen2_5_VisionTransformer): a Conv3d patch embedding without bias, depth
 * blocks of RMSNorm + attention (qkv and proj with biases) + RMSNorm + gated
 * MLP with biases, and the patch merger (RMSNorm, then merge^2 x hidden ->
 * merge^2 x hidden -> out_hidden with biases). */
static int mm_tower_params(const ctx *c, const struct mm_tower *t, const cJSON *vc, kv_model *m)
{
    ctx v = *c;
    v.text = v.root = vc;
    v.defaults = NULL;
    int32_t d = t->depth, h = t->hidden, I = t->intermediate, nh = t->heads, p = t->patch, tp = t->temporal_patch,
            mg = t->merge, ch = t->in_chans, out = t->out_hidden;
    if (get_int32(&v, "depth", 1, 1024, &d) < 0 || get_int32(&v, "hidden_size", 1, 1 << 16, &h) < 0 ||
        get_int32(&v, "intermediate_size", 1, 1 << 20, &I) < 0 || get_int32(&v, "num_heads", 1, 1024, &nh) < 0 ||
        get_int32(&v, "patch_size", 1, 1024, &p) < 0 || get_int32(&v, "temporal_patch_size", 1, 64, &tp) < 0 ||
        get_int32(&v, "spatial_merge_size", 1, 64, &mg) < 0 || get_int32(&v, "in_chans", 1, 64, &ch) < 0 ||
        get_int32(&v, "out_hidden_size", 1, 1 << 16, &out) < 0)
        return -1;
    m->vision_depth = d, m->vision_hidden = h, m->vision_intermediate = I, m->vision_heads = nh;
    m->vision_patch = p, m->vision_temporal_patch = tp, m->vision_merge = mg, m->vision_in_chans = ch;
    m->vision_out_hidden = out, m->vision_max_pixels = t->max_pixels, m->vision_max_frames = t->max_frames;
    double H = h, II = I, M = (double)mg * mg * h;
    double block = 4 * H * H + 4 * H + 3 * H * II + 2 * II + H + 2 * H;
    double embed = (double)ch * tp * p * p * H;
    double merger = H + M * M + M + M * out + out;
    m->params_vision = (int64_t)(d * block + embed + merger);
    return 0;
}

static int vision_params(const ctx *c, kv_model *m)
{
    const cJSON *vc = get_last(c->root, "vision_config");
    if (!cJSON_IsObject(vc))
        return 0;
    for (size_t i = 0; i < sizeof MM_TOWERS / sizeof MM_TOWERS[0]; i++)
        if (!strcmp(c->root_type, MM_TOWERS[i].root_type))
            return mm_tower_params(c, &MM_TOWERS[i], vc, m);
    ctx v = *c;
    v.text = v.root = vc;
    v.defaults = NULL;
    const cJSON *vt = get_last(vc, "model_type");
    const char *type = cJSON_IsString(vt) ? vt->valuestring : "clip_vision_model";
    int pixtral = !strcmp(type, "pixtral"), siglip = !strcmp(type, "siglip_vision_model");
    /* PixtralVisionConfig / SiglipVisionConfig / CLIPVisionConfig defaults */
    int64_t h = pixtral ? 1024 : 768, I = pixtral ? 4096 : 3072, L = pixtral ? 24 : 12,
            img = pixtral ? 1024 : 224, patch = pixtral ? 16 : siglip ? 16 : 32;
    if (get_int(&v, "hidden_size", 1, 1 << 16, &h) < 0 || get_int(&v, "intermediate_size", 1, 1 << 20, &I) < 0 ||
        get_int(&v, "num_hidden_layers", 1, 1024, &L) < 0 || get_int(&v, "image_size", 1, 1 << 16, &img) < 0 ||
        get_int(&v, "patch_size", 1, 1 << 12, &patch) < 0)
        return -1;
    int64_t fl = -1;
    ctx rc = *c;
    rc.text = rc.root;
    rc.defaults = NULL;
    if (get_int(&rc, "vision_feature_layer", -1024, 1024, &fl) < 0)
        return -1;
    int64_t used = fl < 0 ? L + fl + 1 : fl;
    if (used < 1 || used > L)
        used = L;
    double H = (double)h, II = (double)I, n = (double)(img / patch) * (img / patch);
    double layer = pixtral ? 4 * H * H + 3 * H * II + 2 * H                    /* no biases, gated MLP, 2 RMSNorms */
                           : 4 * (H * H + H) + 2 * H * II + II + H + 4 * H; /* biases, fc1/fc2, 2 LayerNorms */
    double embed = 3.0 * patch * patch * H + (pixtral ? H : H + (n + (siglip ? 0 : 1)) * H + (siglip ? 0 : H));
    double T = m->hidden_size;
    double proj;
    if (!strncmp(m->model_type, "gemma3", 6) || !strcmp(c->root_type, "gemma3"))
        proj = H * T + H;                                  /* mm_input_projection + soft-embedding norm */
    else if (!strcmp(c->root_type, "mistral3")) {
        int64_t merge = 2;
        if (get_int(&rc, "spatial_merge_size", 1, 64, &merge) < 0)
            return -1;
        proj = H + H * merge * merge * H + H * T + T * T;  /* norm, patch merger, linear_1, linear_2 */
    } else {
        proj = H * T + T + T * T + T;                      /* linear_1, linear_2 with biases */
    }
    m->params_vision = (int64_t)((double)used * layer + embed + 2 * H + proj);
    return 0;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* -------------------------------------------------------- derived values */

static int dtype_bytes_of(const char *s)
{
    if (!s)
        return 2;
    if (!strcmp(s, "float32") || !strcmp(s, "fp32"))
        return 4;
    return 2;
}

/* vLLM's derived max_model_len (vllm/config/model.py _get_and_verify_max_len):
 * the smallest of the length keys present, times the RoPE scaling factor
 * unless the type already includes it (su, longrope, llama3) or the model is
 * Gemma 3 (its 128K is already scaled); yarn starts from the original length. */
static int derive_max_len(const ctx *c, kv_model *m)
{
    static const char *keys[] = {"max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                                 "max_sequence_length", "max_seq_length", "seq_len"};
    int64_t best = 0;
    snprintf(m->max_len_key, sizeof m->max_len_key, "%s", keys[0]);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int64_t v = 0;
        int r = get_int(c, keys[i], 1, (int64_t)1 << 40, &v);
        if (r < 0)
            return -1;
        if (r == 1 && (best == 0 || v < best)) {
            best = v;
            snprintf(m->max_len_key, sizeof m->max_len_key, "%s", keys[i]);
        }
    }
    if (best == 0) {
        if (strstr(m->model_type, "gemma3"))
            best = 131072; /* Gemma3TextConfig default, absent from the sparse official file */
        else
            return kv_errf(c->err, c->errlen, -1, "%s: required field \"max_position_embeddings\" is missing",
                           c->path);
    }
    const cJSON *rs = field(c, "rope_scaling");
    if (cJSON_IsObject(rs) && !strstr(m->model_type, "gemma3")) {
        const cJSON *t = get_last(rs, "rope_type");
        if (!cJSON_IsString(t))
            t = get_last(rs, "type");
        const char *type = cJSON_IsString(t) ? t->valuestring : "";
        const cJSON *f = get_last(rs, "factor");
        if (strcmp(type, "su") && strcmp(type, "longrope") && strcmp(type, "llama3") && cJSON_IsNumber(f) &&
            f->valuedouble >= 1.0 && f->valuedouble <= 1024.0) {
            double len = (double)best;
            if (!strcmp(type, "yarn")) {
                const cJSON *o = get_last(rs, "original_max_position_embeddings");
                if (cJSON_IsNumber(o) && o->valuedouble >= 1 && o->valuedouble <= (double)((int64_t)1 << 40))
                    len = floor(o->valuedouble);
            }
            best = (int64_t)(len * f->valuedouble);
        }
    }
    if (best > ((int64_t)1 << 34))
        return kv_errf(c->err, c->errlen, -1, "%s: field \"max_position_embeddings\" gives a length of %lld tokens, "
                       "more than kvlab plans for (2^34)", c->path, (long long)best);
    m->max_position_embeddings = best;
    return 0;
}

static int parse_sliding(const ctx *c, kv_model *m)
{
    int32_t win = 0;
    int r = get_int32(c, "sliding_window", 0, INT32_MAX, &win);
    if (r < 0)
        return -1;
    const cJSON *lt = field(c, "layer_types");
    int L = m->num_hidden_layers;
    memset(m->layer_is_sliding, 0, sizeof m->layer_is_sliding);
    if (cJSON_IsArray(lt)) {
        if (cJSON_GetArraySize(lt) != L)
            return kv_errf(c->err, c->errlen, -1, "%s: field \"layer_types\" has %d entries, num_hidden_layers is %d",
                           c->path, cJSON_GetArraySize(lt), L);
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, lt) {
            if (!cJSON_IsString(e))
                return kv_errf(c->err, c->errlen, -1, "%s: field \"layer_types\" entry %d is not a string", c->path, i);
            if (!strcmp(e->valuestring, "sliding_attention"))
                m->layer_is_sliding[i] = 1;
            i++;
        }
    } else if (win > 0 && !strcmp(m->model_type, "gemma2")) {
        for (int i = 0; i < L; i++)
            m->layer_is_sliding[i] = (i % 2 == 0); /* Gemma 2: even layers local */
    } else if (win > 0 && strstr(m->model_type, "gemma3")) {
        int32_t pat = 6; /* Gemma3TextConfig default: 5 local layers then 1 global */
        if (get_int32(c, "sliding_window_pattern", 1, 1 << 20, &pat) < 0)
            return -1;
        for (int i = 0; i < L; i++)
            m->layer_is_sliding[i] = ((i + 1) % pat) != 0;
    } else if (win > 0 && !strncmp(m->model_type, "qwen", 4)) {
        int32_t use = 0, from = 0;
        if (get_bool(c, "use_sliding_window", 0, &use) < 0)
            return -1;
        if (get_int32(c, "max_window_layers", 0, INT32_MAX, &from) < 0)
            return -1;
        for (int i = 0; i < L; i++)
            m->layer_is_sliding[i] = use && i >= from;
    }
    /* Other models with a sliding_window but no per-layer pattern (Mistral
     * v0.1, Phi-3) run full attention in vLLM's llama-family code. */
    int n = 0;
    for (int i = 0; i < L; i++)
        n += m->layer_is_sliding[i];
    m->num_sliding_layers = n;
    m->sliding_window = n ? win : 0;
    if (n && win <= 0)
        return kv_errf(c->err, c->errlen, -1, "%s: field \"sliding_window\" must be set when layers slide", c->path);
    return 0;
}

/* Parameters of the linear modules a list names (fbgemm_fp8's
 * modules_to_not_convert, ModelOpt's exclude_modules): a name ending in a
 * decoder projection counts that projection of one layer; "lm_head" and
 * the embeddings are 16-bit anyway. Needs the shape (count_params's
 * inputs), so it is called once they are parsed. */
static int64_t unconverted_params(const cJSON *list, const kv_model *m)
{
    if (!cJSON_IsArray(list))
        return 0;
    double h = m->hidden_size, hd = m->head_dim > 0 ? m->head_dim : (m->num_attention_heads ? h / m->num_attention_heads : 0);
    double q = m->num_attention_heads * hd, kv = m->num_key_value_heads * hd, I = m->intermediate_size;
    static const struct { const char *suffix; int kind; } P[] = {
        {"q_proj", 0}, {"k_proj", 1}, {"v_proj", 1}, {"o_proj", 2}, {"gate_proj", 3}, {"up_proj", 3}, {"down_proj", 3},
    };
    double total = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (!cJSON_IsString(e))
            continue;
        size_t l = strlen(e->valuestring);
        for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
            size_t sl = strlen(P[i].suffix);
            if (l >= sl && !strcmp(e->valuestring + l - sl, P[i].suffix)) {
                total += P[i].kind == 0 ? h * q : P[i].kind == 1 ? h * kv : P[i].kind == 2 ? q * h : h * I;
                break;
            }
        }
    }
    return (int64_t)total;
}

/* A ModelOpt algorithm name: FP8 or NVFP4 (vLLM's modelopt / modelopt_fp4). */
static void set_modelopt(kv_model *m, const char *algo)
{
    if (!strcmp(algo, "FP8")) {
        m->quant = KV_QUANT_FP8;
        m->quant_bits = 8;
        copy_str(m->quant_method, sizeof m->quant_method, "modelopt");
    } else if (!strcmp(algo, "NVFP4")) {
        m->quant = KV_QUANT_NVFP4;
        m->quant_bits = 4;
        m->quant_group_size = 16;
        copy_str(m->quant_method, sizeof m->quant_method, "modelopt_fp4");
    } else {
        m->quant = KV_QUANT_UNKNOWN;
    }
}

static int parse_quant(const ctx *c, kv_model *m)
{
    const cJSON *q = get_last(c->root, "quantization_config");
    if (!q && c->text != c->root)
        q = get_last(c->text, "quantization_config");
    if (!q || cJSON_IsNull(q))
        return 0;
    if (!cJSON_IsObject(q))
        return kv_errf(c->err, c->errlen, -1, "%s: field \"quantization_config\" must be an object", c->path);
    const cJSON *meth = get_last(q, "quant_method");
    const char *s = cJSON_IsString(meth) ? meth->valuestring : "";
    copy_str(m->quant_method, sizeof m->quant_method, s);
    ctx qc = *c;
    qc.text = qc.root = q;
    qc.defaults = NULL;
    int64_t v;
    if (!strcmp(s, "fp8")) {
        m->quant = KV_QUANT_FP8;
        m->quant_bits = 8;
        const cJSON *b = get_last(q, "weight_block_size");
        if (cJSON_IsArray(b) && cJSON_GetArraySize(b) == 2) {
            for (int i = 0; i < 2; i++) {
                const cJSON *e = cJSON_GetArrayItem(b, i);
                if (!cJSON_IsNumber(e) || e->valuedouble < 1 || e->valuedouble > 65536)
                    return kv_errf(c->err, c->errlen, -1, "%s: field \"quantization_config.weight_block_size\" is invalid",
                                   c->path);
                m->quant_block[i] = (int32_t)e->valuedouble;
            }
        }
    } else if (!strcmp(s, "awq") || !strcmp(s, "gptq")) {
        m->quant = s[0] == 'a' ? KV_QUANT_AWQ : KV_QUANT_GPTQ;
        m->quant_bits = 4;
        m->quant_group_size = 128;
        int r = get_int(&qc, "bits", 1, 16, &v);
        if (r == 0)
            r = get_int(&qc, "w_bit", 1, 16, &v);
        if (r < 0)
            return -1;
        if (r == 1)
            m->quant_bits = (int32_t)v;
        r = get_int(&qc, "group_size", -1, 1 << 20, &v);
        if (r == 0)
            r = get_int(&qc, "q_group_size", -1, 1 << 20, &v);
        if (r < 0)
            return -1;
        if (r == 1)
            m->quant_group_size = v <= 0 ? 0 : (int32_t)v;
    } else if (!strcmp(s, "compressed-tensors")) {
        m->quant = KV_QUANT_COMPRESSED_TENSORS;
        const cJSON *groups = get_last(q, "config_groups");
        const cJSON *g = cJSON_IsObject(groups) ? groups->child : NULL;
        const cJSON *w = g ? get_last(g, "weights") : NULL;
        if (!cJSON_IsObject(w)) {
            m->quant = KV_QUANT_UNKNOWN;
            return 0;
        }
        ctx wc = *c;
        wc.text = wc.root = w;
        wc.defaults = NULL;
        if (get_int(&wc, "num_bits", 1, 16, &v) != 1) {
            m->quant = KV_QUANT_UNKNOWN;
            return 0;
        }
        m->quant_bits = (int32_t)v;
        if (get_int(&wc, "group_size", -1, 1 << 20, &v) == 1 && v > 0)
            m->quant_group_size = (int32_t)v;
        const cJSON *ty = get_last(w, "type");
        if (m->quant_bits == 4 && m->quant_group_size == 16 && cJSON_IsString(ty) && !strcmp(ty->valuestring, "float"))
            m->quant = KV_QUANT_NVFP4; /* compressed-tensors nvfp4: fp8 scales per 16 */
    } else if (!strcmp(s, "fbgemm_fp8")) {
        /* model_executor/layers/quantization/fbgemm_fp8.py: fp8 weights with a
         * per-channel scale; modules_to_not_convert stay 16-bit */
        m->quant = KV_QUANT_FP8;
        m->quant_bits = 8;
        m->quant_unconverted_params = unconverted_params(get_last(q, "modules_to_not_convert"), m);
    } else if (!strcmp(s, "modelopt")) {
        const cJSON *algo = get_last(q, "quant_algo");
        set_modelopt(m, cJSON_IsString(algo) ? algo->valuestring : "");
        copy_str(m->quant_method, sizeof m->quant_method, s);
        if (m->quant == KV_QUANT_NVFP4)
            copy_str(m->quant_method, sizeof m->quant_method, "modelopt_fp4");
        m->quant_unconverted_params = unconverted_params(get_last(q, "exclude_modules"), m);
    } else if (!strcmp(s, "mxfp4")) {
        m->quant = KV_QUANT_MXFP4;
        m->quant_bits = 4;
        m->quant_group_size = 32;
    } else if (!strcmp(s, "bitsandbytes")) {
        m->quant = KV_QUANT_BITSANDBYTES;
        int32_t b8 = 0;
        if (get_bool(&qc, "load_in_8bit", 0, &b8) < 0)
            return -1;
        m->quant_bits = b8 ? 8 : 4;
        m->quant_group_size = b8 ? 0 : 64;
        int32_t dq = 0;
        if (get_bool(&qc, "bnb_4bit_use_double_quant", 0, &dq) < 0)
            return -1;
        m->quant_double = dq;
    } else {
        m->quant = KV_QUANT_UNKNOWN;
    }
    return 0;
}

/* Parameter counts from the shape. Sums are kept in double (exact for every
 * real model, < 2^53) so hostile configs cannot overflow. */
static int count_params(const ctx *c, kv_model *m)
{
    double h = m->hidden_size, V = m->vocab_size, H = m->num_attention_heads, KV = m->num_key_value_heads;
    double hd = m->head_dim;
    double linear = 0, other = 0, expert = 0, active_linear = 0;
    int L = m->num_hidden_layers;
    const int qwen2 = !strcmp(m->model_type, "qwen2") || !strcmp(m->model_type, "qwen2_moe");
    const int gemma = !strncmp(m->model_type, "gemma", 5);
    const int gemma3 = strstr(m->model_type, "gemma3") != NULL;
    const int qwen3 = !strncmp(m->model_type, "qwen3", 5);
    const int gptoss = !strcmp(m->model_type, "gpt_oss");
    const int ds3 = !strcmp(m->model_type, "deepseek_v3");

    /* One decoder layer: attention + MLP (dense or MoE) + norms. */
    double attn = 0, attn_other = 0;
    if (m->is_mla) {
        double qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
        if (m->q_lora_rank > 0) {
            attn += h * m->q_lora_rank + (double)m->q_lora_rank * H * qk;
            attn_other += m->q_lora_rank;
        } else {
            attn += h * H * qk;
        }
        attn += h * (m->kv_lora_rank + m->qk_rope_head_dim);
        attn += (double)m->kv_lora_rank * H * (m->qk_nope_head_dim + m->v_head_dim);
        attn += H * m->v_head_dim * h;
        attn_other += m->kv_lora_rank;
    } else {
        attn = h * H * hd + 2 * h * KV * hd + H * hd * h;
        if (m->attention_bias)
            attn_other += H * hd + 2 * KV * hd + h;
        else if (qwen2)
            attn_other += H * hd + 2 * KV * hd;
        if (qwen3 || gemma3)
            attn_other += 2 * hd; /* q_norm, k_norm */
        if (gptoss)
            attn_other += H;      /* attention sinks */
    }
    double norms = (gemma ? 4 : 2) * h;
    double dense_mlp = 3 * h * m->intermediate_size;
    double e_w = m->moe_intermediate_size;
    double moe_experts = (double)m->num_experts * 3 * h * e_w;
    double moe_shared = 3 * h * ((double)m->num_shared_experts * e_w + m->shared_expert_intermediate_size);
    double moe_other = h * m->num_experts; /* router weight, counted with linear layers */
    double moe_bias = 0;
    if (gptoss)
        moe_bias = m->num_experts + (double)m->num_experts * (2 * e_w + h);
    if (ds3)
        moe_bias = m->num_experts; /* e_score_correction_bias */
    if (m->shared_expert_intermediate_size)
        moe_other += h; /* shared_expert_gate */
    double moe_active = (double)m->num_experts_per_tok * 3 * h * e_w + moe_shared + moe_other;

    double moe_layer_linear = moe_experts + moe_shared + moe_other;
    for (int i = 0; i < L; i++) {
        int is_moe = m->num_experts > 0 && i >= m->first_k_dense_replace;
        linear += attn + (is_moe ? moe_layer_linear : dense_mlp);
        active_linear += attn + (is_moe ? moe_active : dense_mlp);
        if (is_moe)
            expert += moe_experts;
        other += attn_other + norms + (is_moe ? moe_bias : 0);
    }
    other += h; /* final norm */
    double embed = V * h * (m->tie_word_embeddings ? 1 : 2);
    double total = linear + embed + other;
    /* DeepSeek MTP layers: a MoE decoder layer plus enorm, hnorm, eh_proj,
     * and its own copies of the embedding and output head. */
    double mtp = 0;
    if (m->num_nextn_predict_layers > 0)
        mtp = m->num_nextn_predict_layers *
              (attn + moe_layer_linear + attn_other + norms + moe_bias + 3 * h + 2 * h * h + 2 * V * h);
    if (total + mtp > 9.0e18)
        return kv_errf(c->err, c->errlen, -1, "%s: the shape gives more than 9e18 parameters", c->path);
    m->params_linear = (int64_t)linear;
    m->params_embedding = (int64_t)embed;
    m->params_other = (int64_t)other;
    m->params_total = (int64_t)total;
    m->params_checkpoint = (int64_t)(total + mtp);
    m->params_active = (int64_t)(active_linear + embed + other);
    m->params_expert_linear = (int64_t)expert;
    return 0;
}

/* --------------------------------------------------------------- parsing */

int kv_model_parse(const char *json, size_t len, const char *path, kv_model *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!path)
        path = "config.json";
    copy_str(out->path, sizeof out->path, path);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root)
        return kv_errf(err, errlen, KV_MODEL_EPARSE, "%s: not valid JSON", path);
    int rc = KV_MODEL_EFIELD;
    ctx c = {root, root, NULL, "", path, err, errlen};
    cJSON *defaults = NULL;
    kv_model *m = out;
    /* One JSON value: only white space may follow it (json.load refuses the rest). */
    for (const char *q = end; q && q < json + len; q++)
        if (!isspace((unsigned char)*q)) {
            kv_errf(err, errlen, KV_MODEL_EPARSE, "%s: text after the JSON object at byte %ld", path,
                    (long)(q - json));
            rc = KV_MODEL_EPARSE;
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        kv_errf(err, errlen, KV_MODEL_EPARSE, "%s: not a JSON object", path);
        rc = KV_MODEL_EPARSE;
        goto done;
    }
    if (check_str(&c, "model_type") < 0)
        goto done;
    const cJSON *rt = get_last(root, "model_type");
    c.root_type = cJSON_IsString(rt) ? rt->valuestring : "";
    const cJSON *tc = get_last(root, "text_config");
    if (tc && !cJSON_IsNull(tc) && !cJSON_IsObject(tc)) {
        kv_errf(err, errlen, rc, "%s: field \"text_config\" must be an object", path);
        goto done;
    }
    const char *text_type = c.root_type;
    if (cJSON_IsObject(tc)) {
        c.text = tc;
        if (check_str(&c, "model_type") < 0)
            goto done;
        const cJSON *tt = get_last(tc, "model_type");
        text_type = cJSON_IsString(tt) ? tt->valuestring : "";
        for (size_t i = 0; !text_type[0] && i < sizeof WRAPPERS / sizeof WRAPPERS[0]; i++)
            if (!strcmp(c.root_type, WRAPPERS[i].type))
                text_type = WRAPPERS[i].text_type;
    }
    const class_defaults *cd = find_defaults(text_type);
    if (cd) {
        defaults = defaults_object(cd);
        c.defaults = defaults;
    }
    copy_str(m->model_type, sizeof m->model_type, text_type);
    const cJSON *arch = get_last(root, "architectures");
    if (cJSON_IsArray(arch) && cJSON_IsString(cJSON_GetArrayItem(arch, 0)))
        copy_str(m->architecture, sizeof m->architecture, cJSON_GetArrayItem(arch, 0)->valuestring);

    if (need_int32(&c, "num_hidden_layers", 1, KV_MODEL_MAX_LAYERS, &m->num_hidden_layers) < 0 ||
        need_int32(&c, "hidden_size", 1, 1 << 20, &m->hidden_size) < 0 ||
        need_int32(&c, "num_attention_heads", 1, 1 << 16, &m->num_attention_heads) < 0)
        goto done;
    if (get_int32(&c, "intermediate_size", 1, 1 << 22, &m->intermediate_size) < 0)
        goto done;
    int r = get_int32(&c, "vocab_size", 1, 1 << 26, &m->vocab_size);
    if (r < 0)
        goto done;
    if (r == 0) {
        if (strstr(m->model_type, "gemma3"))
            m->vocab_size = 262208; /* Gemma3TextConfig default */
        else {
            kv_errf(err, errlen, rc, "%s: required field \"vocab_size\" is missing", path);
            goto done;
        }
    }
    /* KV heads: the first of vLLM's spellings present, else MHA. */
    static const char *kvkeys[] = {"n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"};
    m->num_key_value_heads = 0;
    for (size_t i = 0; i < 4 && !m->num_key_value_heads; i++)
        if (get_int32(&c, kvkeys[i], 1, 1 << 16, &m->num_key_value_heads) < 0)
            goto done;
    if (!m->num_key_value_heads)
        m->num_key_value_heads = m->num_attention_heads;
    if (m->num_key_value_heads > m->num_attention_heads) {
        kv_errf(err, errlen, rc, "%s: field \"num_key_value_heads\" (%d) exceeds num_attention_heads (%d)", path,
                m->num_key_value_heads, m->num_attention_heads);
        goto done;
    }
    /* Grouped-query attention shares each KV head among the same number of
     * query heads (transformers' repeat_kv, vLLM's attention layers). */
    if (m->num_attention_heads % m->num_key_value_heads) {
        kv_errf(err, errlen, rc,
                "%s: field \"num_attention_heads\" (%d) is not a multiple of num_key_value_heads (%d): each KV head "
                "must serve the same number of query heads",
                path, m->num_attention_heads, m->num_key_value_heads);
        goto done;
    }
    if ((r = get_int32(&c, "head_dim", 1, 1 << 16, &m->head_dim)) < 0)
        goto done;
    if (r == 0) {
        if (m->hidden_size % m->num_attention_heads) {
            kv_errf(err, errlen, rc, "%s: field \"hidden_size\" (%d) is not a multiple of num_attention_heads (%d) and no head_dim is given",
                    path, m->hidden_size, m->num_attention_heads);
            goto done;
        }
        m->head_dim = m->hidden_size / m->num_attention_heads;
    }
    if (get_bool(&c, "tie_word_embeddings", 1, &m->tie_word_embeddings) < 0 ||
        get_bool(&c, "attention_bias", 0, &m->attention_bias) < 0)
        goto done;
    /* dtype: the root's (vLLM's _find_dtype reads config.torch_dtype first). */
    if (check_str(&c, "torch_dtype") < 0 || check_str(&c, "dtype") < 0)
        goto done;
    const cJSON *rdt = get_last(root, "torch_dtype");
    if (!cJSON_IsString(rdt))
        rdt = get_last(root, "dtype");
    const char *dt = cJSON_IsString(rdt) ? rdt->valuestring : get_str(&c, "torch_dtype");
    if (!dt)
        dt = get_str(&c, "dtype");
    if (dt && strcmp(dt, "bfloat16") && strcmp(dt, "float16") && strcmp(dt, "float32")) {
        kv_errf(err, errlen, rc, "%s: field \"torch_dtype\" = \"%s\" is not bfloat16, float16 or float32", path, dt);
        goto done;
    }
    copy_str(m->torch_dtype, sizeof m->torch_dtype, dt ? dt : "bfloat16");
    m->dtype_bytes = dtype_bytes_of(m->torch_dtype);

    /* MoE. */
    static const char *ekeys[] = {"num_local_experts", "num_experts", "n_routed_experts"};
    for (size_t i = 0; i < 3 && !m->num_experts; i++)
        if (get_int32(&c, ekeys[i], 0, 1 << 14, &m->num_experts) < 0)
            goto done;
    if (m->num_experts > 0) {
        if (get_int32(&c, "num_experts_per_tok", 1, m->num_experts, &m->num_experts_per_tok) < 0 ||
            (!m->num_experts_per_tok &&
             get_int32(&c, "experts_per_token", 1, m->num_experts, &m->num_experts_per_tok) < 0))
            goto done;
        if (!m->num_experts_per_tok) {
            kv_errf(err, errlen, rc, "%s: required field \"num_experts_per_tok\" is missing (MoE model)", path);
            goto done;
        }
        if (get_int32(&c, "moe_intermediate_size", 1, 1 << 22, &m->moe_intermediate_size) < 0 ||
            get_int32(&c, "n_shared_experts", 0, 1 << 10, &m->num_shared_experts) < 0 ||
            get_int32(&c, "shared_expert_intermediate_size", 0, 1 << 22, &m->shared_expert_intermediate_size) < 0 ||
            get_int32(&c, "first_k_dense_replace", 0, m->num_hidden_layers, &m->first_k_dense_replace) < 0)
            goto done;
        if (!m->moe_intermediate_size)
            m->moe_intermediate_size = m->intermediate_size; /* Mixtral, gpt-oss: experts are intermediate_size wide */
        if (!m->moe_intermediate_size) {
            kv_errf(err, errlen, rc, "%s: required field \"moe_intermediate_size\" is missing (MoE model)", path);
            goto done;
        }
        m->num_moe_layers = m->num_hidden_layers - m->first_k_dense_replace;
    }
    if (!m->intermediate_size && (m->num_experts == 0 || m->first_k_dense_replace > 0)) {
        kv_errf(err, errlen, rc, "%s: required field \"intermediate_size\" is missing", path);
        goto done;
    }
    if (get_int32(&c, "num_nextn_predict_layers", 0, 64, &m->num_nextn_predict_layers) < 0)
        goto done;

    /* MLA. */
    if (get_int32(&c, "kv_lora_rank", 0, 1 << 16, &m->kv_lora_rank) < 0)
        goto done;
    if (m->kv_lora_rank > 0) {
        m->is_mla = 1;
        if (need_int32(&c, "qk_rope_head_dim", 1, 1 << 16, &m->qk_rope_head_dim) < 0 ||
            need_int32(&c, "qk_nope_head_dim", 0, 1 << 16, &m->qk_nope_head_dim) < 0 ||
            need_int32(&c, "v_head_dim", 1, 1 << 16, &m->v_head_dim) < 0 ||
            get_int32(&c, "q_lora_rank", 0, 1 << 20, &m->q_lora_rank) < 0)
            goto done;
    }

    if (derive_max_len(&c, m) < 0 || parse_sliding(&c, m) < 0 || parse_quant(&c, m) < 0 || count_params(&c, m) < 0 ||
        vision_params(&c, m) < 0)
        goto done;
    rc = KV_MODEL_OK;
done:
    cJSON_Delete(root);
    cJSON_Delete(defaults);
    return rc;
}

/* ------------------------------------------------------------- resolving */

/* vLLM's --hf-overrides on the config's JSON: each key replaces the config's,
 * an object merged into a sub-config that is one (text_config), as
 * config/model.py applies hf_overrides to the loaded config. */
static void merge_overrides(cJSON *cfg, const cJSON *ov, int depth)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, ov) {
        cJSON *old = cJSON_GetObjectItemCaseSensitive(cfg, o->string);
        if (old && cJSON_IsObject(old) && cJSON_IsObject(o) && depth < 8) {
            merge_overrides(old, o, depth + 1);
            continue;
        }
        cJSON *copy = cJSON_Duplicate(o, 1);
        if (!copy)
            continue;
        if (old)
            cJSON_ReplaceItemInObjectCaseSensitive(cfg, o->string, copy);
        else
            cJSON_AddItemToObject(cfg, o->string, copy);
    }
}

static int apply_overrides(char **txt, size_t *len, const char *file, const char *overrides, char *err, size_t errlen)
{
    if (!overrides || !*overrides)
        return 0;
    cJSON *ov = cJSON_Parse(overrides);
    if (!cJSON_IsObject(ov)) {
        cJSON_Delete(ov);
        return kv_errf(err, errlen, KV_MODEL_EPARSE, "--hf-overrides must be a JSON object ({\"key\": value}), got "
                                                    "'%.60s'", overrides);
    }
    cJSON *cfg = cJSON_ParseWithLength(*txt, *len);
    if (!cJSON_IsObject(cfg)) { /* kv_model_parse says what is wrong with the file */
        cJSON_Delete(ov);
        cJSON_Delete(cfg);
        return 0;
    }
    merge_overrides(cfg, ov, 0);
    char *merged = cJSON_PrintUnformatted(cfg);
    cJSON_Delete(ov);
    cJSON_Delete(cfg);
    if (!merged)
        return kv_errf(err, errlen, KV_MODEL_EPARSE, "%s: out of memory applying --hf-overrides", file);
    free(*txt);
    *txt = merged;
    *len = strlen(merged);
    return 0;
}

static int load_file(const char *file, const char *id, const char *overrides, kv_model *out, char *err, size_t errlen)
{
    size_t len = 0;
    char *txt = NULL;
    if (kv_read_file(file, MAX_CONFIG_BYTES, &txt, &len, err, errlen) != 0)
        return KV_MODEL_ENOTFOUND;
    if (apply_overrides(&txt, &len, file, overrides, err, errlen) != 0) {
        free(txt);
        return KV_MODEL_EPARSE;
    }
    int rc = kv_model_parse(txt, len, file, out, err, errlen);
    free(txt);
    if (rc == KV_MODEL_OK) {
        copy_str(out->id, sizeof out->id, id);
        /* vLLM's get_quant_config looks for these beside config.json when
         * --quantization awq/gptq meets a config without quantization_config */
        char dir[1024], q[1100];
        copy_str(dir, sizeof dir, file);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            copy_str(dir, sizeof dir, ".");
        static const char *const names[] = {"quantize_config.json", "quant_config.json"};
        for (int i = 0; i < 2; i++) {
            snprintf(q, sizeof q, "%s/%s", dir, names[i]);
            out->has_quantize_config |= is_file(q);
        }
        /* ModelOpt writes its quantization beside config.json
         * (transformers_utils/config.py reads hf_quant_config.json) */
        snprintf(q, sizeof q, "%s/hf_quant_config.json", dir);
        if (out->quant == KV_QUANT_NONE && is_file(q)) {
            size_t ql = 0;
            char *qt = NULL, e2[256];
            if (kv_read_file(q, MAX_CONFIG_BYTES, &qt, &ql, e2, sizeof e2) == 0) {
                cJSON *qr = cJSON_ParseWithLength(qt, ql);
                const cJSON *qq = cJSON_GetObjectItemCaseSensitive(qr, "quantization");
                const cJSON *algo = cJSON_GetObjectItemCaseSensitive(qq, "quant_algo");
                if (cJSON_IsString(algo)) {
                    set_modelopt(out, algo->valuestring);
                    if (out->quant == KV_QUANT_UNKNOWN)
                        snprintf(out->quant_method, sizeof out->quant_method, "modelopt (%.16s)", algo->valuestring);
                    out->quant_unconverted_params =
                        unconverted_params(cJSON_GetObjectItemCaseSensitive(qq, "exclude_modules"), out);
                }
                cJSON_Delete(qr);
                free(qt);
            }
        }
        /* the weights themselves, from the shard headers (never the tensors) */
        if (kv_st_scan_dir(dir, &out->disk, out->disk_error, sizeof out->disk_error) != KV_ST_EBAD)
            out->disk_error[0] = '\0';
    }
    return rc;
}

/* The HF hub cache folder: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub. */
static void hf_cache_dir(char *buf, size_t n)
{
    const char *e = getenv("HF_HUB_CACHE");
    if (e && *e) {
        snprintf(buf, n, "%s", e);
        return;
    }
    e = getenv("HF_HOME");
    if (e && *e) {
        snprintf(buf, n, "%s/hub", e);
        return;
    }
    e = getenv("XDG_CACHE_HOME");
    if (e && *e) {
        snprintf(buf, n, "%s/huggingface/hub", e);
        return;
    }
    e = getenv("HOME");
    snprintf(buf, n, "%s/.cache/huggingface/hub", e && *e ? e : ".");
}

/* models--ORG--NAME/snapshots/<refs/main or any>/config.json. Returns 1
 * found, 0 not there, -1 with err when refs/main exists but cannot be read
 * (a FIFO, a device: never waited on). */
static int find_in_hf_cache(const char *name, char *file, size_t n, char *err, size_t errlen)
{
    const char *slash = strchr(name, '/');
    if (!slash || strchr(slash + 1, '/') || strstr(name, ".."))
        return 0;
    char cache[1024], repo[1536], snap[2048];
    hf_cache_dir(cache, sizeof cache);
    snprintf(repo, sizeof repo, "%s/models--%.*s--%s", cache, (int)(slash - name), name, slash + 1);
    char ref[2048];
    snprintf(ref, sizeof ref, "%s/refs/main", repo);
    size_t len = 0;
    char *hash = NULL;
    struct stat rst;
    if (lstat(ref, &rst) == 0 && kv_read_file(ref, 4096, &hash, &len, err, errlen) != 0)
        return -1;
    if (hash) {
        hash[strcspn(hash, "\r\n")] = '\0';
        snprintf(file, n, "%s/snapshots/%s/config.json", repo, hash);
        free(hash);
        if (is_file(file))
            return 1;
    }
    snprintf(snap, sizeof snap, "%s/snapshots", repo);
    DIR *d = opendir(snap);
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        int w = snprintf(file, n, "%s/%s/config.json", snap, de->d_name);
        found = w > 0 && (size_t)w < n && is_file(file);
    }
    closedir(d);
    return found;
}

/* A name meant as a path rather than an ORG/NAME id: absolute or relative
 * (./, ../, ~), a .json file, or more than one '/'. */
static int looks_like_path(const char *name)
{
    size_t l = strlen(name);
    const char *slash = strchr(name, '/');
    return name[0] == '/' || name[0] == '.' || name[0] == '~' || (l >= 5 && !strcmp(name + l - 5, ".json")) ||
           (slash && strchr(slash + 1, '/'));
}

static void lower_copy(char *o, size_t n, const char *s)
{
    size_t j = 0;
    for (; *s && j + 1 < n; s++)
        o[j++] = (char)tolower((unsigned char)*s);
    o[j] = '\0';
}

/* Near catalogue ids for an unknown model, best first (at most 3): an id
 * holding the typed name (or held by it; 4+ letters) scores 0, else the edit
 * distance to the whole id or to its NAME part, case ignored, allowed up to
 * a quarter of the typed length (at least 2). Writes "a, b" or "". */
static void suggest_models(const char *name, const char *assets_dir, char *out, size_t n)
{
    out[0] = '\0';
    char **ids = NULL;
    int count = kv_model_catalog_list(assets_dir, &ids, NULL, 0);
    if (count <= 0)
        return;
    char q[256], t[256];
    lower_copy(q, sizeof q, name);
    size_t ql = strlen(q);
    int limit = ql / 4 > 2 ? (int)(ql / 4) : 2;
    int *score = malloc((size_t)count * sizeof *score);
    if (!score) {
        kv_model_catalog_free(ids, count);
        return;
    }
    int lo = 999;
    for (int i = 0; i < count; i++) {
        lower_copy(t, sizeof t, ids[i]);
        const char *tn = strchr(t, '/') ? strchr(t, '/') + 1 : t;
        const char *qn = strchr(q, '/') ? strchr(q, '/') + 1 : q;
        int d;
        if ((strlen(qn) >= 4 && strstr(tn, qn)) || (strlen(tn) >= 4 && strstr(qn, tn)))
            d = 0;
        else {
            d = kv_edit_distance(q, t);
            int dn = kv_edit_distance(qn, tn);
            if (dn < d)
                d = dn;
        }
        score[i] = d;
        if (d < lo)
            lo = d;
    }
    int shown = 0;
    for (int d = lo; d <= limit && d <= lo + 1 && shown < 3; d++)
        for (int i = 0; i < count && shown < 3; i++)
            if (score[i] == d) {
                size_t l = strlen(out);
                snprintf(out + l, n - l, "%s%s", shown ? ", " : "", ids[i]);
                shown++;
            }
    free(score);
    kv_model_catalog_free(ids, count);
}

int kv_model_load(const char *name, const char *assets_dir, kv_model *out, char *err, size_t errlen)
{
    return kv_model_load_overrides(name, assets_dir, NULL, out, err, errlen);
}

void kv_model_disable_sliding_window(kv_model *m)
{
    if (!m || m->sliding_window <= 0)
        return;
    if (m->sliding_window < m->max_position_embeddings) {
        m->max_position_embeddings = m->sliding_window;
        snprintf(m->max_len_key, sizeof m->max_len_key, "sliding_window");
    }
    m->sliding_window = 0;
    m->num_sliding_layers = 0;
    memset(m->layer_is_sliding, 0, sizeof m->layer_is_sliding);
}

int kv_model_load_overrides(const char *name, const char *assets_dir, const char *overrides, kv_model *out,
                            char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!name || !*name)
        return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "no model given");
    char file[2048];
    struct stat st;
    /* Anything that exists and is not a folder is read as a config.json:
     * kv_read_file refuses a FIFO or a device with its own message. */
    if (stat(name, &st) == 0 && !S_ISDIR(st.st_mode))
        return load_file(name, name, overrides, out, err, errlen);
    if (is_dir(name)) {
        snprintf(file, sizeof file, "%s/config.json", name);
        if (is_file(file))
            return load_file(file, name, overrides, out, err, errlen);
        return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "%s: folder holds no config.json", name);
    }
    if (assets_dir && !strstr(name, "..")) {
        snprintf(file, sizeof file, "%s/models/%s/config.json", assets_dir, name);
        if (is_file(file))
            return load_file(file, name, overrides, out, err, errlen);
    }
    int hf = find_in_hf_cache(name, file, sizeof file, err, errlen);
    if (hf < 0)
        return KV_MODEL_ENOTFOUND;
    if (hf)
        return load_file(file, name, overrides, out, err, errlen);
    if (looks_like_path(name))
        return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "no such file or folder: %s", name);
    char cache[1024], near[512] = "";
    hf_cache_dir(cache, sizeof cache);
    if (assets_dir)
        suggest_models(name, assets_dir, near, sizeof near);
    if (near[0])
        return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "unknown model '%s' (did you mean %s?); see kvlab models", name,
                       near);
    return kv_errf(err, errlen, KV_MODEL_ENOTFOUND,
                   "unknown model '%s': not in the catalogue (see kvlab models), not a file or folder, not in the "
                   "Hugging Face cache (%s)",
                   name, cache);
}

const char *kv_model_attention_kind(const kv_model *m)
{
    if (m->is_mla)
        return "MLA";
    if (m->num_key_value_heads == 1 && m->num_attention_heads > 1)
        return "MQA";
    if (m->num_key_value_heads == m->num_attention_heads)
        return "MHA";
    return "GQA";
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int kv_model_catalog_list(const char *assets_dir, char ***ids, char *err, size_t errlen)
{
    *ids = NULL;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", assets_dir);
    DIR *d = opendir(dir);
    if (!d)
        return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "%s: cannot open the model catalogue", dir);
    int count = 0, cap = 0;
    char **list = NULL;
    struct dirent *org;
    while ((org = readdir(d))) {
        if (org->d_name[0] == '.')
            continue;
        char odir[2048];
        snprintf(odir, sizeof odir, "%s/%s", dir, org->d_name);
        DIR *od = opendir(odir);
        if (!od)
            continue;
        struct dirent *nm;
        while ((nm = readdir(od))) {
            if (nm->d_name[0] == '.')
                continue;
            char f[4096];
            snprintf(f, sizeof f, "%s/%s/config.json", odir, nm->d_name);
            if (!is_file(f))
                continue;
            if (count == cap) {
                cap = cap ? cap * 2 : 32;
                char **nl = realloc(list, (size_t)cap * sizeof *nl);
                if (!nl)
                    break;
                list = nl;
            }
            size_t need = strlen(org->d_name) + strlen(nm->d_name) + 2;
            list[count] = malloc(need);
            if (!list[count])
                break;
            snprintf(list[count], need, "%s/%s", org->d_name, nm->d_name);
            count++;
        }
        closedir(od);
    }
    closedir(d);
    if (count)
        qsort(list, (size_t)count, sizeof *list, cmp_str);
    *ids = list;
    return count;
}

void kv_model_catalog_free(char **ids, int count)
{
    for (int i = 0; i < count; i++)
        free(ids[i]);
    free(ids);
}
