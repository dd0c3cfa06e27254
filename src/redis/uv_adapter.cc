#include "redis/uv_adapter.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "redis/tls.h"

// Defined and exported by hiredis 0.14 (what redisAsyncHandleRead runs after reading), not
// declared in its headers: answers every reply the context's reader holds.
extern "C" void redisProcessCallbacks(redisAsyncContext* ac);

namespace lw {
namespace {

struct Flusher;

struct Events {
  redisAsyncContext* context = nullptr;
  uv_poll_t handle{};
  int events = 0;              // what the poll handle watches (as last given to libuv)
  Flusher* flusher = nullptr;  // this loop's write batcher
  bool queued = false;     // in flusher->queue: has output to write before the next poll
  bool flushing = false;   // inside Flusher::Run's write for this context
  // The owner's last word before a write (SetBeforeWrite), run when asked (RequestWrite).
  void (*before_write)(void*) = nullptr;
  void* before_write_arg = nullptr;
  bool before_wanted = false;
  bool in_before = false;
  // TLS (StartTls): the stream that does this context's I/O once hiredis connected the socket.
  std::unique_ptr<TlsStream> tls;
  TlsEvent tls_event = nullptr;
  bool tls_ready = false;         // handshake done
  size_t tls_retry_len = 0;       // length of a write to repeat (OpenSSL asks for the same)
  bool tls_read_wants_write = false;
  bool tls_write_wants_read = false;
};

void Watch(Events* p, int events);
void TlsWrite(Events* p);

// Lets the owner append its queued commands, then writes the context's output. May free the
// context (p->context is null afterwards).
void WriteNow(Events* p) {
  if (p->before_wanted && p->before_write != nullptr) {
    p->before_wanted = false;
    p->in_before = true;
    p->before_write(p->before_write_arg);
    p->in_before = false;
    if (p->context == nullptr) return;
  }
  p->flushing = true;
  if (p->tls) {
    TlsWrite(p);
  } else {
    redisAsyncHandleWrite(p->context);
  }
  p->flushing = false;
}

// Tells the owner the TLS stream failed (it drops the context).
void TlsFailed(Events* p) {
  if (p->context != nullptr) p->tls_event(p->context, p->tls.get());
}

void TlsHandshake(Events* p) {
  switch (p->tls->Handshake()) {
    case TlsStream::Io::kDone:
      p->tls_ready = true;
      Watch(p, UV_READABLE);
      p->tls_event(p->context, nullptr);  // the owner sends AUTH or its handshake
      return;
    case TlsStream::Io::kWantRead:
      return Watch(p, UV_READABLE);
    case TlsStream::Io::kWantWrite:
      return Watch(p, UV_READABLE | UV_WRITABLE);
    default:
      return TlsFailed(p);
  }
}

// Removes the first n bytes of s, as sdsrange does (hiredis 0.14 declares its sds functions with
// C++ linkage when included from C++; the inline ones need no linking).
void DropFront(sds s, size_t n) {
  const size_t left = sdslen(s) - n;
  std::memmove(s, s + n, left);
  sdssetlen(s, left);
  s[left] = '\0';
}

// Writes hiredis's output buffer through the stream, as much as the socket takes.
void TlsWrite(Events* p) {
  if (!p->tls_ready) return TlsHandshake(p);
  p->tls_write_wants_read = false;
  redisContext* c = &p->context->c;
  while (sdslen(c->obuf) > 0) {
    const size_t len = p->tls_retry_len != 0 ? p->tls_retry_len : sdslen(c->obuf);
    size_t n = 0;
    switch (p->tls->Write(c->obuf, len, n)) {
      case TlsStream::Io::kDone:
        p->tls_retry_len = 0;
        DropFront(c->obuf, n);
        continue;
      case TlsStream::Io::kWantWrite:
        p->tls_retry_len = len;
        return Watch(p, p->events | UV_WRITABLE);
      case TlsStream::Io::kWantRead:
        p->tls_retry_len = len;
        p->tls_write_wants_read = true;
        return;
      default:
        return TlsFailed(p);
    }
  }
  if (!p->tls_read_wants_write) Watch(p, p->events & ~UV_WRITABLE);
}

// Reads what the stream has, feeds hiredis's reply parser, and answers the parsed replies.
void TlsRead(Events* p) {
  p->tls_read_wants_write = false;
  redisContext* c = &p->context->c;
  char buf[16 * 1024];
  bool failed = false;
  for (;;) {
    size_t n = 0;
    const TlsStream::Io io = p->tls->Read(buf, sizeof buf, n);
    if (io == TlsStream::Io::kDone) {
      redisReaderFeed(c->reader, buf, n);
      continue;
    }
    if (io == TlsStream::Io::kWantWrite) {
      p->tls_read_wants_write = true;
      Watch(p, p->events | UV_WRITABLE);
    }
    failed = io == TlsStream::Io::kClosed || io == TlsStream::Io::kFailed;
    break;
  }
  redisProcessCallbacks(p->context);  // may free the context (p->context is null then)
  if (failed) TlsFailed(p);
}

void TlsPoll(Events* p, int status, int events) {
  if (!p->tls_ready) return TlsHandshake(p);
  // An error status: the next read reports it (or end of file).
  if (status < 0 || (events & UV_READABLE) || p->tls_read_wants_write) TlsRead(p);
  if (p->context != nullptr && ((events & UV_WRITABLE) || p->tls_write_wants_read)) WriteNow(p);
}

// Write batching, one per loop. hiredis asks for a write (addWrite) on every command it
// buffers. Watching the socket for writability each time costs epoll_ctl calls per command
// and a loop turn per flush (libuv's uv_poll_start even removes the fd from epoll first).
// Instead, a connected context with output is queued here, and a prepare handle (which libuv
// runs once per loop turn, just before it polls) writes each queued context's whole buffer
// with one write(2). Every command issued during a turn, by any number of requests, leaves in
// that one write, in the turn the commands were made (never later: a burst's commands must
// not wait behind another turn's work). Only a write the kernel could not finish (a full
// socket buffer) or a connect in progress falls back to watching for writability.
struct Flusher {
  uv_loop_t* loop;
  uv_prepare_t prepare;
  std::vector<Events*> queue;
  size_t users = 0;

