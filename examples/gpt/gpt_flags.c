/*
 * gpt_flags.c -- uvmrt-gpt's options (see gpt_flags.h and uvmrt-gpt(1)): the flags
 * shared by the example programs through examples/common's table, and the trainer's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_flags.h"

enum { F_DEPTH, F_LAYERS, F_CHANNELS, F_HEADS, F_VOCAB, F_BATCH, F_SEQ, F_RECOMPUTE, F_LR,
       F_WARMUP, F_TOKENS, F_OPTIMIZER_ON, F_INIT_WEIGHTS, F_DUMP_WEIGHTS, F_DUMP_GRADS,
       F_DATA, F_VAL, F_TEXT, F_VAL_EVERY, F_VAL_BATCHES, F_CHECKPOINT, F_CHECKPOINT_EVERY,
       F_KEEP, F_RESUME, F_OVERWRITE_CKPT, F_STOP_AT, F_SAMPLE, F_SAMPLE_EVERY, F_TOP_K,
       F_PROMPT, F_CPU_LAYERS, F_SPILL, F_PAGE_LOCKED, F_ATTENTION };

static const cli_flag_t GPT_FLAGS[] = {
    {"depth", "12|24|36|48|60", "GPT-2 preset: 768/1024/1280/1600/1920 channels, head\n"
                                "size 64 (default 12)", F_DEPTH},
    {"layers", "L", "blocks (overrides the preset)", F_LAYERS},
    {"channels", "C", "channels, a multiple of 8 (overrides the preset)", F_CHANNELS},
    {"heads", "H", "attention heads (default C / 64; the GPU kernels need\nC / H = 64)", F_HEADS},
    {"vocab", "V", "vocabulary (default 50257, 256 with --text; padded to a\nmultiple of 128)",
     F_VOCAB},
    {"batch", "B", "sequences per step (default 8)", F_BATCH},
    {"seq", "T", "tokens per sequence (default 1024)", F_SEQ},
    {"recompute", "none|all|N|auto", "the first N blocks keep only their output and\n"
                                     "recompute in their backward (none = 0, all = every\n"
                                     "block); auto (default): uvmrt chooses 0, L/2 or L by\n"
                                     "its predicted step time", F_RECOMPUTE},
    {"lr", "LR", "peak AdamW learning rate (default 3e-4)", F_LR},
    {"warmup", "N", "linear warmup steps (default 0), then a cosine down to\nlr/10 at --steps",
     F_WARMUP},
    {"optimizer-on", "gpu|cpu", "where AdamW runs: gpu = --cpu-layers 0, cpu = every\n"
                                "layer (--cpu-layers L+2)", F_OPTIMIZER_ON},
    {"cpu-layers", "K|auto", "AdamW of the top K of the L+2 layers (the head, then the\n"
                             "top blocks) on the CPU, the rest on the GPU; auto\n"
                             "(default): uvmrt chooses K in steps of (L+2)/8 by its\n"
                             "predicted step time", F_CPU_LAYERS},
    {"spill", "auto|moments|state", "with a disk tier (--spill-dir): what of the CPU\n"
                                    "layers' state lives there: auto (default: per layer,\n"
                                    "the least the host budget needs, moments first, none\n"
                                    "when it holds everything), moments (every CPU layer's\n"
                                    "AdamW m and v) or state (also their fp32 master\n"
                                    "weights and gradients)", F_SPILL},
    {"page-locked", "on|off", "the CPU layers' state (off the disk tier) in page-locked\n"
                              "memory (on, default: the GPU reaches it by DMA) or in\n"
                              "managed memory placed on the host (off: no pinning at\n"
                              "the start)", F_PAGE_LOCKED},
    {"attention", "auto|cudnn|mma", "the attention kernels: cudnn = cuDNN's fused flash\n"
                                    "attention (a build with cuDNN and cudnn-frontend, and\n"
                                    "libcudnn.so.9 at run time), mma = the trainer's own;\n"
                                    "auto (default): cudnn where it can run, else mma", F_ATTENTION},
    {"tokens", "random|cycle", "synthetic tokens when neither --data nor --text is given:\n"
                               "uniformly random (default, the benchmark's), or a repeated\n"
                               "random block the model can learn", F_TOKENS},
    {"data", "PATTERN", "train on llm.c token shards (a glob; shuffled per epoch;\n"
                        "every token must be < --vocab)", F_DATA},
    {"val", "PATTERN", "validation shards for --data", F_VAL},
    {"text", "FILE", "train on a file's bytes (vocab 256): the first 90% trains,\n"
                     "the last 10% validates", F_TEXT},
    {"val-every", "N", "validation loss every N steps (default 0: after the last\nstep only)",
     F_VAL_EVERY},
    {"val-batches", "K", "batches per validation pass (default 8; at most the\n"
                         "validation data's)", F_VAL_BATCHES},
    {"checkpoint", "DIR", "write checkpoints to DIR (model, optimizer, data position,\n"
                          "RNG; atomic) after the last step, and on SIGTERM or ^C\n"
                          "after the step under way (then stop)", F_CHECKPOINT},
    {"checkpoint-every", "N", "also every N steps", F_CHECKPOINT_EVERY},
    {"keep", "K", "keep this run's newest K checkpoints (default 3; 0: all);\n"
                  "other runs' files are never removed", F_KEEP},
    {"resume", NULL, "continue from DIR's newest valid checkpoint (an empty or\n"
                     "missing DIR: start at step 1; checkpoints but none usable:\n"
                     "exit 1); --steps stays the run's total", F_RESUME},
    {"overwrite-checkpoints", NULL, "let this run replace checkpoints in DIR it did not\n"
                                    "write: without --resume, DIR's are removed after\n"
                                    "its first save (without it, such a DIR is refused)",
     F_OVERWRITE_CKPT},
    {"stop-at", "STEP", "end after step STEP (the LR schedule still spans --steps)",
     F_STOP_AT},
    {"sample", "N", "generate N tokens after training (on sim: when the CPU\nreference computes)", F_SAMPLE},
    {"sample-every", "K", "also every K steps", F_SAMPLE_EVERY},
    {"top-k", "K", "sample among the K most likely tokens (default 0: greedy)", F_TOP_K},
    {"prompt", "TEXT", "the start of the samples with --text (default: the first\n"
                       "bytes of the validation data)", F_PROMPT},
    {"init-weights", "FILE", "load weights (the --dump-weights format)", F_INIT_WEIGHTS},
    {"dump-weights", "FILE", "write the initial weights (llm.c order, float32)",
     F_DUMP_WEIGHTS},
    {"dump-grads", "FILE", "write step 1's gradients (before clipping and update)",
     F_DUMP_GRADS},
};

/* What the flags said, before the rules that combine them. */
typedef struct gpt_flag_state {
    gpt_options_t *opt;
    int layers, channels, heads;  /* 0: not given */
    int vocab_given, tokens_given, every_given, sample_every_given, val_given, keep_given;
    int optimizer_on;             /* -1: not given; 0 gpu; 1 cpu */
    const char *cpu_layers;       /* --cpu-layers as given; NULL: not given */
    const char *recompute;        /* --recompute as given; NULL: not given */
} gpt_flag_state_t;

