/*
 * gpt_flags.c -- uvmrt-gpt's options (see gpt_flags.h and uvmrt-gpt(1)).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cli.h"
#include "gpt_flags.h"

static void usage(FILE *out) {
    fprintf(out,
        "Usage: " GPT_PROG " [OPTION]...\n"
        "Train a GPT-2 model on uvmrt (random tokens for now), with parameters, optimizer\n"
        "state and activations that may exceed the GPU's memory.\n"
        "\n"
        "Model:\n"
        "  --depth 12|24|36|48|60  GPT-2 preset: 768/1024/1280/1600/1920 channels, head\n"
        "                        size 64 (default 12)\n"
        "  --layers L --channels C --heads H   explicit shape (override the preset;\n"
        "                        C / H must be 64 on the GPU)\n"
        "  --vocab V             vocabulary (default 50257; padded to a multiple of 128)\n"
        "  --batch B             sequences per step (default 8)\n"
        "  --seq T               tokens per sequence (default 1024)\n"
        "  --recompute none|all  all: keep only each block's output, recompute the block\n"
        "                        in its backward (default none)\n"
        "Training:\n"
        "  --steps S             training steps (default 10); step 1 records the schedule\n"
        "  --lr LR               peak AdamW learning rate (default 3e-4)\n"
        "  --warmup N            linear warmup steps (default 0), then cosine to lr/10\n"
        "  --seed SEED           seed of weights and tokens (default 1)\n"
        "  --tokens random|cycle synthetic tokens: uniformly random (default), or a\n"
        "                        repeated random block the model can learn\n"
        "  --optimizer-on gpu|cpu  where AdamW runs (default gpu)\n"
        "  --init-weights FILE   load weights (the --dump-weights format)\n"
        "  --dump-weights FILE   write the initial weights (llm.c order, float32)\n"
        "  --dump-grads FILE     write step 1's gradients (before clipping and update)\n"
        "uvmrt:\n"
        "  --budget SIZE|auto    device bytes uvmrt may keep resident (default auto;\n"
        "                        not applied to policy none)\n"
        "  --policy none|demand|prefetch   (default prefetch)\n"
        "  --backend cuda|sim    (default cuda; without a GPU: sim, profile h200)\n"
        "  --profile NAME        sim device profile\n"
        "  --report FORMAT:PATH  uvmrt's report as text, json, csv or trace ('-': stdout)\n"
        "  --trace PATH          trace-event timeline (Perfetto)\n"
        "  --loss-log PATH       one line per step: step, loss (%%a, exact)\n"
        "  --result-json PATH    medians and totals of the run, for benchmark tables\n"
        "  -q, --quiet           no configuration or per-layer report\n"
        "  -h, --help            this help\n"
        "  -V, --version         version\n"
        "\n"
        "SIZE: an integer with an optional K, M, G or T suffix (powers of 1024).\n"
        "UVMRT_* environment variables override the uvmrt flags (see uvmrt-gpt(1)).\n"
        "Exit status: 0 success, 1 runtime error, 2 bad usage.\n");
}

static double parse_double(const char *flag, const char *text, double lo, double hi) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v) || v < lo || v > hi)
        cli_usage_error("%s '%s': expected a number in [%g, %g]", flag, text, lo, hi);
    return v;
}

void gpt_options_parse(int argc, char **argv, gpt_options_t *opt) {
    enum { O_DEPTH = 256, O_LAYERS, O_CHANNELS, O_HEADS, O_VOCAB, O_BATCH, O_SEQ, O_STEPS, O_LR,
           O_WARMUP, O_SEED, O_BUDGET, O_POLICY, O_BACKEND, O_PROFILE, O_OPTIMIZER_ON,
           O_RECOMPUTE, O_REPORT, O_TRACE, O_LOSS_LOG, O_RESULT_JSON, O_DUMP_WEIGHTS,
           O_DUMP_GRADS, O_INIT_WEIGHTS, O_TOKENS };
    static const struct option longopts[] = {
        {"depth", required_argument, NULL, O_DEPTH},
        {"layers", required_argument, NULL, O_LAYERS},
        {"channels", required_argument, NULL, O_CHANNELS},
        {"heads", required_argument, NULL, O_HEADS},
        {"vocab", required_argument, NULL, O_VOCAB},
        {"batch", required_argument, NULL, O_BATCH},
        {"seq", required_argument, NULL, O_SEQ},
        {"steps", required_argument, NULL, O_STEPS},
        {"lr", required_argument, NULL, O_LR},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"seed", required_argument, NULL, O_SEED},
        {"budget", required_argument, NULL, O_BUDGET},
        {"policy", required_argument, NULL, O_POLICY},
        {"backend", required_argument, NULL, O_BACKEND},
        {"profile", required_argument, NULL, O_PROFILE},
        {"optimizer-on", required_argument, NULL, O_OPTIMIZER_ON},
        {"recompute", required_argument, NULL, O_RECOMPUTE},
        {"report", required_argument, NULL, O_REPORT},
        {"trace", required_argument, NULL, O_TRACE},
        {"loss-log", required_argument, NULL, O_LOSS_LOG},
        {"result-json", required_argument, NULL, O_RESULT_JSON},
        {"dump-weights", required_argument, NULL, O_DUMP_WEIGHTS},
        {"dump-grads", required_argument, NULL, O_DUMP_GRADS},
        {"init-weights", required_argument, NULL, O_INIT_WEIGHTS},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *opt = (gpt_options_t){
        .depth = 12, .vocab = 50257, .batch = 8, .seq = 1024, .steps = 10, .lr = 3e-4,
        .lr_final_frac = 0.1, .grad_clip = 1.0, .seed = 1, .policy = UVMRT_POLICY_PREFETCH,
        .backend = UVMRT_BACKEND_CUDA,
    };
    int layers = 0, channels = 0, heads = 0, c;
    while ((c = getopt_long(argc, argv, "qhV", longopts, NULL)) != -1) {
        switch (c) {
        case O_DEPTH:
            opt->depth = (int)cli_parse_int("--depth", optarg, 12, 60);
            if (opt->depth % 12)
                cli_usage_error("--depth '%s': expected 12, 24, 36, 48 or 60", optarg);
            break;
        case O_LAYERS: layers = (int)cli_parse_int("--layers", optarg, 1, 1024); break;
        case O_CHANNELS:
            channels = (int)cli_parse_int("--channels", optarg, 8, 1 << 16);
            if (channels % 8)
                cli_usage_error("--channels '%s': expected a multiple of 8", optarg);
            break;
        case O_HEADS: heads = (int)cli_parse_int("--heads", optarg, 1, 1024); break;
        case O_VOCAB: opt->vocab = (int)cli_parse_int("--vocab", optarg, 2, 1 << 24); break;
        case O_BATCH: opt->batch = (int)cli_parse_int("--batch", optarg, 1, 1 << 16); break;
        case O_SEQ: opt->seq = (int)cli_parse_int("--seq", optarg, 1, 1 << 20); break;
        case O_STEPS: opt->steps = (int)cli_parse_int("--steps", optarg, 1, 10000000); break;
        case O_LR: opt->lr = parse_double("--lr", optarg, 1e-12, 10.0); break;
        case O_WARMUP: opt->warmup = (int)cli_parse_int("--warmup", optarg, 0, 10000000); break;
        case O_SEED: opt->seed = cli_parse_u64("--seed", optarg); break;
        case O_BUDGET: opt->budget_bytes = cli_parse_size("--budget", optarg, 1); break;
        case O_POLICY:
            if (uvmrt_policy_parse(optarg, &opt->policy) != UVMRT_OK)
                cli_usage_error("--policy '%s': expected none, demand or prefetch", optarg);
            break;
        case O_BACKEND:
            if (uvmrt_backend_parse(optarg, &opt->backend) != UVMRT_OK)
                cli_usage_error("--backend '%s': expected cuda or sim", optarg);
            opt->backend_explicit = 1;
            break;
        case O_PROFILE:
            if (uvmrt_profile_find(optarg) == NULL)
                cli_usage_error("--profile '%s': expected a sim profile name such as h200 or "
                                "consumer-8g (uvmrt-demo --profile list)", optarg);
            opt->profile = optarg;
            break;
        case O_OPTIMIZER_ON:
            if (strcmp(optarg, "gpu") == 0)
                opt->optimizer_cpu = 0;
            else if (strcmp(optarg, "cpu") == 0)
                opt->optimizer_cpu = 1;
            else
                cli_usage_error("--optimizer-on '%s': expected gpu or cpu", optarg);
            break;
        case O_RECOMPUTE:
            if (strcmp(optarg, "none") == 0)
                opt->recompute = 0;
            else if (strcmp(optarg, "all") == 0)
                opt->recompute = 1;
            else
                cli_usage_error("--recompute '%s': expected none or all", optarg);
            break;
        case O_REPORT:
            cli_parse_report("--report", optarg, &opt->report_format, &opt->report_path);
            break;
        case O_TRACE: opt->trace_path = cli_parse_path("--trace", optarg); break;
        case O_LOSS_LOG: opt->loss_log = cli_parse_path("--loss-log", optarg); break;
        case O_RESULT_JSON: opt->result_json = cli_parse_path("--result-json", optarg); break;
        case O_DUMP_WEIGHTS: opt->dump_weights = cli_parse_path("--dump-weights", optarg); break;
        case O_DUMP_GRADS: opt->dump_grads = cli_parse_path("--dump-grads", optarg); break;
        case O_INIT_WEIGHTS: opt->init_weights = cli_parse_path("--init-weights", optarg); break;
        case O_TOKENS:
            if (strcmp(optarg, "random") == 0)
                opt->tokens_cycle = 0;
            else if (strcmp(optarg, "cycle") == 0)
                opt->tokens_cycle = 1;
            else
                cli_usage_error("--tokens '%s': expected random or cycle", optarg);
            break;
        case 'q': opt->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf(GPT_PROG " (uvmrt) %s\n", uvmrt_version_string()); exit(0);
        default:
            fprintf(stderr, "Try '" GPT_PROG " --help' for more information.\n");
            exit(2);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s': this program takes options only", argv[optind]);
    static const int preset_channels[] = {768, 1024, 1280, 1600, 1920};
    opt->layers = layers ? layers : opt->depth;
    opt->channels = channels ? channels : preset_channels[opt->depth / 12 - 1];
    opt->heads = heads ? heads : opt->channels / 64;
    if (layers || channels || heads)
        opt->depth = 0;
    if (opt->channels % opt->heads)
        cli_usage_error("--channels %d is not a multiple of --heads %d", opt->channels,
                        opt->heads);
    opt->padded_vocab = (opt->vocab + 127) / 128 * 128;
    opt->max_seq = opt->seq > 1024 ? opt->seq : 1024;
    if ((long long)opt->batch * opt->seq > (1ll << 24))
        cli_usage_error("--batch %d x --seq %d: expected at most 16777216 tokens per step",
                        opt->batch, opt->seq);
}
