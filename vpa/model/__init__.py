"""Pure data: quantities, object views, selectors, settings, feature gates and the clock (stdlib only)."""
