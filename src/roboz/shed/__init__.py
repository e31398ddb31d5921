"""The Shed: guarded host tools for agents."""
