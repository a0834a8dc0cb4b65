#!/usr/bin/env bash
# After the suite: test/leftovers.sh.
exec bash "$(dirname "$0")/../leftovers.sh" check
