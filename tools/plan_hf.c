/*
 * plan_hf.c -- uvmrt-plan --model CONFIG.json: a Hugging Face config.json (GPT-2,
 * Llama, Mistral, Qwen2) turned into the model description (uvmrt-plan(1), MODEL
 * FILES) that one would write by hand for it, which plan_model.c then reads like a
 * file. The numbers follow tools/models/gpt2-1.5b.json, which declares uvmrt-gpt's
 * step (examples/gpt/gpt.c: its tensors, flops and memory-bound bytes): for a GPT-2
 * config of that model they are the file's, and a Llama-family config gets the same
 * step with its shapes (RMSNorm, no biases but Qwen2's q/k/v ones, grouped key-value
 * heads, a SwiGLU MLP, rotary positions, an untied classifier when the config says so).
 * uvmrt-plan(1), HUGGING FACE CONFIGS, gives every formula.
 *
 * The config is untrusted: each key used is checked for type and range, and a bad one
 * is reported with the file, the key, its value and what was expected.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "plan.h"

#define HF_MAX_LAYERS 1000
#define HF_MAX_HIDDEN 65536
#define HF_MAX_INTER (1 << 20)
#define HF_MAX_VOCAB (1 << 24)
#define HF_MAX_POS (1 << 24)
#define HF_SEQ_CAP 2048         /* the default sequence: the config's positions, at most this */
/* uvmrt-gpt's gpt_attention_rate for cuDNN's attention, its default on a GPU: the forward
 * at 0.42 of the GEMM rate, the backward at 0.30 */
#define HF_ATTENTION_RATE_FWD 0.42
#define HF_ATTENTION_RATE_BWD 0.30
/* uvmrt-gpt's classifier chunk, the logits buffer's rows (gpt_chunk_rows): powers of two
 * from 2048 while rows x hidden <= 8192 x 768 */
#define HF_CHUNK_ROWS 2048
#define HF_CHUNK_ELEMS (8192.0 * 768.0)

/* The config's value as text for a message. */
static void hf_value_text(const json_t *v, char *buf, size_t n)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, n, "%s", s ? s : "?");
    if (s && strlen(s) >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    free(s);
}

/* o[key] as an integer in lo..hi; def when absent and def >= 0; -1 after a message. */
static int hf_int(const char *path, const json_t *o, const char *key, double def, double lo, double hi, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (v == NULL && def >= 0) {
        *out = def;
        return 0;
    }
    if (v == NULL) {
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: key '%s' is missing: expected an integer from %g to %g\n",
                path, key, lo, hi);
        return -1;
    }
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(x >= lo && x <= hi) || x != floor(x)) {
        char t[80];
        hf_value_text(v, t, sizeof t);
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: '%s' is %s: expected an integer from %g to %g\n", path,
                key, t, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int hf_bool(const char *path, const json_t *o, const char *key, int def, int *out)
{
    const json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        char t[80];
        hf_value_text(v, t, sizeof t);
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: '%s' is %s: expected true or false\n", path, key, t);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* One layer entry of the model description. */
static json_t *hf_layer(const char *name, const char *desc, double params, double act, double flops, double bflops,
                        double hbm, double bhbm, double bhbm_pp)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "description", json_string(desc));
    json_object_set_new(o, "params", json_real(params));
    json_object_set_new(o, "activation_bytes_per_sample", json_real(act));
    json_object_set_new(o, "flops_per_sample", json_real(floor(flops)));
    json_object_set_new(o, "backward_flops_per_sample", json_real(floor(bflops)));
    json_object_set_new(o, "gradients_streamed", json_false());
    json_object_set_new(o, "hbm_bytes_per_sample", json_real(hbm));
    json_object_set_new(o, "backward_hbm_bytes_per_sample", json_real(bhbm));
    if (bhbm_pp > 0) json_object_set_new(o, "backward_hbm_bytes_per_param", json_real(bhbm_pp));
    return o;
}

