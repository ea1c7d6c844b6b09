"""Context packs, packing, paging, eviction, resources, the pressure report and the session
lifecycle (seeds 000 §5, 003).

It reads frames and facts, so it sits above both."""
