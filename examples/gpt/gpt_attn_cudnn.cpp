/*
 * gpt_attn_cudnn.cpp -- cuDNN's fused flash attention for uvmrt-gpt (gpt_attn_cudnn.h).
 *
 * Two cudnn-frontend graphs per shape, built once: the causal SDPA forward with its
 * softmax statistics, and its backward with the deterministic algorithm (no atomics: the
 * loss logs of uvmrt-gpt are compared bitwise across budgets). Q, K and V are strided
 * views of the packed qkv rows, as the trainer's kernels read them; dQ, dK and dV are
 * written into dqkv the same way. libcudnn.so.9 is opened here at run time (the
 * frontend's dynamic loading), so that the trainer starts on machines without it.
 * cudnn-frontend throws on some failures: every entry point catches and reports.
 */
#include "gpt_attn_cudnn.h"

#include <dlfcn.h>
#include <stdio.h>

#include <cudnn_frontend.h>

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace fe = cudnn_frontend;

/* the frontend's handle on the library it calls (its dynamic loading) */
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace {

enum : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

std::once_flag load_once;
std::string load_error;

/* libcudnn.so.9 (the loader's search path: LD_LIBRARY_PATH, then the system's), once */
bool load_cudnn(std::string &why) {
    std::call_once(load_once, [] {
        void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
        if (h == nullptr) {
            const char *e = dlerror();
            load_error = std::string("cannot open libcudnn.so.9 (") + (e ? e : "unknown error") +
                         "): put cuDNN 9's lib folder on LD_LIBRARY_PATH";
            return;
        }
        fe::cudnn_dlhandle = h;
    });
    if (fe::cudnn_dlhandle == nullptr) {
        why = load_error;
        return false;
    }
    return true;
}

std::string status_text(const char *what, fe::error_t e) {
    return std::string(what) + ": " + e.get_message() + " (cudnn-frontend error " +
           std::to_string((int)e.get_code()) + ")";
}

} // namespace

struct gpt_cudnn_attn {
    int B = 0, T = 0, C = 0, NH = 0;
    cudnnHandle_t handle = nullptr;
    std::shared_ptr<fe::graph::Graph> fwd, bwd;
    int64_t ws_fwd = 0, ws_bwd = 0;
    long version = 0;
    std::string error;
};

namespace {

/* Q, K or V (B,NH,T,HS) as a view of qkv (B,T,3,NH,HS): which 0, 1, 2 */
std::shared_ptr<fe::graph::Tensor_attributes> qkv_view(fe::graph::Graph &g, const gpt_cudnn_attn &a,
                                                       int which, int64_t uid) {
    const char *names[] = {"Q", "K", "V"};
    int64_t B = a.B, T = a.T, C = a.C, NH = a.NH, HS = C / NH;
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(names[which])
                        .set_uid(uid)
                        .set_dim({B, NH, T, HS})
                        .set_stride({3 * C * T, HS, 3 * C, 1}));
}

/* out-shaped (B,NH,T,HS) as a view of (B,T,NH,HS) rows */
void out_layout(fe::graph::Tensor_attributes &t, const gpt_cudnn_attn &a) {
    int64_t B = a.B, T = a.T, C = a.C, NH = a.NH, HS = C / NH;
    t.set_dim({B, NH, T, HS}).set_stride({C * T, HS, C, 1});
}

