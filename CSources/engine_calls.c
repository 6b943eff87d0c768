/* The functions queued to run on an engine's loop thread: tern_engine_call (from any thread:
 * after the current engine callback on the loop thread, else after one wake-up) and
 * tern_engine_defer (on the loop thread, after the current batch's completions). The engine
 * runs them (engine.c); this file owns their nodes. */
#include "internal.h"

#include <stdlib.h>

/* A function queued by tern_engine_call or tern_engine_defer. */
typedef struct {
  tern__list node;
  void (*fn)(void *arg);
  void *arg;
} loop_call;

/* Nodes of run calls kept for the next calls made on the loop thread. A Swift request makes two
 * (its task's resumption through the executor, its execution's release): a malloc and a free
 * each were about 250 instructions of the loop thread's work per request. */
#define SPARE_CALLS 16

/* A node for a call: a spare one on the loop thread, else a new one. */
static loop_call *call_node(tern_engine_t *eng, bool loop_thread) {
  if (loop_thread && !tern__list_empty(&eng->spare_calls)) {
    tern__list *n = eng->spare_calls.next;
    tern__list_remove(n);
    eng->nspare_calls--;
    return tern__container_of(n, loop_call, node);
  }
  return tern__malloc(sizeof(loop_call));
}

void tern__engine_run_first_call(tern_engine_t *eng, tern__list *calls) {
  tern__list *n = calls->next;
  tern__list_remove(n);
  loop_call *call = tern__container_of(n, loop_call, node);
  call->fn(call->arg);
  if (eng->nspare_calls < SPARE_CALLS) {
    tern__list_insert_tail(&eng->spare_calls, &call->node);
    eng->nspare_calls++;
  } else {
    free(call);
  }
}

void tern__engine_drop_calls(tern__list *calls) {
  while (!tern__list_empty(calls)) {
    tern__list *n = calls->next;
    tern__list_remove(n);
    free(tern__container_of(n, loop_call, node));
  }
}

int tern_engine_call(tern_engine_t *eng, void (*fn)(void *arg), void *arg) {
  if (eng == NULL || fn == NULL) return TERN_EINVAL;
  bool loop_thread = tern__on_loop_thread(eng);
  loop_call *call = call_node(eng, loop_thread);
  if (call == NULL) return TERN_ENOMEM;
  call->fn = fn;
  call->arg = arg;
  if (loop_thread && eng->depth > 0) {
    tern__list_insert_tail(&eng->ready_calls, &call->node);
    return 0;
  }
  uv_mutex_lock(&eng->lock);
  tern__list_insert_tail(&eng->calls, &call->node);
  uv_mutex_unlock(&eng->lock);
  uv_async_send(&eng->async);
  return 0;
}

int tern_engine_defer(tern_engine_t *eng, void (*fn)(void *arg), void *arg) {
  if (eng == NULL || fn == NULL || !tern__on_loop_thread(eng) || eng->depth == 0)
    return TERN_EINVAL;
  loop_call *call = call_node(eng, true);
  if (call == NULL) return TERN_ENOMEM;
  call->fn = fn;
  call->arg = arg;
  tern__list_insert_tail(&eng->deferred, &call->node);
  return 0;
}
