"""Query state stores from outside the app (interactive queries for operators): from the app's
Spark checkpoint or rebuilt from the store's changelog topic, behind one interface."""
