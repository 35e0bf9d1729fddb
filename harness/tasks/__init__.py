"""One folder per protocol (conf/task/ mirrored): what makes each protocol, and the plan every planner returns."""
