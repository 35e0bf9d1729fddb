"""The encoder pipeline every protocol that encodes shares: length-sorted token batches, padded or packed, prefetched."""
