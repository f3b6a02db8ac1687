/*
 * gpt_tokens.h -- uvmrt-gpt's synthetic tokens (--tokens random|cycle), used when
 * neither --data nor --text gives real data (those go through data.h).
 *
 * Synthetic streams are pure functions of (seed, step, position), so every
 * run, budget and policy sees the same batches; targets are the next token of the
 * same stream:
 *  - random: uniformly random ids (the benchmark's setting, vocab 50257); nothing
 *    to learn beyond the unigram (the loss stays near ln V);
 *  - cycle: one fixed random block of GPT_CYCLE_LEN ids repeated, each sequence
 *    starting at a random point of it: the next token follows from the current
 *    one, so a working trainer drives the loss towards 0 within tens of steps.
 */
#ifndef UVMRT_GPT_TOKENS_H
#define UVMRT_GPT_TOKENS_H

#include <stdint.h>

#include "../common/train_math.h"

#define GPT_TOKENS_SEED_XOR 0x70c3e5ull

/* inp, targets (B*T,) for step `step`: ids in [0, vocab). */
static inline void gpt_tokens_random(int *inp, int *targets, int B, int T, int vocab,
                                     uint64_t seed, int step) {
    uint64_t base = mlp_splitmix64((seed ^ GPT_TOKENS_SEED_XOR) + (uint64_t)step * 0x1000193ull);
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= T; t++) {
            uint64_t h = mlp_splitmix64(base + (uint64_t)b * (uint64_t)(T + 1) + (uint64_t)t);
            int id = (int)((h >> 33) % (uint64_t)vocab);
            if (t < T)
                inp[b * T + t] = id;
            if (t > 0)
                targets[b * T + t - 1] = id;
        }
}

#define GPT_CYCLE_LEN 61

static inline void gpt_tokens_cycle(int *inp, int *targets, int B, int T, int vocab,
                                    uint64_t seed, int step) {
    uint64_t base = mlp_splitmix64((seed ^ GPT_TOKENS_SEED_XOR) + (uint64_t)step * 0x1000193ull);
    for (int b = 0; b < B; b++) {
        uint64_t start = mlp_splitmix64(base + (uint64_t)b) % GPT_CYCLE_LEN;
        for (int t = 0; t <= T; t++) {
            uint64_t k = (start + (uint64_t)t) % GPT_CYCLE_LEN;
            int id = (int)((mlp_splitmix64(seed * 31u + k + 7u) >> 33) % (uint64_t)vocab);
            if (t < T)
                inp[b * T + t] = id;
            if (t > 0)
                targets[b * T + t - 1] = id;
        }
    }
}

#endif
