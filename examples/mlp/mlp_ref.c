/*
 * mlp_ref.c -- plain-C fp32 reference of uvmrt-mlp's training math (see mlp_ref.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_ref.h"

float mlp_init_weight_bound(int H) {
    return (float)sqrt(6.0 / (double)H);
}

float mlp_init_input_scale(void) {
    return (float)sqrt(3.0);
}

void mlp_ref_linear(float *out, const float *in, const float *W, int N, int H) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < H; o++) {
            float acc = 0.0f;
            for (int k = 0; k < H; k++)
                acc += in[(size_t)n * H + k] * W[(size_t)o * H + k];
            out[(size_t)n * H + o] = acc;
        }
}

void mlp_ref_weight_grad(float *dW, const float *dZ, const float *in, int N, int H) {
    for (int o = 0; o < H; o++)
        for (int k = 0; k < H; k++) {
            float acc = 0.0f;
            for (int n = 0; n < N; n++)
                acc += dZ[(size_t)n * H + o] * in[(size_t)n * H + k];
            dW[(size_t)o * H + k] = acc;
        }
}

void mlp_ref_input_grad(float *dA, const float *dZ, const float *W, int N, int H) {
    for (int n = 0; n < N; n++)
        for (int k = 0; k < H; k++) {
            float acc = 0.0f;
            for (int o = 0; o < H; o++)
                acc += dZ[(size_t)n * H + o] * W[(size_t)o * H + k];
            dA[(size_t)n * H + k] = acc;
        }
}

int mlp_ref_init(mlp_ref_t *r, int L, int H, int N, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->L = L, r->H = H, r->N = N;
    size_t hh = (size_t)H * H, nh = (size_t)N * H;
    r->W = calloc((size_t)L * hh, sizeof(float));
    r->m = calloc((size_t)L * hh, sizeof(float));
    r->v = calloc((size_t)L * hh, sizeof(float));
    r->dW = calloc((size_t)L * hh, sizeof(float));
    r->A = calloc((size_t)(L + 1) * nh, sizeof(float));
    r->Z = calloc((size_t)L * nh, sizeof(float));
    r->Y = calloc(nh, sizeof(float));
    r->dA = calloc(nh, sizeof(float));
    r->dZ = calloc(nh, sizeof(float));
    float *T = calloc(hh, sizeof(float)), *tmp = calloc(nh, sizeof(float));
    if (!r->W || !r->m || !r->v || !r->dW || !r->A || !r->Z || !r->Y || !r->dA || !r->dZ ||
        !T || !tmp) {
        free(T);
        free(tmp);
        mlp_ref_free(r);
        return -1;
    }
    r->X = r->A;
    float b = mlp_init_weight_bound(H), s = mlp_init_input_scale();
    for (size_t j = 0; j < nh; j++)
        r->X[j] = mlp_uniform(seed, MLP_ID_INPUT, j) * s;
    for (int i = 0; i < L; i++)
        for (size_t j = 0; j < hh; j++)
            r->W[(size_t)i * hh + j] = mlp_uniform(seed, MLP_ID_STUDENT(i), j) * b;
    /* the teacher: same shape, its own weights */
    memcpy(r->Y, r->X, nh * sizeof(float));
    for (int i = 0; i < L; i++) {
        for (size_t j = 0; j < hh; j++)
            T[j] = mlp_uniform(seed ^ MLP_TEACHER_SEED_XOR, MLP_ID_TEACHER(i), j) * b;
        mlp_ref_linear(tmp, r->Y, T, N, H);
        for (size_t j = 0; j < nh; j++)
            r->Y[j] = mlp_gelu(tmp[j]);
    }
    free(T);
    free(tmp);
    return 0;
}

void mlp_ref_free(mlp_ref_t *r) {
    free(r->W);
    free(r->m);
    free(r->v);
    free(r->dW);
    free(r->A);
    free(r->Z);
    free(r->Y);
    free(r->dA);
    free(r->dZ);
    memset(r, 0, sizeof *r);
}

float mlp_ref_forward(mlp_ref_t *r) {
    int L = r->L, H = r->H, N = r->N;
    size_t hh = (size_t)H * H, nh = (size_t)N * H;
    for (int i = 0; i < L; i++) {
        float *z = r->Z + (size_t)i * nh, *a = r->A + (size_t)(i + 1) * nh;
        mlp_ref_linear(z, r->A + (size_t)i * nh, r->W + (size_t)i * hh, N, H);
        for (size_t j = 0; j < nh; j++)
            a[j] = mlp_gelu(z[j]);
    }
    const float *out = r->A + (size_t)L * nh;
    double sum = 0.0;
    for (size_t j = 0; j < nh; j++) {
        float d = out[j] - r->Y[j];
        sum += (double)d * (double)d;
    }
    return (float)(sum / (double)nh);
}

float mlp_ref_forward_backward(mlp_ref_t *r) {
    float loss = mlp_ref_forward(r);
    int L = r->L, H = r->H, N = r->N;
    size_t hh = (size_t)H * H, nh = (size_t)N * H;
    const float *out = r->A + (size_t)L * nh;
    float grad_mul = (float)(2.0 / (double)nh); /* as the GPU's loss kernel */
    for (size_t j = 0; j < nh; j++)
        r->dA[j] = (out[j] - r->Y[j]) * grad_mul;
    for (int i = L - 1; i >= 0; i--) {
        const float *z = r->Z + (size_t)i * nh, *in = r->A + (size_t)i * nh;
        const float *W = r->W + (size_t)i * hh;
        float *dW = r->dW + (size_t)i * hh;
        for (size_t j = 0; j < nh; j++)
            r->dZ[j] = r->dA[j] * mlp_gelu_grad(z[j]);
        mlp_ref_weight_grad(dW, r->dZ, in, N, H);
        if (i == 0)
            break;
        mlp_ref_input_grad(r->dA, r->dZ, W, N, H);
    }
    return loss;
}

void mlp_ref_adamw(mlp_ref_t *r, double lr) {
    size_t hh = (size_t)r->H * r->H;
    r->t++;
    uvmrt_adamw_t hp = mlp_adamw_hp(lr, MLP_ADAMW_WD, r->t, 1.0);
    /* cannot fail: hp is valid and the arrays are r's */
    for (int i = 0; i < r->L; i++)
        (void)uvmrt_adamw_cpu(&hp, r->W + (size_t)i * hh, r->m + (size_t)i * hh,
                              r->v + (size_t)i * hh, r->dW + (size_t)i * hh, hh, NULL);
}

void mlp_loss_text(char *buf, size_t cap, double loss) {
    snprintf(buf, cap, "%.6g", loss);
}
