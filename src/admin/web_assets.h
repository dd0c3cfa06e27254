#pragma once
// The operator page (web/), compiled into the binary by cmake/embed_web.cmake.

#include <string_view>
#include <vector>

namespace lw {

struct WebAsset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;
  std::string_view etag;          // quoted, from the content's SHA-256
  std::string_view body;
};

const std::vector<WebAsset>& WebAssets();

}  // namespace lw
