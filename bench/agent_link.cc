#include "agent_link.h"

#include <cstdlib>
#include <cstring>

namespace lw::bench {
namespace {

// The text right after `"name":` in a compact JSON line, or an empty view.
std::string_view After(std::string_view line, std::string_view name) {
  std::string key;
  key.reserve(name.size() + 3);
  key += '"';
  key += name;
  key += "\":";
  const auto at = line.find(key);
  return at == std::string_view::npos ? std::string_view{} : line.substr(at + key.size());
}

// The value of a string field (no escapes expected in the fields read here).
std::string_view StringField(std::string_view line, std::string_view name) {
  auto v = After(line, name);
  if (v.empty() || v[0] != '"') return {};
  v.remove_prefix(1);
  const auto end = v.find('"');
  return end == std::string_view::npos ? std::string_view{} : v.substr(0, end);
}

struct WriteRequest {
  uv_write_t req;
  std::string data;
};

}  // namespace

AgentLine ParseAgentLine(std::string_view line) {
  AgentLine out;
  if (line.starts_with("{\"event\":")) {
    out.is_event = true;
    out.error = StringField(line, "event");
    return out;
  }
  const auto id = After(line, "id");
  if (!id.empty() && (id[0] == '-' || (id[0] >= '0' && id[0] <= '9'))) {
    out.id = std::strtoll(std::string(id.substr(0, 24)).c_str(), nullptr, 10);
  }
  out.ok = After(line, "ok").starts_with("true");
  if (out.ok) {
    out.token = StringField(line, "token");
  } else {
    out.error = StringField(line, "error");
  }
  return out;
}

AgentLink::AgentLink(uv_loop_t* loop, const std::string& socket_path, OnConnected connected,
                     OnLine line, OnClosed closed)
    : connected_(std::move(connected)), line_(std::move(line)), closed_(std::move(closed)) {
  uv_pipe_init(loop, &pipe_, 0);
  pipe_.data = this;
  connect_.data = this;
  uv_pipe_connect(&connect_, &pipe_, socket_path.c_str(), [](uv_connect_t* req, int status) {
    auto* self = static_cast<AgentLink*>(req->data);
    if (status == 0 && !self->closing_) {
      self->open_ = true;
      uv_read_start(reinterpret_cast<uv_stream_t*>(&self->pipe_), Alloc, Read);
    }
    self->connected_(status);
  });
}

void AgentLink::Send(std::string_view line) {
  if (!open_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&pipe_);
  uv_buf_t b = uv_buf_init(const_cast<char*>(line.data()), static_cast<unsigned>(line.size()));
  const int n = uv_try_write(stream, &b, 1);
  size_t sent = n > 0 ? static_cast<size_t>(n) : 0;
  if (n < 0 && n != UV_EAGAIN) {
    Close();
    return;
  }
  if (sent == line.size()) return;
  // The socket is full (or earlier bytes are queued): queue the rest, in order.
  auto* w = new WriteRequest{{}, std::string(line.substr(sent))};
  w->req.data = w;
  b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  uv_write(&w->req, stream, &b, 1,
           [](uv_write_t* req, int) { delete static_cast<WriteRequest*>(req->data); });
}

void AgentLink::Close() {
  if (closing_) return;
  closing_ = true;
  open_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&pipe_), nullptr);
}

void AgentLink::Alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* self = static_cast<AgentLink*>(h->data);
  *buf = uv_buf_init(self->buf_, sizeof self->buf_);
}

void AgentLink::Read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* self = static_cast<AgentLink*>(s->data);
  if (n < 0) {
    const bool was_open = self->open_;
    self->Close();
    if (was_open) self->closed_();
    return;
  }
  std::string_view data(buf->base, static_cast<size_t>(n));
  // Whole lines straight from the read buffer; only a partial tail is copied.
  while (!data.empty()) {
    const auto nl = data.find('\n');
    if (nl == std::string_view::npos) {
      self->in_.append(data);
      break;
    }
    if (self->in_.empty()) {
      self->line_(data.substr(0, nl));
    } else {
      self->in_.append(data.substr(0, nl));
      const std::string line = std::move(self->in_);
      self->in_.clear();
      self->line_(line);
    }
    data.remove_prefix(nl + 1);
    if (self->closing_) return;
  }
}

}  // namespace lw::bench
