"""Connectors: where a pipeline reads (sources) and writes (targets), one file each."""
