"""The warm engine (`kstool engine start|stop|status`): a long-lived process per kstool home that
keeps a Spark session, its JVM and Python workers warm, and runs the Spark work of kstool
commands for thin clients over a private local socket."""
