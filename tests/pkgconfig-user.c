/*
 * pkgconfig-user.c -- an external program built only from what `make install`
 * puts in a prefix and what uvmrt.pc says (tests/check-pkgconfig.sh links it
 * shared and static). One sim context, one layer with a weight, two steps;
 * exit 0 when every call succeeds and the second step ran from the plan.
 */
#include <stdio.h>
#include <uvmrt.h>

#define CHECK(call)                                                        \
    do {                                                                   \
        uvmrt_status_t st_ = (call);                                       \
        if (st_ != UVMRT_OK) {                                             \
            fprintf(stderr, "%s: %s\n", #call, uvmrt_status_str(st_));     \
            return 1;                                                      \
        }                                                                  \
    } while (0)

int main(void)
{
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.backend = UVMRT_BACKEND_SIM;
    p.ignore_env = 1;
    uvmrt_context_t *ctx = NULL;
    CHECK(uvmrt_context_create(&p, &ctx));
    int layer = -1;
    CHECK(uvmrt_layer_add(ctx, "l0", &layer));
    uvmrt_tensor_desc_t d = {"w0", layer, UVMRT_ROLE_WEIGHT, 1u << 20};
    uvmrt_tensor_t *w = NULL;
    CHECK(uvmrt_tensor_alloc(ctx, &d, &w));
    for (int step = 0; step < 2; step++) {
        CHECK(uvmrt_step_begin(ctx));
        uvmrt_layer_call_t call;
        uvmrt_layer_call_init(&call, layer, UVMRT_PHASE_FORWARD, NULL);
        call.sim_duration_ns = 1000;
        CHECK(uvmrt_layer_begin(ctx, &call));
        CHECK(uvmrt_layer_end(ctx));
        CHECK(uvmrt_step_end(ctx));
    }
    int resident = uvmrt_tensor_is_resident(w);
    const char *backend = uvmrt_backend_name(uvmrt_context_backend(ctx));
    uvmrt_context_destroy(ctx);
    printf("uvmrt %s: backend %s, weight resident %d\n", uvmrt_version_string(), backend, resident);
    return resident == 1 ? 0 : 1;
}
