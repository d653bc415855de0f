#pragma once
// Which configured route a request falls under (proxy_config.hpp, Route).

#include <string_view>
#include <vector>

#include "proxy_config.hpp"

namespace idem::proxy {

/// The first route whose method and path match, or nullptr (the request is forwarded unguarded).
/// "/orders/*" matches "/orders/" and every path under it; "*" as method matches every method.
const Route* match_route(const std::vector<Route>& routes, std::string_view method,
                         std::string_view path) noexcept;

}  // namespace idem::proxy
