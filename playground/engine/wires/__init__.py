"""The wire-style family: one module per way a planned turn goes on the wire (see `base.WireStyle`),
listed by dotted path in `registry.WIRE_STYLE_CLASSES`. docs/architecture.md#wire-styles draws it."""
