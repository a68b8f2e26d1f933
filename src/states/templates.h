#pragma once

#include <asio/awaitable.hpp>
#include <string>

#include "states/registry.h"

namespace brine::states {

// A template rendered for a state: its text, or Salt's message why not.
struct rendered_template {
  std::string text;
  std::string error;
};

// `template: jinja` of file.managed and cmd.script: the file `local` (on
// this machine) rendered by Jinja with Salt's template context and
// `context` over it. Within a run every template renders with the run's
// compiler (one __salt__, __grains__ and __pillar__ for the whole run, as
// in Salt, and no rebuilding of them per template), one at a time, on the
// compile pool; outside a run, with a compiler of its own.
asio::awaitable<rendered_template> render_template_file(state_call c, std::string local,
                                                        std::string saltenv, json context);

}  // namespace brine::states