  static void Run(uv_prepare_t* handle) {
    auto* self = static_cast<Flusher*>(handle->data);
    std::vector<Events*> batch;
    batch.swap(self->queue);
    for (Events* p : batch) {
      p->queued = false;
      if (p->context == nullptr) continue;
      WriteNow(p);  // may disconnect and free the context
    }
    if (self->queue.empty()) {
      uv_prepare_stop(&self->prepare);
      batch.clear();
      self->queue.swap(batch);  // keep the capacity for the next turn
    }
  }
};

// Flushers by loop, for this thread (a loop is only ever touched from its own thread).
thread_local std::unordered_map<uv_loop_t*, Flusher*> t_flushers;

Flusher* AcquireFlusher(uv_loop_t* loop) {
  Flusher*& f = t_flushers[loop];
  if (f == nullptr) {
    f = new Flusher{loop, {}, {}, 0};
    uv_prepare_init(loop, &f->prepare);
    f->prepare.data = f;
  }
  ++f->users;
  return f;
}

void ReleaseFlusher(Flusher* f) {
  if (--f->users > 0) return;
  t_flushers.erase(f->loop);
  uv_close(reinterpret_cast<uv_handle_t*>(&f->prepare),
           [](uv_handle_t* h) { delete static_cast<Flusher*>(h->data); });
}

void OnPoll(uv_poll_t* handle, int status, int events) {
  auto* p = static_cast<Events*>(handle->data);
  if (p->context == nullptr) return;
  if (p->tls) return TlsPoll(p, status, events);
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
  if (p->context != nullptr && (events & UV_WRITABLE)) WriteNow(p);
}

void Watch(Events* p, int events) {
  if (events == p->events) return;  // uv_poll_start would re-register the fd for nothing
  p->events = events;
  if (events == 0) {
    uv_poll_stop(&p->handle);
  } else {
    uv_poll_start(&p->handle, events, OnPoll);
  }
}

void AddRead(void* d) {
  auto* p = static_cast<Events*>(d);
  Watch(p, p->events | UV_READABLE);
}
void DelRead(void* d) {
  auto* p = static_cast<Events*>(d);
  Watch(p, p->events & ~UV_READABLE);
}
// Writes p's output before the loop's next poll (Flusher).
void Queue(Events* p) {
  if (p->queued) return;
  p->queued = true;
  Flusher* f = p->flusher;
  if (f->queue.empty()) uv_prepare_start(&f->prepare, Flusher::Run);
  f->queue.push_back(p);
}
void AddWrite(void* d) {
  auto* p = static_cast<Events*>(d);
  if (p->context == nullptr || p->in_before) return;  // gone, or the write follows at once
  const bool connected = (p->context->c.flags & REDIS_CONNECTED) != 0;
  if (!connected || p->flushing) {
    // A connect in progress, or a write the kernel did not take whole: wait for writability.
    Watch(p, p->events | UV_WRITABLE);
    return;
  }
  if (p->events & UV_WRITABLE) return;  // already waiting for a partial write to drain
  Queue(p);
}
void DelWrite(void* d) {
  auto* p = static_cast<Events*>(d);
  Watch(p, p->events & ~UV_WRITABLE);
}
void Cleanup(void* d) {
  auto* p = static_cast<Events*>(d);
  if (p->context == nullptr) return;  // hiredis may call cleanup twice
  p->context = nullptr;
  if (p->queued) {
    auto& q = p->flusher->queue;
    q.erase(std::remove(q.begin(), q.end(), p), q.end());
    p->queued = false;
  }
  ReleaseFlusher(p->flusher);
  p->flusher = nullptr;
  p->tls.reset();  // before hiredis closes the socket
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
           [](uv_handle_t* h) { delete static_cast<Events*>(h->data); });
}

}  // namespace

void SetBeforeWrite(redisAsyncContext* ac, void (*fn)(void*), void* arg) {
  auto* p = static_cast<Events*>(ac->ev.data);
  p->before_write = fn;
  p->before_write_arg = arg;
}

void RequestWrite(redisAsyncContext* ac) {
  auto* p = static_cast<Events*>(ac->ev.data);
  p->before_wanted = true;
  AddWrite(p);
}

void StartTls(redisAsyncContext* ac, std::unique_ptr<TlsStream> stream, TlsEvent on_event) {
  auto* p = static_cast<Events*>(ac->ev.data);
  p->tls = std::move(stream);
  p->tls_event = on_event;
  Queue(p);  // the handshake starts once hiredis's connect handling has returned
}

bool AttachToLoop(redisAsyncContext* ac, uv_loop_s* loop) {
  if (ac->ev.data != nullptr) return false;
  auto* p = new Events{};
  p->context = ac;
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  p->handle.data = p;
  p->flusher = AcquireFlusher(loop);
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
