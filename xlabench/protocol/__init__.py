"""What crosses between the parent and a worker process, framework-free, on the bottom floor: the typed,
versioned requests and replies, the timing plan and compile target a request carries, the timer names,
the environment variables a worker starts with, and the statuses of a reply and a row. Its modules:
README.md, Layout."""
