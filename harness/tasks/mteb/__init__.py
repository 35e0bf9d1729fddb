"""mteb (task=mteb): any mteb task by name, evaluated by mteb on the model the harness loads."""
