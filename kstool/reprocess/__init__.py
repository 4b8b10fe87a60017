"""`kstool reprocess`: recompute an app's outputs from a time, as an uninterrupted run would
have written them. `plan` decides where the app restarts and what it rewrites (changing
nothing); `apply` rolls the app back there and runs it once."""
