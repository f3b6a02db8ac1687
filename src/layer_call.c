/*
 * layer_call.c -- uvmrt_layer_call_init: a layer call filled in by a function,
 * for C++ and C89 callers, where the README's compound literal
 * `&(uvmrt_layer_call_t){.layer = ...}` does not compile.
 */
#include <string.h>

#include "uvmrt.h"

void uvmrt_layer_call_init(uvmrt_layer_call_t *call, int layer, uvmrt_phase_t phase,
                           uvmrt_stream_t stream)
{
    if (call == NULL) return;
    /* Every field the caller does not name gets its documented zero default
     * (no extra uses, default uses on, no sim timing), as a designated
     * initialiser would give. */
    memset(call, 0, sizeof *call);
    call->struct_size = sizeof *call;
    call->layer = layer;
    call->phase = phase;
    call->stream = stream;
}
