#pragma once
// Attaches a hiredis async context to a libuv loop.
//
// We do not use <hiredis/adapters/libuv.h> from Debian's hiredis 0.14.1: its poll callback
// returns early on a libuv error status, and libuv reports POLLERR (a refused connect, a
// reset) exactly that way, so hiredis never learns the connection failed and the context
// hangs in "connecting" forever (hiredis issues #508 and #367, fixed upstream after 0.14).
// This adapter forwards the error to hiredis by letting it attempt the I/O.

#include <memory>
#include <string>

struct redisAsyncContext;
struct uv_loop_s;

namespace lw {

class TlsStream;

// Returns false if the poll handle could not be set up (the caller frees the context).
bool AttachToLoop(redisAsyncContext* ac, uv_loop_s* loop);

// Commands queued by the owner and written in one piece per loop turn (redis/script_batch.h):
// once RequestWrite(ac) was called, fn(arg) runs right before the context's next write, in
// this loop turn (or when a full socket buffer drains), and what it sends leaves in that
// write. ac must be attached (ConnectOnLoop) and connected.
void SetBeforeWrite(redisAsyncContext* ac, void (*fn)(void*), void* arg);
void RequestWrite(redisAsyncContext* ac);

// TLS (redis/tls.h) on a connected context: from here on the adapter does the context's reads
// and writes through `stream`; hiredis still formats commands into its output buffer and parses
// the replies. The handshake runs before the loop's next poll. on_event(ac, nullptr) is called
// once the handshake is done (the owner may send commands); on_event(ac, stream) when the
// handshake or a later read or write failed (stream->failure() says why), and the owner must
// then free the context. Call from the connect callback, before any command was sent.
using TlsEvent = void (*)(redisAsyncContext* ac, const TlsStream* failed);
void StartTls(redisAsyncContext* ac, std::unique_ptr<TlsStream> stream, TlsEvent on_event);

// Starts a non-blocking connect to host:port on loop, with ac->data = data and both callbacks
// set (hiredis 0.14 has no connect timeout: the caller runs its own timer). Returns nullptr,
// with the reason in *error, when the connect cannot even start.
// Note: hiredis resolves host names with a blocking getaddrinfo; use addresses (or names that
// resolve from /etc/hosts) for masters.
redisAsyncContext* ConnectOnLoop(uv_loop_s* loop, const std::string& host, int port, void* data,
                                 void (*on_connect)(const redisAsyncContext*, int status),
                                 void (*on_disconnect)(const redisAsyncContext*, int status),
                                 std::string* error);

}  // namespace lw
