"""App logic between the model and the pages: state, figures and explanations (plain functions of a trace)."""
