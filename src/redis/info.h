#pragma once
// The two facts lockwarden wants from a master's INFO server reply: who it is (run_id, new on
// every start) and how long it has been up. Pure: no sockets, no hiredis.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lw {

struct ServerInfo {
  std::string run_id;               // "" when the reply has none
  std::optional<int64_t> uptime_s;  // uptime_in_seconds; nullopt when missing or not a number
};

// Parses the bulk reply of INFO server: "key:value" lines ended by "\r\n" (or "\n"), with
// "# Section" comment lines and blank lines in between. Unknown keys, comment lines and
// lines that are not "key:value" are ignored; a field that is missing or malformed is left
// empty. Never throws.
ServerInfo ParseInfoServer(std::string_view text);

}  // namespace lw