static double parse_double(const char *flag, const char *text, double lo, double hi) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v) || v < lo || v > hi)
        cli_usage_error("%s '%s': expected a number in [%g, %g]", flag, text, lo, hi);
    return v;
}

static int parse_choice(const char *flag, const char *text, const char *a, const char *b) {
    const char *names[] = {a, b};
    return cli_parse_choice(flag, text, names, 2);
}

/* A file to read: not empty (existence is checked when it is opened). */
static const char *parse_input(const char *flag, const char *text) {
    if (text[0] == '\0')
        cli_usage_error("%s '': expected a file name", flag);
    return text;
}

static void gpt_flag(int key, const char *arg, void *user) {
    gpt_flag_state_t *st = user;
    gpt_options_t *opt = st->opt;
    switch (key) {
    case F_DEPTH:
        opt->depth = (int)cli_parse_int("--depth", arg, 12, 60);
        if (opt->depth % 12)
            cli_usage_error("--depth '%s': expected 12, 24, 36, 48 or 60", arg);
        break;
    case F_LAYERS: st->layers = (int)cli_parse_int("--layers", arg, 1, GPT_MAX_LAYERS); break;
    case F_CHANNELS:
        st->channels = (int)cli_parse_int("--channels", arg, 8, 1 << 16);
        if (st->channels % 8)
            cli_usage_error("--channels '%s': expected a multiple of 8", arg);
        break;
    case F_HEADS: st->heads = (int)cli_parse_int("--heads", arg, 1, 1024); break;
    case F_VOCAB:
        opt->vocab = (int)cli_parse_int("--vocab", arg, 2, 1 << 24);
        st->vocab_given = 1;
        break;
    case F_BATCH: opt->batch = (int)cli_parse_int("--batch", arg, 1, 1 << 16); break;
    case F_SEQ: opt->seq = (int)cli_parse_int("--seq", arg, 1, 1 << 20); break;
    case F_RECOMPUTE:
        if (arg[0] == '\0')
            cli_usage_error("--recompute '': expected none, all, a number of blocks or auto");
        st->recompute = arg;
        break;
    case F_CPU_LAYERS:
        if (arg[0] == '\0')
            cli_usage_error("--cpu-layers '': expected a number of layers or auto");
        st->cpu_layers = arg;
        break;
    case F_ATTENTION: {
        static const char *const names[] = {"auto", "cudnn", "mma"};
        static const gpt_attn_kind_t values[] = {GPT_ATTN_AUTO, GPT_ATTN_CUDNN, GPT_ATTN_MMA};
        opt->attention = values[cli_parse_choice("--attention", arg, names, 3)];
        break;
    }
    case F_PAGE_LOCKED: opt->no_page_lock = parse_choice("--page-locked", arg, "on", "off"); break;
    case F_SPILL: {
        static const char *const names[] = {"auto", "moments", "state"};
        static const gpt_spill_t values[] = {GPT_SPILL_AUTO, GPT_SPILL_MOMENTS, GPT_SPILL_STATE};
        opt->spill = values[cli_parse_choice("--spill", arg, names, 3)];
        break;
    }
    case F_LR: opt->lr = parse_double("--lr", arg, 1e-12, 10.0); break;
    case F_WARMUP: opt->warmup = (int)cli_parse_int("--warmup", arg, 0, 10000000); break;
    case F_OPTIMIZER_ON:
        st->optimizer_on = parse_choice("--optimizer-on", arg, "gpu", "cpu");
        break;
    case F_TOKENS:
        opt->source = parse_choice("--tokens", arg, "random", "cycle") ? GPT_SRC_CYCLE
                                                                        : GPT_SRC_RANDOM;
        st->tokens_given = 1;
        break;
    case F_DATA: opt->data_pattern = parse_input("--data", arg); break;
    case F_VAL: opt->val_pattern = parse_input("--val", arg); break;
    case F_TEXT: opt->text_path = parse_input("--text", arg); break;
    case F_VAL_EVERY:
        opt->val_every = (int)cli_parse_int("--val-every", arg, 0, 10000000);
        st->val_given = 1;
        break;
    case F_VAL_BATCHES:
        opt->val_batches = (int)cli_parse_int("--val-batches", arg, 1, 1000000);
        st->val_given = 1;
        break;
    case F_CHECKPOINT: opt->ckpt_dir = parse_input("--checkpoint", arg); break;
    case F_CHECKPOINT_EVERY:
        opt->ckpt_every = (int)cli_parse_int("--checkpoint-every", arg, 1, 10000000);
        st->every_given = 1;
        break;
    case F_KEEP:
        opt->keep = (int)cli_parse_int("--keep", arg, 0, 1000000);
        st->keep_given = 1;
        break;
    case F_RESUME: opt->resume = 1; break;
    case F_OVERWRITE_CKPT: opt->ckpt_overwrite = 1; break;
    case F_STOP_AT: opt->stop_at = (int)cli_parse_int("--stop-at", arg, 1, 10000000); break;
    case F_SAMPLE: opt->sample = (int)cli_parse_int("--sample", arg, 1, 1000000); break;
    case F_SAMPLE_EVERY:
        opt->sample_every = (int)cli_parse_int("--sample-every", arg, 1, 10000000);
        st->sample_every_given = 1;
        break;
    case F_TOP_K: opt->top_k = (int)cli_parse_int("--top-k", arg, 0, 1 << 24); break;
    case F_PROMPT: opt->prompt = arg; break;
    case F_INIT_WEIGHTS: opt->init_weights = parse_input("--init-weights", arg); break;
    case F_DUMP_WEIGHTS: opt->dump_weights = cli_parse_path("--dump-weights", arg); break;
    case F_DUMP_GRADS: opt->dump_grads = cli_parse_path("--dump-grads", arg); break;
    }
}

