#include "redis/uv_adapter.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

namespace lw {
namespace {

struct Events {
  redisAsyncContext* context;
  uv_poll_t handle;
  int events;
};

void OnPoll(uv_poll_t* handle, int status, int events) {
  auto* p = static_cast<Events*>(handle->data);
  if (p->context == nullptr) return;
  if (status < 0) {
    // Let hiredis see the failure: a pending connect reports it through the connect
    // callback; an established connection reads EOF/error and disconnects.
    if (p->context->c.flags & REDIS_CONNECTED) {
      redisAsyncHandleRead(p->context);
    } else {
      redisAsyncHandleWrite(p->context);
    }
    return;
  }
  if (events & UV_READABLE) redisAsyncHandleRead(p->context);
  // The read may have freed the context (cleanup clears p->context).
  if (p->context != nullptr && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

void Update(Events* p) {
  if (p->events) {
    uv_poll_start(&p->handle, p->events, OnPoll);
  } else {
    uv_poll_stop(&p->handle);
  }
}

void AddRead(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events |= UV_READABLE;
  Update(p);
}
void DelRead(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events &= ~UV_READABLE;
  Update(p);
}
void AddWrite(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events |= UV_WRITABLE;
  Update(p);
}
void DelWrite(void* d) {
  auto* p = static_cast<Events*>(d);
  p->events &= ~UV_WRITABLE;
  Update(p);
}
void Cleanup(void* d) {
  auto* p = static_cast<Events*>(d);
  if (p->context == nullptr) return;  // hiredis may call cleanup twice
  p->context = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
           [](uv_handle_t* h) { delete static_cast<Events*>(h->data); });
}

}  // namespace

bool AttachToLoop(redisAsyncContext* ac, uv_loop_s* loop) {
  if (ac->ev.data != nullptr) return false;
  auto* p = new Events{ac, {}, 0};
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  p->handle.data = p;
  ac->ev.addRead = AddRead;
  ac->ev.delRead = DelRead;
  ac->ev.addWrite = AddWrite;
  ac->ev.delWrite = DelWrite;
  ac->ev.cleanup = Cleanup;
  ac->ev.data = p;
  return true;
}

redisAsyncContext* ConnectOnLoop(uv_loop_s* loop, const std::string& host, int port, void* data,
                                 void (*on_connect)(const redisAsyncContext*, int status),
                                 void (*on_disconnect)(const redisAsyncContext*, int status),
                                 std::string* error) {
  redisAsyncContext* ac = redisAsyncConnect(host.c_str(), port);
  if (ac == nullptr || ac->err) {
    *error = ac ? ac->errstr : "out of memory";
    if (ac) redisAsyncFree(ac);
    return nullptr;
  }
  if (!AttachToLoop(ac, loop)) {
    *error = "cannot watch the socket on the event loop";
    redisAsyncFree(ac);
    return nullptr;
  }
  ac->data = data;
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  return ac;
}

}  // namespace lw
