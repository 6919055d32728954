"""Starting, supervising and stopping workers: runner, forkserver, schedule (the pool), ray_backend."""
