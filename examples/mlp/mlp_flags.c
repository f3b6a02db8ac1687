/*
 * mlp_flags.c -- uvmrt-mlp's command line: the flags shared by the example programs
 * (examples/common/cli.h) and the trainer's own.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

enum { F_LAYERS, F_HIDDEN, F_ROWS, F_LR, F_PRECISION, F_OPTIMIZER_ON, F_CPU_LAYERS, F_RECOMPUTE };

static const cli_flag_t MLP_FLAGS[] = {
    {"layers", "L", "blocks (default 24)", F_LAYERS},
    {"hidden", "H", "width, a multiple of 8 (default 8192)", F_HIDDEN},
    {"rows", "N", "rows per step, a multiple of 8 (default 8192)", F_ROWS},
    {"lr", "LR", "AdamW learning rate (default 1e-4)", F_LR},
    {"precision", "bf16|fp16", "working precision (default bf16; fp16 scales the loss)", F_PRECISION},
    {"optimizer-on", "gpu|cpu", "where AdamW runs: gpu = --cpu-layers 0, cpu = every block\n"
                                "(or the top K with --cpu-layers K); default: --cpu-layers auto",
     F_OPTIMIZER_ON},
    {"cpu-layers", "K|auto", "AdamW of the top K blocks on the CPU, the rest on the GPU\n"
                             "(0..L); auto (the default): the K in {0, L/8, ..., L} with the\n"
                             "least predicted step time (uvmrt_choose)", F_CPU_LAYERS},
    {"recompute", "none|all|N|auto", "blocks 0..N-1 keep only their input and recompute their\n"
                                     "pre-activation in backward (none = 0, all = L); auto (the\n"
                                     "default): the runtime chooses which, from 0, L/8, ..., L\n"
                                     "of them, by predicted step time; the losses are the same\n"
                                     "for every N", F_RECOMPUTE},
};

/* What the flags said, before the rules that combine them. */
typedef struct mlp_flag_state {
    mlp_options_t *opt;
    int optimizer_on;      /* -1: not given; 0: gpu; 1: cpu */
    int cpu_layers;        /* -2: not given; MLP_AUTO: auto */
    const char *cpu_text;  /* as given, for messages */
    long long recompute;   /* -2: not given (auto); MLP_AUTO: auto; -3: all; else N */
    const char *recompute_text;
} mlp_flag_state_t;

enum { NOT_GIVEN = -2, RC_ALL = -3 };

static void mlp_flag(int key, const char *arg, void *user) {
    mlp_flag_state_t *st = user;
    mlp_options_t *opt = st->opt;
    switch (key) {
    case F_LAYERS: opt->layers = (int)cli_parse_int("--layers", arg, 1, 4096); break;
    case F_HIDDEN:
        opt->hidden = (int)cli_parse_int("--hidden", arg, 8, 1 << 17);
        if (opt->hidden % 8)
            cli_usage_error("--hidden '%s': expected a multiple of 8", arg);
        break;
    case F_ROWS:
        opt->rows = (int)cli_parse_int("--rows", arg, 8, 1 << 24);
        if (opt->rows % 8)
            cli_usage_error("--rows '%s': expected a multiple of 8", arg);
        break;
    case F_LR: {
        char *end = NULL;
        errno = 0;
        opt->lr = strtod(arg, &end);
        if (errno || end == arg || *end != '\0' || !(opt->lr > 0.0) || !isfinite(opt->lr))
            cli_usage_error("--lr '%s': expected a positive number such as 1e-4", arg);
        break;
    }
    case F_PRECISION: {
        static const char *const names[] = {"bf16", "fp16"};
        opt->precision = cli_parse_choice("--precision", arg, names, 2) == 0 ? MLP_BF16 : MLP_FP16;
        break;
    }
    case F_OPTIMIZER_ON: {
        static const char *const names[] = {"gpu", "cpu"};
        st->optimizer_on = cli_parse_choice("--optimizer-on", arg, names, 2);
        break;
    }
    case F_CPU_LAYERS:
        st->cpu_text = arg;
        if (strcmp(arg, "auto") == 0)
            st->cpu_layers = MLP_AUTO;
        else if (arg[0] >= '0' && arg[0] <= '9') /* a number: checked against --layers below */
            st->cpu_layers = (int)cli_parse_int("--cpu-layers", arg, 0, 4096);
        else
            cli_usage_error("--cpu-layers '%s': expected auto or a number of blocks 0 to "
                            "--layers", arg);
        break;
    case F_RECOMPUTE:
        st->recompute_text = arg;
        if (strcmp(arg, "auto") == 0)
            st->recompute = MLP_AUTO;
        else if (strcmp(arg, "none") == 0)
            st->recompute = 0;
        else if (strcmp(arg, "all") == 0)
            st->recompute = RC_ALL;
        else if (arg[0] >= '0' && arg[0] <= '9') /* a number: checked against --layers below */
            st->recompute = cli_parse_int("--recompute", arg, 0, 4096);
        else
            cli_usage_error("--recompute '%s': expected none, all, auto or a number of blocks "
                            "0 to --layers", arg);
        break;
    }
}