/* A count in [0, max] or auto (GPT_AUTO); usage error naming the flag otherwise. */
static int parse_count_or_auto(const char *flag, const char *text, int max, const char *what) {
    if (strcmp(text, "auto") == 0)
        return GPT_AUTO;
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || text[0] == '+' || text[0] == ' ')
        cli_usage_error("%s '%s': expected %s or auto", flag, text, what);
    if (v < 0 || v > max)
        cli_usage_error("%s '%s': expected %s in 0..%d or auto", flag, text, what, max);
    return (int)v;
}

/* Where AdamW runs and which blocks recompute, once the shape is known:
 * --optimizer-on gpu|cpu is --cpu-layers 0|L+2, an explicit K that contradicts it is
 * a usage error naming both. */
static void placement_check(gpt_options_t *opt, const gpt_flag_state_t *st) {
    int nl = opt->layers + 2;
    if (st->recompute == NULL || strcmp(st->recompute, "auto") == 0)
        opt->recompute = GPT_AUTO;
    else if (strcmp(st->recompute, "none") == 0)
        opt->recompute = 0;
    else if (strcmp(st->recompute, "all") == 0)
        opt->recompute = opt->layers;
    else
        opt->recompute = parse_count_or_auto("--recompute", st->recompute, opt->layers,
                                             "none, all, a number of blocks");
    int k = st->cpu_layers ? parse_count_or_auto("--cpu-layers", st->cpu_layers, nl,
                                                 "a number of layers (embedding, blocks, head)")
                           : GPT_AUTO;
    if (st->optimizer_on == 0 && k != GPT_AUTO && k != 0)
        cli_usage_error("--cpu-layers %d with --optimizer-on gpu: gpu runs every layer's AdamW "
                        "on the GPU (--cpu-layers 0); drop one of the two", k);
    if (st->optimizer_on == 1 && k != GPT_AUTO && k != nl)
        cli_usage_error("--cpu-layers %d with --optimizer-on cpu: cpu runs every layer's AdamW "
                        "on the CPU (--cpu-layers %d); drop one of the two", k, nl);
    if (st->optimizer_on == 0 && st->cpu_layers && k == GPT_AUTO)
        cli_usage_error("--cpu-layers auto with --optimizer-on gpu: gpu fixes --cpu-layers 0; "
                        "drop one of the two");
    if (st->optimizer_on == 1 && st->cpu_layers && k == GPT_AUTO)
        cli_usage_error("--cpu-layers auto with --optimizer-on cpu: cpu fixes --cpu-layers %d; "
                        "drop one of the two", nl);
    opt->cpu_layers = st->optimizer_on == 0 ? 0 : st->optimizer_on == 1 ? nl : k;
}

