# Turns the files of web/ and the runbooks (docs/runbooks.md) into a C++ source, so the agent
# binary serves its page and its runbooks with nothing to install beside it. Run by the build
# (see CMakeLists.txt):
#   cmake -DWEB_DIR=<dir> -DRUNBOOKS=<runbooks.md> -DOUT=<file.cc> -P embed_web.cmake
file(GLOB files RELATIVE ${WEB_DIR} ${WEB_DIR}/*)
list(SORT files)
set(arrays "")
set(entries "")
set(i 0)

# Appends the bytes of `path` to `arrays` as kData<i> (NUL-terminated) and sets `size` to their
# count.
macro(embed_bytes path)
  file(READ ${path} hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "const unsigned char kData${i}[] = {${bytes}0};\n")
endmacro()

foreach(name IN LISTS files)
  if(IS_DIRECTORY ${WEB_DIR}/${name} OR name MATCHES "^\\.")
    continue()
  endif()
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(name MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(name MATCHES "\\.svg$")
    set(type "image/svg+xml")
  elseif(name MATCHES "\\.png$")
    set(type "image/png")
  elseif(name MATCHES "\\.ico$")
    set(type "image/x-icon")
  else()
    message(FATAL_ERROR "web/${name}: add its content type to cmake/embed_web.cmake")
  endif()
  embed_bytes(${WEB_DIR}/${name})
  file(SHA256 ${WEB_DIR}/${name} digest)
  string(SUBSTRING ${digest} 0 16 etag)
  string(APPEND entries
    "    {\"/${name}\", \"${type}\", \"\\\"${etag}\\\"\", {reinterpret_cast<const char*>(kData${i}), ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
embed_bytes(${RUNBOOKS})
file(WRITE ${OUT} "// Generated from web/ and docs/runbooks.md by cmake/embed_web.cmake. Do not edit.
#include \"admin/runbooks_page.h\"
#include \"admin/web_assets.h\"

namespace lw {
namespace {
${arrays}}  // namespace

const std::vector<WebAsset>& WebAssets() {
  static const std::vector<WebAsset> assets = {
${entries}  };
  return assets;
}

std::string_view RunbooksMarkdown() {
  return {reinterpret_cast<const char*>(kData${i}), ${size}};
}

}  // namespace lw
")