void mlp_options_parse(int argc, char **argv, mlp_options_t *opt) {
    *opt = (mlp_options_t){
        .c = {.backend = UVMRT_BACKEND_CUDA, .policy = UVMRT_POLICY_PREFETCH, .steps = 6,
              .seed = 1, .log_level = -1},
        .layers = 24, .hidden = 8192, .rows = 8192, .lr = 1e-4, .precision = MLP_BF16,
    };
    mlp_flag_state_t st = {opt, -1, NOT_GIVEN, NULL, NOT_GIVEN, NULL};
    cli_spec_t spec = {
        .summary = "Train a deep MLP (L x [Linear(H,H) + GELU], MSE against a random teacher) on\n"
                   "uvmrt, with tensors that may exceed the GPU's memory.",
        .common = CLI_F_BACKEND | CLI_F_PROFILE | CLI_F_POLICY | CLI_F_BUDGET | CLI_F_STEPS |
                  CLI_F_SEED | CLI_F_REPORT | CLI_F_TRACE | CLI_F_LOSS_LOG | CLI_F_RESULT_JSON |
                  CLI_F_LOG_LEVEL | CLI_F_QUIET | CLI_F_HOST_BUDGET | CLI_F_SPILL_DIR,
        .common_help = {
            [0] = "backend (default cuda; without a usable GPU: sim, profile\n"
                  MLP_FALLBACK_PROFILE ", unless --backend was given)",
            [4] = "training steps (default 6); step 1 records the schedule",
            [5] = "seed of the weights, input and teacher, decimal (default 1)",
            [9] = "medians and totals of the run as JSON, for benchmark tables",
        },
        .steps_min = 1, .steps_max = 10000000,
        .flags = MLP_FLAGS, .n_flags = sizeof MLP_FLAGS / sizeof MLP_FLAGS[0],
        .flag = mlp_flag, .user = &st,
        .epilog = "Exit status: 0 success; 1 runtime error, a non-finite loss or an output\n"
                  "that could not be written; 2 bad usage.\n",
    };
    cli_parse(argc, argv, &spec, &opt->c);

    /* where AdamW runs: --cpu-layers K refines --optimizer-on cpu and contradicts gpu;
     * --optimizer-on says where, so it contradicts auto */
    if (st.cpu_layers != NOT_GIVEN && st.optimizer_on == 0)
        cli_usage_error("--cpu-layers %s with --optimizer-on gpu: gpu runs every block's AdamW "
                        "on the GPU; drop one of the two", st.cpu_text);
    if (st.cpu_layers == MLP_AUTO && st.optimizer_on == 1)
        cli_usage_error("--cpu-layers auto with --optimizer-on cpu: cpu runs every block's "
                        "AdamW on the CPU (or the top K with --cpu-layers K); drop one of the two");
    if (st.cpu_layers == 0 && st.optimizer_on == 1)
        cli_usage_error("--cpu-layers 0 with --optimizer-on cpu: 0 puts every block's AdamW on "
                        "the GPU; expected 1 to --layers (%d)", opt->layers);
    if (st.cpu_layers > opt->layers)
        cli_usage_error("--cpu-layers '%d': expected at most --layers (%d), or auto",
                        st.cpu_layers, opt->layers);
    opt->cpu_layers = st.cpu_layers != NOT_GIVEN ? st.cpu_layers
                      : st.optimizer_on == 1     ? opt->layers
                      : st.optimizer_on == 0     ? 0
                                                 : MLP_AUTO;
    if (st.recompute > opt->layers)
        cli_usage_error("--recompute '%s': expected at most --layers (%d) blocks, or none, all "
                        "or auto", st.recompute_text, opt->layers);
    opt->recompute = st.recompute == NOT_GIVEN ? MLP_AUTO
                     : st.recompute == RC_ALL  ? opt->layers
                                               : (int)st.recompute;
}
