#pragma once

#include <optional>
#include <string>

// How Salt splits an authorized_keys line (or the name of an ssh_auth
// state): `[options] ENC KEY [comment]`, where ENC starts with ssh-, ecds or
// sk- (Salt's regex ^(.*?)\s?((?:sk-)?(?:ssh\-|ecds)[\w@.-]+\s.+)$). Shared
// by the ssh module and the ssh_auth state.
namespace brine::modules::ssh {

struct key_line {
  std::string options;  // group 1: the options before the key type, maybe ""
  std::string rest;     // group 2: "ENC KEY [comment]"
};

// nullopt when the line holds no key type the regex knows.
std::optional<key_line> split_key_line(const std::string& line);

}  // namespace brine::modules::ssh
