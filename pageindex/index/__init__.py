"""The page index: per-page bounds and counts (exact or from page headers), truncation, existing
indexes read back, and the appended tail (index blocks, new footer, marker) that holds them."""
