"""GL3xx: side streams and the caching allocator: releases, hand-offs, host reads."""
