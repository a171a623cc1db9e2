"""Triage reports: Markdown (step summary), self-contained HTML, versioned JSON."""