json_t *hf_model_json(const char *path, const json_t *cfg, uint64_t seq, char *note, size_t note_n)
{
    const json_t *mt = json_object_get(cfg, "model_type");
    const char *type = json_string_value(mt);
    int gpt2 = type && strcmp(type, "gpt2") == 0, qwen2 = type && strcmp(type, "qwen2") == 0;
    int llama = type && (strcmp(type, "llama") == 0 || strcmp(type, "mistral") == 0 || qwen2);
    if (!gpt2 && !llama) {
        char t[80];
        hf_value_text(mt, t, sizeof t);
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: 'model_type' is %s: expected \"gpt2\", \"llama\", "
                        "\"mistral\" or \"qwen2\" (or a uvmrt model description, uvmrt-plan(1))\n",
                path, t);
        return NULL;
    }
    /* the config's keys; Llama's num_key_value_heads defaults to the heads, as in transformers */
    const char *k_layers = gpt2 ? "n_layer" : "num_hidden_layers", *k_hidden = gpt2 ? "n_embd" : "hidden_size",
               *k_heads = gpt2 ? "n_head" : "num_attention_heads",
               *k_pos = gpt2 ? "n_positions" : "max_position_embeddings";
    double L, C, NH, KVH, I, V, P;
    int tied;
    if (hf_int(path, cfg, k_layers, -1, 1, HF_MAX_LAYERS, &L) || hf_int(path, cfg, k_hidden, -1, 1, HF_MAX_HIDDEN, &C) ||
        hf_int(path, cfg, k_heads, -1, 1, C, &NH) || hf_int(path, cfg, "vocab_size", -1, 1, HF_MAX_VOCAB, &V) ||
        hf_int(path, cfg, k_pos, -1, 1, HF_MAX_POS, &P) ||
        hf_bool(path, cfg, "tie_word_embeddings", gpt2 ? 1 : 0, &tied))
        return NULL;
    if (gpt2) {
        KVH = NH;
        /* n_inner: null or absent means 4 x n_embd */
        const json_t *ni = json_object_get(cfg, "n_inner");
        if (ni != NULL && !json_is_null(ni)) {
            if (hf_int(path, cfg, "n_inner", -1, 1, HF_MAX_INTER, &I)) return NULL;
        } else I = 4 * C;
    } else if (hf_int(path, cfg, "num_key_value_heads", NH, 1, NH, &KVH) ||
               hf_int(path, cfg, "intermediate_size", -1, 1, HF_MAX_INTER, &I))
        return NULL;
    if (fmod(C, NH) != 0) {
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: '%s' is %g: expected a multiple of %s (%g)\n", path,
                k_hidden, C, k_heads, NH);
        return NULL;
    }
    if (fmod(NH, KVH) != 0) {
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: 'num_key_value_heads' is %g: expected a divisor of "
                        "%s (%g)\n",
                path, KVH, k_heads, NH);
        return NULL;
    }
    const json_t *hdv = json_object_get(cfg, "head_dim");
    if (hdv != NULL && !json_is_null(hdv) && !(json_is_number(hdv) && json_number_value(hdv) == C / NH)) {
        char t[80];
        hf_value_text(hdv, t, sizeof t);
        fprintf(stderr, "uvmrt-plan: %s: Hugging Face config: 'head_dim' is %s: expected %s / %s (%g)\n", path, t,
                k_hidden, k_heads, C / NH);
        return NULL;
    }
    int seq_default = seq == 0;
    if (seq_default) seq = (uint64_t)(P < HF_SEQ_CAP ? P : HF_SEQ_CAP);
    if ((double)seq > P) {
        fprintf(stderr, "uvmrt-plan: --seq %llu: expected at most the config's %s (%g)\n", (unsigned long long)seq,
                k_pos, P);
        return NULL;
    }
    double T = (double)seq, hd = C / NH, KV = KVH * hd, Q = C + 2 * KV; /* q, k and v widths together */
    double Vp = ceil(V / 128) * 128;                                      /* uvmrt-gpt pads the vocabulary to 128 */
    double ln = gpt2 ? 2 : 1; /* a norm's parameters per channel: LayerNorm's weight and bias, RMSNorm's weight */
    double stats = gpt2 ? 8 : 4; /* its saved statistics, bytes per token: mean and rstd, or rstd */
    double bias = gpt2, qkv_bias = gpt2 || qwen2; /* GPT-2 has every bias, Qwen2 the q, k and v ones */
    /* parameters: the embedding, a block, the head */
    double p_embed = Vp * C + (gpt2 ? P * C : 0);
    double mm = C * Q + C * C + (gpt2 ? 2 : 3) * C * I; /* matmul weights: qkv, projection, MLP */
    double p_block = mm + 2 * ln * C + qkv_bias * Q + bias * (C + I + C);
    double p_head = ln * C + (tied ? 0 : Vp * C);
    /* saved activations per sample: norm1, its stats, q/k/v, attention out, lse, res2, norm2, its stats, MLP */
    double mlp_saved = gpt2 ? 2 * 2 * T * I : 3 * 2 * T * I; /* fc and gelu; gate, up and silu(gate)*up */
    double saved = 2 * T * C + stats * T + 2 * T * Q + 2 * T * C + 4 * NH * T + 4 * T * C + 2 * T * C + stats * T +
                   mlp_saved;
    double out = 4 * T * C; /* the residual stream, fp32 */
    /* backward scratch: dres, dbf, the MLP's gradient, dln, dqkv, delta */
    double ws = 4 * T * C + 2 * T * C + (gpt2 ? 2 : 4) * T * I + 2 * T * C + 2 * T * Q + 4 * NH * T;
    double attn = 2 * T * T * C;
    double f_block = 2 * T * mm + attn / HF_ATTENTION_RATE_FWD, b_block = 4 * T * mm + 2.5 * attn / HF_ATTENTION_RATE_BWD;
    /* memory-bound kernels' bytes per sample (uvmrt-gpt's block_forward_bytes, backward; the
     * biases, GPT-2's GELU and the residuals in the matmuls' epilogues): the LayerNorms 6 C
     * each, attention 2 Q + 2 C, the residuals' fp32 reads 4 C each, the MLP's pre-GELU
     * values 2 I (GPT-2; Llama's gate and up 6 I); backward: to bf16 12 C, the fp32 bias
     * sums 8 C, the MLP 4 I (GPT-2's GELU derivative's read and its bias sum; Llama 10 I),
     * the LayerNorms 40 C, attention 4 Q + 8 C, the qkv bias sum 2 Q */
    double h_block = T * (6 * C + 2 * Q + 2 * C + 4 * C + 6 * C + (gpt2 ? 2 * I : 6 * I) + 4 * C);
    double hb_block = T * (12 * C + bias * 8 * C + (gpt2 ? 2 * I + 2 * I : 10 * I) + 40 * C + 4 * Q + 8 * C +
                           qkv_bias * 2 * Q);
    char d[1024];
    json_t *layers = json_array();
    snprintf(d, sizeof d,
             "built from %s: the token embedding (%g x %g, the vocabulary padded to 128)%s; output: the residual "
             "stream, fp32",
             path, Vp, C, gpt2 ? " and the position embedding" : "");
    json_t *e = hf_layer("embed", d, p_embed, out, 0, 0, 8 * T * C, 8 * T * C, 4);
    json_array_append_new(layers, e);
    snprintf(d, sizeof d, "a %s block of %s's shapes: hidden %g, %g heads (%g key-value), MLP %g",
             gpt2 ? "GPT-2" : "Llama", path, C, NH, KVH, I);
    json_t *b = hf_layer("block", d, p_block, saved + out, f_block, b_block, h_block, hb_block, 4);
    json_object_set_new(b, "repeat", json_integer((json_int_t)L));
    json_object_set_new(b, "output_bytes_per_sample", json_real(out));
    json_object_set_new(b, "workspace_bytes_per_sample", json_real(ws));
    json_object_set_new(b, "workspace_readwrite", json_true());
    json_object_set_new(b, "activations_streamed", json_false());
    json_object_set_new(b, "recompute", json_false());
    json_array_append_new(layers, b);
    snprintf(d, sizeof d, "final norm, %s classifier and loss; its forward also computes the classifier's backward",
             tied ? "tied" : "untied");
    json_t *h = hf_layer("head", d, p_head, 2 * T * C + stats * T + 4 * T, 6 * T * C * Vp, 0,
                         6 * T * C + 4 * T * Vp, 20 * T * C, tied ? 0 : 4);
    if (tied) json_object_set_new(h, "tied_to", json_string("embed"));
    double chunk = HF_CHUNK_ROWS;
    while (chunk * 2 * C <= HF_CHUNK_ELEMS) chunk *= 2;
    json_object_set_new(h, "forward_workspace_bytes", json_real(chunk * Vp * 2));
    json_array_append_new(layers, h);
    char name[120];
    const char *nm = json_string_value(json_object_get(cfg, "_name_or_path"));
    if (nm != NULL && nm[0] != '\0' && strlen(nm) <= 100) snprintf(name, sizeof name, "%s", nm);
    else snprintf(name, sizeof name, "%s-%gx%g", type, L, C);
    json_t *m = json_object();
    json_object_set_new(m, "format", json_string("uvmrt-model"));
    json_object_set_new(m, "name", json_string(name));
    json_object_set_new(m, "batch", json_integer(1));
    json_object_set_new(m, "input_bytes_per_sample", json_real(20 * T));
    json_object_set_new(m, "tokens_per_sample", json_integer((json_int_t)T));
    json_object_set_new(m, "layers", layers);
    if (!seq_default) snprintf(note, note_n, "Hugging Face config (%s), seq %llu (--seq)", type, (unsigned long long)seq);
    else snprintf(note, note_n, "Hugging Face config (%s), seq %llu (the default: the config's %s %g%s)", type,
                  (unsigned long long)seq, k_pos, P, P > HF_SEQ_CAP ? ", capped at 2048" : "");
    return m;
}
