"""The process a command runs in: threads, devices, progress bars, warnings once per job, the run
directory's lock, PNG plots. Imports no torch at package level (threads.py must run first)."""
