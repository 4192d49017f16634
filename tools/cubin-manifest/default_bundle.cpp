#include "cli.hpp"

cubinrt::Result<cubinrt::Bundle> cli::default_bundle() { return cubinrt::Bundle::embedded(); }