/* The rules that combine flags: data sources, validation, checkpoints, sampling. */
static void options_check(gpt_options_t *opt, const gpt_flag_state_t *st) {
    if (opt->data_pattern && opt->text_path)
        cli_usage_error("--data and --text: expected one source of training data");
    if (st->tokens_given && (opt->data_pattern || opt->text_path))
        cli_usage_error("--tokens with --%s: --tokens chooses synthetic data; drop one",
                        opt->data_pattern ? "data" : "text");
    if (opt->val_pattern && !opt->data_pattern)
        cli_usage_error("--val '%s' without --data: %s", opt->val_pattern,
                        opt->text_path ? "--text validates on the file's last 10%"
                                       : "validation shards go with --data shards");
    if (st->val_given && !opt->val_pattern && !opt->text_path)
        cli_usage_error("--val-every/--val-batches without validation data: give --text, or "
                        "--data with --val");
    if (opt->data_pattern)
        opt->source = GPT_SRC_DATA;
    if (opt->text_path) {
        opt->source = GPT_SRC_TEXT;
        if (st->vocab_given && opt->vocab != 256)
            cli_usage_error("--vocab %d with --text: byte-level text has vocab 256", opt->vocab);
        opt->vocab = 256;
    }
    if (opt->prompt && !opt->text_path)
        cli_usage_error("--prompt needs --text (a byte-level model); with token data the "
                        "prompt is the first tokens of the validation data");
    if (opt->prompt && opt->prompt[0] == '\0')
        cli_usage_error("--prompt '': expected at least one byte");
    if ((st->sample_every_given || opt->top_k || opt->prompt) && opt->sample == 0)
        cli_usage_error("--%s without --sample N: say how many tokens to generate",
                        st->sample_every_given ? "sample-every" : opt->top_k ? "top-k" : "prompt");
    if (opt->top_k > opt->vocab)
        cli_usage_error("--top-k %d: expected at most --vocab (%d)", opt->top_k, opt->vocab);
    if ((st->every_given || opt->resume || st->keep_given || opt->ckpt_overwrite) &&
        !opt->ckpt_dir)
        cli_usage_error("--%s without --checkpoint DIR: say where checkpoints live",
                        opt->resume ? "resume" : st->every_given ? "checkpoint-every"
                        : st->keep_given ? "keep" : "overwrite-checkpoints");
    if (opt->stop_at > opt->c.steps)
        cli_usage_error("--stop-at %d: expected at most --steps (%d)", opt->stop_at,
                        opt->c.steps);
    if (opt->stop_at == 0)
        opt->stop_at = opt->c.steps;
}

