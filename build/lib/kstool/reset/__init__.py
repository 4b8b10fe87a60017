"""`kstool reset`: the application reset tool (Kafka's kafka-streams-application-reset, done
completely): plan every change first, then apply it step by step, reporting what was done."""
