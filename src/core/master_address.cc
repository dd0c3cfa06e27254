#include "core/master_address.h"

namespace lw {

std::string MasterAddress::Display() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace lw
