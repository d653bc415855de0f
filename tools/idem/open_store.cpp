#include "open_store.hpp"

#include <exception>

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
  error = "unknown store URI '" + uri + "': this idem opens " + (forms.empty() ? "none" : forms);
  return nullptr;
}

}  // namespace idem::cli
