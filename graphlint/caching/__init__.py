"""The summary and result cache: where its files live and when they are reused (`store`),
and their data-only, checksummed format (`codec`)."""
