#include "ext_pillar/ext_pillar.h"

namespace brine::ext_pillar {

interfaces builtin(const host& h) {
  return {
      {"cmd_json", cmd_json()},       {"cmd_yaml", cmd_yaml()},
      {"file_tree", file_tree(h.groups)}, {"http_json", http_json()},
      {"http_yaml", http_yaml()},     {"postgres", postgres(h.opts)},
  };
}

}  // namespace brine::ext_pillar
