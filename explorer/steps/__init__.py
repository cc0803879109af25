"""The walk-through's steps: pure functions from a view and its trace to figures, tables and text."""
