#!/usr/bin/env python3
"""Independent length-prefixed SHA-256 (PRODUCT.md section 4) for tests.

Each argument is one component; the literal argument NULL is a null
component (length -1, no bytes)."""
import hashlib
import struct
import sys

h = hashlib.sha256()
for arg in sys.argv[1:]:
    if arg == "NULL":
        h.update(struct.pack(">i", -1))
    else:
        b = arg.encode("utf-8")
        h.update(struct.pack(">i", len(b)))
        h.update(b)
print(h.hexdigest())
