#include "open_store.hpp"

#include <exception>

#include "secrets.hpp"
#include "uri_openers.hpp"  // generated: kUriOpeners, each built backend's opener

namespace idem::cli {

std::unique_ptr<admin::Admin> open_store(const std::string& uri, const admin::UriOptions& options,
                                         std::string& error) {
  std::string forms;
  try {
    for (const admin::UriOpener* opener : kUriOpeners) {
      if (std::unique_ptr<admin::Admin> admin = opener->open(uri, options)) return admin;
      forms += (forms.empty() ? "" : ", ") + std::string(opener->forms);
    }
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
  // The scheme alone: the rest of an unknown URI may hold a password.
  const std::string scheme = scheme_of(uri);
  error = "unknown store URI" + (scheme.empty() ? "" : " scheme '" + scheme + ":'") +
          ": this idem opens " + (forms.empty() ? "none" : forms);
  return nullptr;
}

}  // namespace idem::cli