void gpt_options_parse(int argc, char **argv, gpt_options_t *opt) {
    *opt = (gpt_options_t){
        .c = {.backend = UVMRT_BACKEND_CUDA, .policy = UVMRT_POLICY_PREFETCH, .steps = 10,
              .seed = 1, .log_level = -1},
        .depth = 12, .vocab = 50257, .batch = 8, .seq = 1024, .lr = 3e-4, .spill = GPT_SPILL_AUTO,
        .lr_final_frac = 0.1, .grad_clip = 1.0, .val_batches = 8, .keep = 3,
    };
    gpt_flag_state_t st = {.opt = opt, .optimizer_on = -1};
    cli_spec_t spec = {
        .summary = "Train a GPT-2 model on uvmrt, on llm.c token shards, a text file or\n"
                   "synthetic tokens, with parameters, optimizer state and activations that\n"
                   "may exceed the GPU's memory.",
        .common = CLI_F_BACKEND | CLI_F_PROFILE | CLI_F_POLICY | CLI_F_BUDGET | CLI_F_STEPS |
                  CLI_F_SEED | CLI_F_REPORT | CLI_F_TRACE | CLI_F_LOSS_LOG | CLI_F_RESULT_JSON |
                  CLI_F_LOG_LEVEL | CLI_F_QUIET | CLI_F_HOST_BUDGET | CLI_F_SPILL_DIR,
        .common_help = {
            [0] = "backend (default cuda; without a usable GPU: sim, profile\n"
                  CLI_SIM_PROFILE ", unless --backend was given)",
            [3] = "device bytes uvmrt may keep resident (default auto; not\n"
                  "applied to policy none)",
            [4] = "training steps of the run (default 10); step 1 records the\n"
                  "schedule",
            [5] = "seed of the weights, the synthetic tokens, the shard order\n"
                  "and the sampling, decimal (default 1)",
            [8] = "one line per training step: step, loss (%a, exact)",
            [9] = "medians and totals of the run as JSON, for benchmark tables",
        },
        .steps_min = 1, .steps_max = 10000000,
        .flags = GPT_FLAGS, .n_flags = sizeof GPT_FLAGS / sizeof GPT_FLAGS[0],
        .flag = gpt_flag, .user = &st,
        .epilog = "Exit status: 0 success; 1 runtime error (a bad data file or checkpoint, a\n"
                  "non-finite loss, an output that could not be written); 2 bad usage;\n"
                  "128 + the signal after a SIGTERM or ^C stop with --checkpoint.\n",
    };
    cli_parse(argc, argv, &spec, &opt->c);

    static const int preset_channels[] = {768, 1024, 1280, 1600, 1920};
    opt->layers = st.layers ? st.layers : opt->depth;
    opt->channels = st.channels ? st.channels : preset_channels[opt->depth / 12 - 1];
    opt->heads = st.heads ? st.heads : opt->channels / 64;
    if (st.layers || st.channels || st.heads)
        opt->depth = 0;
    if (opt->heads < 1 || opt->channels % opt->heads)
        cli_usage_error("--channels %d is not a multiple of --heads %d", opt->channels,
                        opt->heads);
    if ((long long)opt->batch * opt->seq > (1ll << 24))
        cli_usage_error("--batch %d x --seq %d: expected at most 16777216 tokens per step",
                        opt->batch, opt->seq);
    options_check(opt, &st);
    placement_check(opt, &st);
    opt->padded_vocab = (opt->vocab + 127) / 128 * 128;
    opt->max_seq = opt->seq > 1024 ? opt->seq : 1024;
}