void stats_layout(fe::graph::Tensor_attributes &t, const gpt_cudnn_attn &a) {
    int64_t B = a.B, T = a.T, NH = a.NH;
    t.set_dim({B, NH, T, 1}).set_stride({NH * T, T, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
}

std::shared_ptr<fe::graph::Graph> new_graph() {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

/* validate, lower, ask the heuristics, check support, build: the first failure's text */
bool finish(fe::graph::Graph &g, cudnnHandle_t h, const char *which, int64_t *ws, std::string &why) {
    fe::error_t e;
    if ((e = g.validate()).is_bad()) return why = status_text((std::string(which) + " graph").c_str(), e), false;
    if ((e = g.build_operation_graph(h)).is_bad())
        return why = status_text((std::string(which) + " operation graph").c_str(), e), false;
    if ((e = g.create_execution_plans({fe::HeurMode_t::A})).is_bad())
        return why = status_text((std::string(which) + " heuristics").c_str(), e), false;
    if ((e = g.check_support(h)).is_bad())
        return why = status_text((std::string(which) + " support").c_str(), e), false;
    if ((e = g.build_plans(h)).is_bad())
        return why = status_text((std::string(which) + " plans").c_str(), e), false;
    if ((e = g.get_workspace_size(*ws)).is_bad())
        return why = status_text((std::string(which) + " workspace").c_str(), e), false;
    return true;
}

bool build(gpt_cudnn_attn &a, std::string &why) {
    float scale = 1.0f / sqrtf((float)(a.C / a.NH));
    {
        a.fwd = new_graph();
        auto &g = *a.fwd;
        auto q = qkv_view(g, a, 0, UID_Q), k = qkv_view(g, a, 1, UID_K), v = qkv_view(g, a, 2, UID_V);
        auto opts = fe::graph::SDPA_attributes()
                        .set_name("attention")
                        .set_generate_stats(true)
                        .set_causal_mask(true)
                        .set_attn_scale(scale);
        auto res = g.sdpa(q, k, v, opts);
        auto o = res[0], stats = res[1];
        o->set_output(true).set_uid(UID_O);
        out_layout(*o, a);
        stats->set_output(true).set_uid(UID_STATS);
        stats_layout(*stats, a);
        if (!finish(g, a.handle, "forward", &a.ws_fwd, why)) return false;
    }
    {
        a.bwd = new_graph();
        auto &g = *a.bwd;
        auto q = qkv_view(g, a, 0, UID_Q), k = qkv_view(g, a, 1, UID_K), v = qkv_view(g, a, 2, UID_V);
        auto o = g.tensor(fe::graph::Tensor_attributes().set_name("O").set_uid(UID_O));
        out_layout(*o, a);
        auto dout = g.tensor(fe::graph::Tensor_attributes().set_name("dO").set_uid(UID_DO));
        out_layout(*dout, a);
        auto stats = g.tensor(fe::graph::Tensor_attributes().set_name("stats").set_uid(UID_STATS));
        stats_layout(*stats, a);
        auto opts = fe::graph::SDPA_backward_attributes()
                        .set_name("attention_backward")
                        .set_causal_mask(true)
                        .set_attn_scale(scale)
                        .set_deterministic_algorithm(true);
        auto res = g.sdpa_backward(q, k, v, o, dout, stats, opts);
        int64_t B = a.B, T = a.T, C = a.C, NH = a.NH, HS = C / NH;
        const int64_t uids[3] = {UID_DQ, UID_DK, UID_DV};
        for (int i = 0; i < 3; i++)
            res[i]->set_output(true).set_uid(uids[i]).set_dim({B, NH, T, HS}).set_stride({3 * C * T, HS, 3 * C, 1});
        if (!finish(g, a.handle, "backward", &a.ws_bwd, why)) return false;
    }
    return true;
}

} // namespace

extern "C" {

int gpt_cudnn_built(void) { return 1; }

gpt_cudnn_attn_t *gpt_cudnn_attn_open(int B, int T, int C, int NH, char *why, size_t why_len) {
    std::string w;
    gpt_cudnn_attn *a = nullptr;
    try {
        if (B <= 0 || T <= 0 || NH <= 0 || C <= 0 || C % NH != 0 || (C / NH) % 8 != 0 || C / NH > 256) {
            w = "cuDNN attention: shape B " + std::to_string(B) + " T " + std::to_string(T) + " C " +
                std::to_string(C) + " NH " + std::to_string(NH) +
                ": expected positive sizes and a head size C / NH that is a multiple of 8, at most 256";
        } else if (load_cudnn(w)) {
            a = new gpt_cudnn_attn;
            a->B = B, a->T = T, a->C = C, a->NH = NH;
            a->version = (long)fe::detail::get_backend_version();
            if (a->version < 90000) {
                w = "cuDNN " + std::to_string(a->version) + " is older than 9.0";
            } else {
                cudnnStatus_t s = fe::detail::create_handle(&a->handle);
                if (s != CUDNN_STATUS_SUCCESS)
                    w = std::string("cudnnCreate failed: ") + fe::detail::get_error_string(s);
                else if (build(*a, w))
                    return a;
            }
        }
    } catch (const std::exception &e) {
        w = std::string("cuDNN attention: ") + e.what();
    } catch (...) {
        w = "cuDNN attention: an unknown exception";
    }
    if (why && why_len) snprintf(why, why_len, "%s", w.c_str());
    gpt_cudnn_attn_close(a);
    return nullptr;
}

size_t gpt_cudnn_attn_workspace_bytes(const gpt_cudnn_attn_t *a) {
    return a == nullptr ? 0 : (size_t)(a->ws_fwd > a->ws_bwd ? a->ws_fwd : a->ws_bwd);
}

long gpt_cudnn_attn_version(const gpt_cudnn_attn_t *a) { return a ? a->version : 0; }

static int run(gpt_cudnn_attn_t *a, fe::graph::Graph &g, std::unordered_map<int64_t, void *> &pack, void *ws,
               void *stream, const char *what) {
    try {
        cudnnStatus_t s = fe::detail::set_stream(a->handle, (cudaStream_t)stream);
        if (s != CUDNN_STATUS_SUCCESS) {
            a->error = std::string("cudnnSetStream failed: ") + fe::detail::get_error_string(s);
            return -1;
        }
        fe::error_t e = g.execute(a->handle, pack, ws);
        if (e.is_bad()) {
            a->error = status_text(what, e);
            return -1;
        }
    } catch (const std::exception &e) {
        a->error = std::string(what) + ": " + e.what();
        return -1;
    }
    return 0;
}

int gpt_cudnn_attn_forward(gpt_cudnn_attn_t *a, uint16_t *out, float *lse, const uint16_t *qkv, void *workspace,
                           void *stream) {
    uint16_t *q = const_cast<uint16_t *>(qkv);
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, q}, {UID_K, q + a->C}, {UID_V, q + 2 * a->C}, {UID_O, out}, {UID_STATS, lse}};
    return run(a, *a->fwd, pack, workspace, stream, "cuDNN attention forward");
}

int gpt_cudnn_attn_backward(gpt_cudnn_attn_t *a, uint16_t *dqkv, const uint16_t *dout, const uint16_t *out,
                            const uint16_t *qkv, const float *lse, void *workspace, void *stream) {
    uint16_t *q = const_cast<uint16_t *>(qkv);
    std::unordered_map<int64_t, void *> pack = {{UID_Q, q},
                                                {UID_K, q + a->C},
                                                {UID_V, q + 2 * a->C},
                                                {UID_O, const_cast<uint16_t *>(out)},
                                                {UID_DO, const_cast<uint16_t *>(dout)},
                                                {UID_STATS, const_cast<float *>(lse)},
                                                {UID_DQ, dqkv},
                                                {UID_DK, dqkv + a->C},
                                                {UID_DV, dqkv + 2 * a->C}};
    return run(a, *a->bwd, pack, workspace, stream, "cuDNN attention backward");
}

const char *gpt_cudnn_attn_error(const gpt_cudnn_attn_t *a) { return a ? a->error.c_str() : ""; }

void gpt_cudnn_attn_close(gpt_cudnn_attn_t *a) {
    if (a == nullptr) return;
    try {
        a->fwd.reset();
        a->bwd.reset();
        if (a->handle) fe::detail::destroy_handle(a->handle);
    } catch (...) {
    }
    delete a;
}

} // extern "C"
